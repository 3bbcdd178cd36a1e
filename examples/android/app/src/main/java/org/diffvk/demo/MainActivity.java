package org.diffvk.demo;

import android.app.Activity;
import android.content.Intent;
import android.os.Bundle;
import android.os.Handler;
import android.os.Looper;
import android.text.InputType;
import android.view.ViewGroup;
import android.widget.Button;
import android.widget.EditText;
import android.widget.LinearLayout;
import android.widget.ScrollView;
import android.widget.TextView;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

import diffvk.CancelledException;
import diffvk.Diffvk;
import diffvk.DiffvkException;
import diffvk.Model;
import diffvk.Sampler;
import diffvk.Session;

/**
 * Minimal diffvk demo: a model directory (the bundled assets/tiny-diff is copied to the app's files dir
 * on first run), or "asset:tiny-diff" to read it in place from the APK (AssetModels: descriptors, no
 * copy), a prompt, and Run / Cancel (Session.cancel) buttons. Generates greedily on a worker thread and
 * shows the text, the device, the precision and tokens/s. "Benchmark" opens BenchmarkActivity, "Chat" the
 * multi-turn ChatActivity (a model directory; not "asset:"). No
 * layout XML: the UI is built in code.
 */
public class MainActivity extends Activity {
    private static final String BUNDLED_MODEL = "tiny-diff";

    private final ExecutorService worker = Executors.newSingleThreadExecutor();
    private final Handler ui = new Handler(Looper.getMainLooper());
    private EditText modelPath;
    private EditText prompt;
    private EditText maxTokens;
    private TextView output;
    private Button run;
    private Button cancel;
    private volatile Session running;  // the session generating now (for Cancel)

    @Override
    protected void onCreate(Bundle state) {
        super.onCreate(state);
        LinearLayout col = Views.column(this);

        modelPath = field(col, "model directory (config.json + model.safetensors)");
        prompt = field(col, "prompt");
        prompt.setText("The Debian package manager");
        maxTokens = field(col, "new tokens");
        maxTokens.setInputType(InputType.TYPE_CLASS_NUMBER);
        maxTokens.setText("64");
        LinearLayout buttons = new LinearLayout(this);
        run = Views.button(this, buttons, "Run");
        cancel = Views.button(this, buttons, "Cancel");
        cancel.setEnabled(false);
        Button benchmark = Views.button(this, buttons, "Benchmark");
        Button chat = Views.button(this, buttons, "Chat");
        col.addView(buttons);
        cancel.setOnClickListener(v -> {
            Session s = running;
            if (s != null) s.cancel();
        });
        benchmark.setOnClickListener(v -> startActivity(
                new Intent(this, BenchmarkActivity.class).putExtra("modelDir", modelPath.getText().toString())));
        chat.setOnClickListener(v -> startActivity(
                new Intent(this, ChatActivity.class).putExtra("modelDir", modelPath.getText().toString())));
        output = new TextView(this);
        output.setTextIsSelectable(true);
        ScrollView scroll = new ScrollView(this);
        scroll.addView(output);
        col.addView(scroll, new LinearLayout.LayoutParams(ViewGroup.LayoutParams.MATCH_PARENT, 0, 1f));
        setContentView(col);

        File bundled = new File(getFilesDir(), BUNDLED_MODEL);
        modelPath.setText(bundled.getAbsolutePath());
        run.setEnabled(false);
        output.setText("preparing the bundled model ...");
        worker.execute(() -> {
            String msg;
            try {
                msg = copyAssetDir(BUNDLED_MODEL, bundled) ? "bundled model ready: " + bundled
                                                           : "no bundled model in the APK; enter a model directory";
            } catch (IOException e) {
                msg = "copying the bundled model failed: " + e;
            }
            final String m = msg;
            ui.post(() -> {
                output.setText(m);
                run.setEnabled(true);
            });
        });
        run.setOnClickListener(v -> generate());
    }

    private EditText field(LinearLayout col, String hint) {
        EditText e = new EditText(this);
        e.setHint(hint);
        e.setSingleLine(true);
        col.addView(e);
        return e;
    }

    private void generate() {
        final String dir = modelPath.getText().toString();
        final String text = prompt.getText().toString();
        int n;
        try {
            n = Integer.parseInt(maxTokens.getText().toString());
        } catch (NumberFormatException e) {
            n = 64;
        }
        final int newTokens = n;
        run.setEnabled(false);
        cancel.setEnabled(true);
        output.setText("running ...");
        worker.execute(() -> {
            String result;
            Model.Options o = new Model.Options();
            Diffvk.setCacheDir(getCacheDir().getAbsolutePath());  // the pipeline cache: <cache>/diffvk/pipelines/
            long t0 = System.nanoTime();
            try (Model model = dir.startsWith("asset:") ? AssetModels.load(getAssets(), dir.substring(6), o)
                                                        : Model.load(dir, o)) {
                long t1 = System.nanoTime();
                int[] promptTokens = withBos(model, model.encode(text));
                int[] out;
                long t2, t3;
                try (Session s = model.newSession(0); Sampler greedy = Sampler.greedy()) {
                    running = s;
                    t2 = System.nanoTime();
                    try {
                        out = s.generate(promptTokens, newTokens, greedy, true);
                    } finally {
                        running = null;
                    }
                    t3 = System.nanoTime();
                }
                double secs = (t3 - t2) / 1e9;
                result = text + model.decodeText(out) + "\n\n"
                        + "device: " + model.deviceName() + "\n"
                        + "precision: " + (model.precision() == Model.PRECISION_FP16 ? "fp16 storage" : "fp32") + "\n"
                        + String.format("load %.0f ms; %d prompt + %d new tokens in %.2f s = %.1f tokens/s",
                                        (t1 - t0) / 1e6, promptTokens.length, out.length, secs,
                                        out.length / Math.max(secs, 1e-9));
            } catch (CancelledException e) {
                result = "cancelled";
            } catch (DiffvkException e) {
                result = "diffvk error [" + e.statusName() + "]: " + e.getMessage();
            } catch (IOException e) {
                result = "cannot open the model assets (stored uncompressed?): " + e;
            } catch (RuntimeException e) {
                result = "error: " + e;
            }
            final String r = result;
            ui.post(() -> {
                output.setText(r);
                run.setEnabled(true);
                cancel.setEnabled(false);
            });
        });
    }

    private static int[] withBos(Model model, int[] tokens) {
        int bos = model.bosToken();
        if (bos < 0) return tokens;
        int[] t = new int[tokens.length + 1];
        t[0] = bos;
        System.arraycopy(tokens, 0, t, 1, tokens.length);
        return t;
    }

    /** Copies assets/<name>/ (flat) to dest once; false when the APK has no such asset directory. */
    private boolean copyAssetDir(String name, File dest) throws IOException {
        String[] files = getAssets().list(name);
        if (files == null || files.length == 0) return false;
        File done = new File(dest, ".copied");
        if (done.isFile()) return true;
        if (!dest.isDirectory() && !dest.mkdirs()) throw new IOException("cannot create " + dest);
        byte[] buf = new byte[1 << 16];
        for (String f : files) {
            try (InputStream in = getAssets().open(name + "/" + f);
                 OutputStream out = new FileOutputStream(new File(dest, f))) {
                int r;
                while ((r = in.read(buf)) > 0) out.write(buf, 0, r);
            }
        }
        if (!done.createNewFile() && !done.isFile()) throw new IOException("cannot create " + done);
        return true;
    }

    @Override
    protected void onDestroy() {
        worker.shutdown();
        super.onDestroy();
    }
}
