package org.diffvk.demo;

import android.app.Activity;
import android.graphics.BitmapFactory;
import android.os.Bundle;
import android.os.Handler;
import android.os.Looper;
import android.view.ViewGroup;
import android.widget.Button;
import android.widget.EditText;
import android.widget.ImageView;
import android.widget.LinearLayout;
import android.widget.ScrollView;
import android.widget.TableLayout;
import android.widget.TableRow;
import android.widget.TextView;

import org.json.JSONArray;
import org.json.JSONException;
import org.json.JSONObject;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

import diffvk.Bench;
import diffvk.CancelledException;
import diffvk.DiffvkException;

/**
 * "Benchmark" screen: runs diffvk's benchmark (diffvk.Bench, the C diffvk_bench_run) with the "phone"
 * preset on a background thread, then shows the results as a table (the first array of objects in the
 * JSON report; the whole JSON when there is none) and the PNG plot. Cancel stops the run
 * (Bench.cancel -> the abort callback). The JSON and the PNG are kept in the files dir
 * (bench.json, bench.png: `adb shell run-as org.diffvk.demo cat files/bench.json`).
 */
public class BenchmarkActivity extends Activity {
    private final ExecutorService worker = Executors.newSingleThreadExecutor();
    private final Handler ui = new Handler(Looper.getMainLooper());
    private Bench bench;
    private EditText preset;
    private EditText modelDir;
    private Button run;
    private Button cancel;
    private TextView status;
    private TableLayout table;
    private ImageView plot;

    @Override
    protected void onCreate(Bundle state) {
        super.onCreate(state);
        LinearLayout col = Views.column(this);
        preset = new EditText(this);
        preset.setHint("preset: default | phone");
        preset.setText("phone");
        col.addView(preset);
        modelDir = new EditText(this);
        modelDir.setHint("model directory (optional)");
        modelDir.setText(getIntent().getStringExtra("modelDir"));
        col.addView(modelDir);
        LinearLayout buttons = new LinearLayout(this);
        run = Views.button(this, buttons, "Run benchmark");
        cancel = Views.button(this, buttons, "Cancel");
        cancel.setEnabled(false);
        col.addView(buttons);
        status = new TextView(this);
        col.addView(status);
        LinearLayout results = new LinearLayout(this);
        results.setOrientation(LinearLayout.VERTICAL);
        table = new TableLayout(this);
        table.setStretchAllColumns(true);
        results.addView(table);
        plot = new ImageView(this);
        plot.setAdjustViewBounds(true);
        results.addView(plot);
        ScrollView scroll = new ScrollView(this);
        scroll.addView(results);
        col.addView(scroll, new LinearLayout.LayoutParams(ViewGroup.LayoutParams.MATCH_PARENT, 0, 1f));
        setContentView(col);

        if (!Bench.available()) {
            status.setText("this build has no benchmark library (diffvk_bench)");
            run.setEnabled(false);
            return;
        }
        bench = new Bench();
        run.setOnClickListener(v -> start());
        cancel.setOnClickListener(v -> {
            status.setText("cancelling ...");
            bench.cancel();
        });
    }

    private void start() {
        final Bench.Options o = new Bench.Options();
        o.preset = preset.getText().toString().trim();
        String dir = modelDir.getText().toString().trim();
        o.modelDir = dir.isEmpty() ? null : dir;
        final File png = new File(getFilesDir(), "bench.png");
        final File json = new File(getFilesDir(), "bench.json");
        o.plotPath = png.getAbsolutePath();
        run.setEnabled(false);
        cancel.setEnabled(true);
        table.removeAllViews();
        plot.setImageDrawable(null);
        status.setText("running the '" + o.preset + "' benchmark ...");
        worker.execute(() -> {
            String report = null, message;
            long t0 = System.nanoTime();
            try {
                report = bench.run(null, o);
                try (FileOutputStream out = new FileOutputStream(json)) {
                    out.write(report.getBytes(StandardCharsets.UTF_8));
                }
                message = String.format("done in %.1f s; %s", (System.nanoTime() - t0) / 1e9, json);
            } catch (CancelledException e) {
                message = "cancelled";
            } catch (DiffvkException e) {
                message = "diffvk error [" + e.statusName() + "]: " + e.getMessage();
            } catch (IOException | RuntimeException e) {
                message = "error: " + e;
            }
            final String r = report, m = message;
            ui.post(() -> {
                status.setText(m);
                run.setEnabled(true);
                cancel.setEnabled(false);
                if (r != null) {
                    showTable(r);
                    if (png.isFile()) plot.setImageBitmap(BitmapFactory.decodeFile(png.getAbsolutePath()));
                }
            });
        });
    }

    /** The first array of objects in the report as rows (columns = the first row's keys); else the JSON text. */
    private void showTable(String report) {
        try {
            JSONArray rows = firstObjectArray(new JSONObject(report));
            if (rows == null) {
                addRow(new JSONObject(report).toString(2));
                return;
            }
            JSONObject first = rows.getJSONObject(0);
            TableRow header = new TableRow(this);
            for (Iterator<String> k = first.keys(); k.hasNext();) header.addView(cell(k.next()));
            table.addView(header);
            for (int i = 0; i < rows.length(); ++i) {
                JSONObject row = rows.optJSONObject(i);
                if (row == null) continue;
                TableRow tr = new TableRow(this);
                for (Iterator<String> k = first.keys(); k.hasNext();) tr.addView(cell(String.valueOf(row.opt(k.next()))));
                table.addView(tr);
            }
        } catch (JSONException e) {
            addRow("the report is not JSON: " + e.getMessage() + "\n" + report);
        }
    }

    private static JSONArray firstObjectArray(JSONObject o) {
        for (Iterator<String> k = o.keys(); k.hasNext();) {
            Object v = o.opt(k.next());
            if (v instanceof JSONArray && ((JSONArray) v).length() > 0 && ((JSONArray) v).opt(0) instanceof JSONObject)
                return (JSONArray) v;
            if (v instanceof JSONObject) {
                JSONArray inner = firstObjectArray((JSONObject) v);
                if (inner != null) return inner;
            }
        }
        return null;
    }

    private TextView cell(String text) {
        TextView t = new TextView(this);
        t.setText(text);
        t.setPadding(4, 2, 4, 2);
        return t;
    }

    private void addRow(String text) {
        TableRow tr = new TableRow(this);
        tr.addView(cell(text));
        table.addView(tr);
    }

    @Override
    protected void onDestroy() {
        if (bench != null) bench.cancel();
        worker.shutdown();
        super.onDestroy();
    }
}
