package diffvk;

import java.io.File;
import java.util.Arrays;

import static diffvk.Checks.check;

/**
 * The JNI binding on a desktop JVM (CTest test 'jni'); no JUnit needed.
 *   java -Djava.library.path=<dir of libdiffvk_jni.so> -cp diffvk.jar diffvk.SessionTest <model dir> [more dirs]
 * Uses the first model directory that exists. Exit status 0 = every check passed.
 */
public final class SessionTest {
  interface Body {
    void run();
  }

  /** Runs body and checks it throws DiffvkException with this status; returns the exception. */
  private static DiffvkException expectError(int status, String what, Body body) {
    try {
      body.run();
    } catch (DiffvkException e) {
      check(e.status() == status, what + ": status " + e.status() + " (" + e.getMessage() + "), expected " + status);
      check(e.getMessage() != null && !e.getMessage().isEmpty(), what + ": empty message");
      System.out.println("  expected error for " + what + ": [" + e.statusName() + "] " + e.getMessage());
      return e;
    } catch (Throwable t) {
      check(false, what + ": threw " + t + " instead of DiffvkException");
      return null;
    }
    check(false, what + ": no exception");
    return null;
  }

  private static boolean allFinite(float[] v) {
    for (float x : v)
      if (Float.isNaN(x) || Float.isInfinite(x)) return false;
    return true;
  }

  public static void main(String[] args) {
    String dir = null;
    for (String a : args) {
      if (new File(a, "config.json").isFile()) {
        dir = a;
        break;
      }
    }
    if (dir == null) {
      System.err.println("SessionTest: no model directory with config.json among " + Arrays.toString(args));
      System.exit(2);
    }

    // Errors before any model exists.
    expectError(DiffvkException.IO_ERROR, "Model.load of a missing directory", () -> Model.load("/nonexistent/diffvk-model"));
    expectError(DiffvkException.INVALID_ARGUMENT, "Model.load(null)", () -> Model.load(null));
    Model.Options badPrecision = new Model.Options();
    badPrecision.precision = 42;
    expectError(DiffvkException.INVALID_ARGUMENT, "unknown precision", () -> Model.load("/nonexistent", badPrecision));

    Model model = Model.load(dir);
    int vocab = model.vocabSize();
    System.out.println("model " + dir + ": vocab " + vocab + ", bos " + model.bosToken() + ", eos " + model.eosToken()
        + ", device '" + model.deviceName() + "', precision " + (model.precision() == Model.PRECISION_FP16 ? "fp16" : "fp32"));
    check(vocab >= 256, "vocab >= 256");

    // A Q8_0 KV cache (Session.KV_Q8_0): the same calls, about half the cache bytes.
    Session q8 = new Session(model, 32, 0, Session.KV_Q8_0);
    float[] q8logits = q8.prefill(model.encode("Hi"));
    check(q8logits.length == vocab && allFinite(q8logits), "prefill over a Q8_0 KV cache");
    q8.close();
    expectError(DiffvkException.INVALID_ARGUMENT, "an unknown KV cache format", () -> new Session(model, 32, 0, 5));

    Session s = model.newSession(64);
    check(s.capacity() == 64, "capacity 64");
    int[] prompt = model.encode("Hello");
    float[] logits = s.prefill(prompt);
    check(logits.length == vocab, "prefill logits length " + logits.length + " == vocab " + vocab);
    check(allFinite(logits), "prefill logits finite");
    check(s.position() == prompt.length, "position after prefill");
    float[] step = s.decode(65);
    check(step.length == vocab && allFinite(step), "decode logits shape");

    // Greedy determinism: the same prompt twice (reset) and on a second session gives the same tokens.
    Sampler greedy = Sampler.greedy();
    s.reset();
    check(s.position() == 0, "position 0 after reset");
    long t0 = System.nanoTime();
    int[] a = s.generate(prompt, 16, greedy, false);
    double secs = (System.nanoTime() - t0) / 1e9;
    s.reset();
    int[] b = s.generate(prompt, 16, greedy, false);
    Session s2 = model.newSession(0);
    int[] c = s2.generate(prompt, 16, greedy, false);
    check(a.length == 16, "generated 16 tokens");
    check(Arrays.equals(a, b), "greedy is deterministic after reset: " + Arrays.toString(a) + " vs " + Arrays.toString(b));
    check(Arrays.equals(a, c), "greedy is deterministic across sessions: " + Arrays.toString(a) + " vs " + Arrays.toString(c));
    for (int t : a) check(t >= 0 && t < vocab, "token in range");
    System.out.printf("greedy: %s  (%.1f tokens/s incl. prefill)%n", Arrays.toString(a), a.length / secs);

    // Seeded sampling is reproducible; the greedy argmax matches the sampler on plain logits.
    try (Sampler x = new Sampler(0.8f, 40, 0.95f, 7); Sampler y = new Sampler(0.8f, 40, 0.95f, 7)) {
      s.reset();
      int[] sx = s.generate(prompt, 8, x, false);
      s.reset();
      int[] sy = s.generate(prompt, 8, y, false);
      check(Arrays.equals(sx, sy), "seeded sampling reproducible");
    }
    float[] fake = new float[vocab];
    fake[123] = 5.0f;
    check(greedy.sample(fake) == 123, "greedy picks the argmax");

    // Errors surface as DiffvkException with the C ABI's status and message; the session stays usable.
    s.reset();
    s.prefill(prompt);
    int pos = s.position();
    expectError(DiffvkException.INVALID_ARGUMENT, "decode(token = vocab)", () -> s.decode(vocab));
    expectError(DiffvkException.INVALID_ARGUMENT, "decode(token = -1)", () -> s.decode(-1));
    expectError(DiffvkException.INVALID_ARGUMENT, "prefill(null)", () -> s.prefill(null));
    expectError(DiffvkException.CONTEXT_OVERFLOW, "prefill beyond the context", () -> s.prefill(new int[100]));
    check(s.position() == pos, "session unchanged after errors");
    check(s.decode(66).length == vocab, "session usable after errors");
    expectError(DiffvkException.INVALID_ARGUMENT, "sample with no logits", () -> greedy.sample(new float[0]));
    expectError(DiffvkException.INVALID_ARGUMENT, "Sampler topK < 0", () -> new Sampler(1.0f, -1, 1.0f, 0));
    expectError(DiffvkException.INVALID_ARGUMENT, "model.close() while sessions are open", model::close);

    // Use after close.
    s.close();
    s.close();  // idempotent
    expectError(DiffvkException.INVALID_ARGUMENT, "decode after close", () -> s.decode(1));
    expectError(DiffvkException.INVALID_ARGUMENT, "prefill after close", () -> s.prefill(prompt));
    s2.close();
    greedy.close();
    expectError(DiffvkException.INVALID_ARGUMENT, "sample after close", () -> greedy.sample(fake));
    model.close();
    model.close();
    expectError(DiffvkException.INVALID_ARGUMENT, "newSession after model close", () -> model.newSession(0));
    expectError(DiffvkException.INVALID_ARGUMENT, "eosToken after model close", model::eosToken);

    Checks.finish("SessionTest");
  }
}
