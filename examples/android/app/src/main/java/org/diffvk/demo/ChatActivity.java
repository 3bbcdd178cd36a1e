package org.diffvk.demo;

import android.app.Activity;
import android.os.Bundle;
import android.os.Handler;
import android.os.Looper;
import android.view.ViewGroup;
import android.widget.Button;
import android.widget.EditText;
import android.widget.LinearLayout;
import android.widget.ScrollView;
import android.widget.TextView;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

import diffvk.CancelledException;
import diffvk.ChatTemplate;
import diffvk.Diffvk;
import diffvk.DiffvkException;
import diffvk.Model;
import diffvk.Sampler;
import diffvk.Session;
import diffvk.Tokenizer;

/**
 * A multi-turn chat over a model directory: the checkpoint's chat template (ChatML for a model
 * without one, such as the bundled tiny-diff), replies streamed as they are generated, and what an app
 * needs around them:
 * - Send: the whole conversation goes to Session.generateText, which reuses the prefix the session
 *   already holds, so only the new message is computed;
 * - Regenerate: Session.rewind to where the last reply began, then the same prompt again;
 * - a conversation longer than the context goes on under the shift policy (OVERFLOW_SHIFT, keeping the
 *   system message);
 * - saved state: onPause writes the session state and the messages to the app's files dir; onCreate
 *   restores them (a state of another model or version is refused by the library and the chat starts
 *   over), so the conversation survives the app being stopped without prefilling it again;
 * - Cancel (Session.cancel) and Reset.
 * Every session call runs on one worker thread. No layout XML: the UI is built in code.
 */
public class ChatActivity extends Activity {
    private static final String SYSTEM = "You are a helpful assistant. Be brief.";
    private static final int CONTEXT = 512;
    private static final int MAX_TOKENS = 128;

    private final ExecutorService worker = Executors.newSingleThreadExecutor();
    private final Handler ui = new Handler(Looper.getMainLooper());
    // Worker-thread state.
    private Model model;
    private Session session;
    private Tokenizer tokenizer;
    private ChatTemplate template;
    private Sampler sampler;
    private final List<String> roles = new ArrayList<>();
    private final List<String> contents = new ArrayList<>();
    private int replyStart = -1;  // the session position where the last reply began (-1: unknown, e.g. after a shift)
    private int keep;             // the system message's tokens, never dropped by a context shift
    // UI.
    private TextView transcript;
    private ScrollView scroll;
    private EditText input;
    private Button send, regenerate, cancel, reset;
    private final StringBuilder shown = new StringBuilder();

    @Override
    protected void onCreate(Bundle state) {
        super.onCreate(state);
        final String dir = getIntent().getStringExtra("modelDir");
        LinearLayout col = Views.column(this);
        transcript = new TextView(this);
        transcript.setTextIsSelectable(true);
        scroll = new ScrollView(this);
        scroll.addView(transcript);
        col.addView(scroll, new LinearLayout.LayoutParams(ViewGroup.LayoutParams.MATCH_PARENT, 0, 1f));
        input = new EditText(this);
        input.setHint("message");
        col.addView(input);
        LinearLayout buttons = new LinearLayout(this);
        send = Views.button(this, buttons, "Send");
        regenerate = Views.button(this, buttons, "Regenerate");
        cancel = Views.button(this, buttons, "Cancel");
        reset = Views.button(this, buttons, "Reset");
        col.addView(buttons);
        setContentView(col);
        busy(true);
        cancel.setEnabled(false);

        send.setOnClickListener(v -> {
            final String text = input.getText().toString();
            if (text.isEmpty()) return;
            input.setText("");
            show("\n> " + text + "\n");
            busy(true);
            worker.execute(() -> {
                roles.add("user");
                contents.add(text);
                if (!reply()) {  // the message stays on screen, not in the conversation
                    roles.remove(roles.size() - 1);
                    contents.remove(contents.size() - 1);
                }
            });
        });
        regenerate.setOnClickListener(v -> {
            busy(true);
            worker.execute(() -> {
                if (roles.isEmpty() || !roles.get(roles.size() - 1).equals("assistant")) {
                    done("\n[nothing to regenerate]\n");
                    return;
                }
                roles.remove(roles.size() - 1);
                final String previous = contents.remove(contents.size() - 1);
                // Rewind to where the reply began (the prompt stays in the cache); without that point (a shift
                // during the reply), the prompt-prefix reuse of generateText finds what is still held.
                if (replyStart >= 0 && replyStart <= session.position()) session.rewind(replyStart);
                post("\n[regenerating]\n");
                if (!reply()) {  // the previous reply stays
                    roles.add("assistant");
                    contents.add(previous);
                }
            });
        });
        cancel.setOnClickListener(v -> {
            Session s = session;
            if (s != null) s.cancel();
        });
        reset.setOnClickListener(v -> {
            busy(true);
            worker.execute(() -> {
                session.reset();
                roles.subList(1, roles.size()).clear();  // the system message stays
                contents.subList(1, contents.size()).clear();
                replyStart = -1;
                done("\n[reset]\n");
            });
        });
        worker.execute(() -> open(dir));
    }

    @Override
    protected void onPause() {
        super.onPause();
        worker.execute(this::save);
    }

    @Override
    protected void onDestroy() {
        super.onDestroy();
        worker.execute(() -> {
            for (AutoCloseable c : new AutoCloseable[] {sampler, template, tokenizer, session, model}) {
                try {
                    if (c != null) c.close();
                } catch (Exception ignored) {
                    // closing never fails for these classes; nothing to report on the way out
                }
            }
        });
        worker.shutdown();
    }

    // ---- worker thread -------------------------------------------------------------------------------

    private void open(String dir) {
        try {
            Model.Options o = new Model.Options();
            Diffvk.setCacheDir(getCacheDir().getAbsolutePath());  // the pipeline cache: <cache>/diffvk/pipelines/
            model = Model.load(dir, o);
            session = model.newSession(CONTEXT);
            tokenizer = new Tokenizer(dir);
            try {
                template = ChatTemplate.load(dir);
            } catch (DiffvkException e) {  // no chat_template in the checkpoint (the bundled model): ChatML
                template = ChatTemplate.builtin("chatml", "", "");
            }
            sampler = new Sampler(0.7f, 40, 0.95f, System.nanoTime());
            roles.add("system");
            contents.add(SYSTEM);
            keep = tokenizer.encode(render(false), false).length;
            String restored = restore();
            done("model " + dir + " on " + model.deviceName() + ", chat template " + template.family() + ", context "
                 + session.capacity() + " tokens\n" + restored);
        } catch (DiffvkException e) {
            post("cannot open the model: [" + e.statusName() + "] " + e.getMessage() + "\n");
        }
    }

    private String render(boolean generationPrompt) {
        return template.apply(roles.toArray(new String[0]), contents.toArray(new String[0]), generationPrompt);
    }

    // Answers the conversation as it stands, streaming the reply; appends it as the assistant's message.
    // false: cancelled or an error (shown), the conversation unchanged.
    private boolean reply() {
        Session.GenerateOptions go = new Session.GenerateOptions();
        go.maxTokens = MAX_TOKENS;
        go.stop = template.endOfTurn().isEmpty() ? new String[0] : new String[] {template.endOfTurn()};
        go.overflow = Session.GenerateOptions.OVERFLOW_SHIFT;
        go.keep = keep;
        int[] prompt = tokenizer.encode(render(true), false);
        long t0 = System.nanoTime();
        try {
            Session.GenerateResult r = session.generateText(prompt, sampler, tokenizer, go, piece -> {
                post(piece);
                return true;
            });
            double secs = (System.nanoTime() - t0) / 1e9;
            roles.add("assistant");
            contents.add(r.text);
            // Held now: the prompt and every sampled token but the last.
            replyStart = r.shifts == 0 ? session.position() - Math.max(r.tokens - 1, 0) : -1;
            done(String.format("\n[%d tokens in %.1f s; %d of %d prompt tokens reused%s]\n", r.tokens, secs, r.reused,
                               prompt.length, r.shifts > 0 ? "; " + r.shifts + " context shifts" : ""));
            return true;
        } catch (CancelledException e) {
            replyStart = -1;
            done("\n[cancelled]\n");
        } catch (DiffvkException e) {
            replyStart = -1;
            done("\n[error " + e.statusName() + ": " + e.getMessage() + "]\n");
        }
        return false;
    }

    private File stateFile() {
        return new File(getFilesDir(), "chat.state");
    }

    private File messagesFile() {
        return new File(getFilesDir(), "chat.messages");
    }

    // Messages as lines "role<TAB>content" with \n and \\ escaped: no JSON library needed.
    private void save() {
        if (session == null) return;
        try {
            session.saveState(stateFile().getAbsolutePath());  // atomic
            StringBuilder b = new StringBuilder();
            for (int i = 0; i < roles.size(); ++i)
                b.append(roles.get(i)).append('\t').append(contents.get(i).replace("\\", "\\\\").replace("\n", "\\n")).append('\n');
            File tmp = new File(getFilesDir(), "chat.messages.tmp");
            Files.write(tmp.toPath(), b.toString().getBytes(StandardCharsets.UTF_8));
            if (!tmp.renameTo(messagesFile())) throw new IOException("cannot rename " + tmp);
        } catch (DiffvkException | IOException e) {
            post("\n[the conversation was not saved: " + e.getMessage() + "]\n");
        }
    }

    private String restore() {
        if (!stateFile().isFile() || !messagesFile().isFile()) return "";
        try {
            List<String> r = new ArrayList<>(), c = new ArrayList<>();
            for (String line : Files.readAllLines(messagesFile().toPath(), StandardCharsets.UTF_8)) {
                int tab = line.indexOf('\t');
                if (tab < 0) throw new IOException("a line without a role");
                r.add(line.substring(0, tab));
                c.add(unescape(line.substring(tab + 1)));
            }
            session.restoreState(stateFile().getAbsolutePath());  // refused, changing nothing, for another model
            roles.clear();
            contents.clear();
            roles.addAll(r);
            contents.addAll(c);
            replyStart = -1;
            StringBuilder b = new StringBuilder("[restored " + r.size() + " messages, " + session.position() + " tokens]\n");
            for (int i = 1; i < r.size(); ++i) b.append(r.get(i).equals("user") ? "\n> " : "\n").append(c.get(i)).append('\n');
            return b.toString();
        } catch (DiffvkException | IOException e) {
            return "[the saved conversation was not restored: " + e.getMessage() + "]\n";
        }
    }

    private static String unescape(String s) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length(); ++i) {
            char ch = s.charAt(i);
            if (ch == '\\' && i + 1 < s.length()) {
                char n = s.charAt(++i);
                b.append(n == 'n' ? '\n' : n);
            } else {
                b.append(ch);
            }
        }
        return b.toString();
    }

    // ---- to the UI thread ----------------------------------------------------------------------------

    private void post(String text) {
        ui.post(() -> show(text));
    }

    private void done(String text) {
        ui.post(() -> {
            show(text);
            busy(false);
        });
    }

    private void show(String text) {
        shown.append(text);
        transcript.setText(shown);
        scroll.post(() -> scroll.fullScroll(ScrollView.FOCUS_DOWN));
    }

    private void busy(boolean b) {
        send.setEnabled(!b);
        regenerate.setEnabled(!b);
        reset.setEnabled(!b);
        cancel.setEnabled(b);
    }
}
