package diffvk;

import java.io.FileDescriptor;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import static diffvk.Checks.check;

/**
 * The v1 additions of the Java binding on a desktop JVM (CTest test 'jni_v1'): Session.cancel(), rewind,
 * tokens, prefillReusing and saved state, the log
 * handler, Model.loadFromMemory and Model.loadFromFds (what Android asset loading uses), Options.weights,
 * Options.q4_0Head / quantDecode / quantPrefill and Model.quantDecodePath / quantPrefillPath,
 * Tokenizer.fromGgufFd / fromJsonFd / fromSentencePieceFd.
 *   java --add-opens java.base/java.io=ALL-UNNAMED -Djava.library.path=... -cp diffvk.jar diffvk.V1Test <model dir> [<.gguf>
 *   [<tests/data/tokenizer>]]
 * (--add-opens: a desktop JVM has no public way to get a descriptor's number; Android has ParcelFileDescriptor.getFd()).
 */
public final class V1Test {
  private static int fdOf(RandomAccessFile f) throws Exception {
    FileDescriptor d = f.getFD();
    java.lang.reflect.Field field = FileDescriptor.class.getDeclaredField("fd");
    field.setAccessible(true);
    return field.getInt(d);
  }

  private static ByteBuffer direct(byte[] b) {
    ByteBuffer buf = ByteBuffer.allocateDirect(b.length);
    buf.put(b);
    buf.flip();
    return buf;
  }

  public static void main(String[] args) throws Exception {
    String dir = args[0];
    Model.Options opts = new Model.Options();
    opts.validation = 1;
    check(Diffvk.version().matches("\\d+\\.\\d+\\.\\d+"), "version " + Diffvk.version());

    // Log handler: Model.load's info line arrives; removed, nothing more arrives.
    List<String> lines = new ArrayList<>();
    Diffvk.setLogHandler((level, message) -> {
      synchronized (lines) {
        lines.add(level + " " + message);
      }
    }, Diffvk.LOG_INFO);
    Model model = Model.load(dir, opts);
    boolean seen;
    synchronized (lines) {
      seen = lines.stream().anyMatch(l -> l.startsWith(Diffvk.LOG_INFO + " ") && l.contains("layers, E="));
    }
    check(seen, "the model-load line reached the LogHandler at LOG_INFO: " + lines);
    Diffvk.setLogHandler(null, Diffvk.LOG_INFO);
    int before = lines.size();
    Model.load(dir, opts).close();
    check(lines.size() == before, "no log after the handler was removed");

    // cancel(): the cancelled call throws CancelledException and changes nothing; the session stays usable.
    int[] prompt = model.encode("Hello, cancellable world! 0123456789");
    try (Session s = model.newSession(64)) {
      float[] ref = s.prefill(prompt);
      s.reset();
      s.cancel();  // no call running: the next one is cancelled
      try {
        s.prefill(prompt);
        check(false, "prefill after cancel() did not throw");
      } catch (CancelledException e) {
        check(e.status() == DiffvkException.CANCELLED, "CancelledException status " + e.status());
      }
      check(s.position() == 0, "position unchanged after a cancelled prefill");
      float[] again = s.prefill(prompt);
      check(Arrays.equals(ref, again), "the same logits after a cancelled prefill");
    }

    // rewind, tokens, prefillReusing: rewinding to the prefix and prefilling another turn gives
    // the logits of a session that never held the dropped turn, bit for bit.
    int[] head = Arrays.copyOf(prompt, 6);
    int[] turn1 = Arrays.copyOfRange(prompt, 6, prompt.length);
    int[] turn2 = new int[] {prompt[1], prompt[2], prompt[3]};
    try (Session fresh = model.newSession(64); Session s = model.newSession(64)) {
      fresh.prefill(head);
      float[] want = fresh.prefill(turn2);
      s.prefill(head);
      s.prefill(turn1);
      check(Arrays.equals(s.tokens(), prompt), "tokens() after two prefills");
      try {
        s.rewind(prompt.length + 1);
        check(false, "rewind past the position was accepted");
      } catch (DiffvkException e) {
        check(e.status() == DiffvkException.INVALID_ARGUMENT, "rewind past the position: INVALID_ARGUMENT");
      }
      s.rewind(head.length);
      check(s.position() == head.length, "position after rewind");
      check(Arrays.equals(s.prefill(turn2), want), "rewind + prefill: the logits of a fresh session");
      // Holding head + turn2, given head + turn1 it keeps the head only; then the reference is head, turn1.
      int[] full = prompt;
      Session.Reuse r = s.prefillReusing(full);
      check(r.reused == head.length, "prefillReusing kept " + r.reused + " tokens, expected " + head.length);
      fresh.rewind(head.length);
      check(Arrays.equals(r.logits, fresh.prefill(turn1)), "prefillReusing: the logits of head then turn 1");
      check(Arrays.equals(s.tokens(), full), "tokens() after prefillReusing");
      // Saved state: restored into the fresh session (bytes and file), the next decode is bit-identical.
      byte[] state = s.saveState();
      float[] next = s.decode(65);
      fresh.restoreState(state);
      check(fresh.position() == full.length, "position after restoreState");
      check(Arrays.equals(fresh.decode(65), next), "restoreState(byte[]): the saved session's next logits");
      Path statePath = Files.createTempFile("diffvk-state", ".bin");
      s.rewind(full.length);
      s.saveState(statePath.toString());
      fresh.restoreState(statePath.toString());
      check(Arrays.equals(fresh.decode(65), next), "restoreState(path): the saved session's next logits");
      Files.deleteIfExists(statePath);
      state[state.length / 2] ^= 1;
      try {
        fresh.restoreState(state);
        check(false, "a corrupt state was accepted");
      } catch (DiffvkException e) {
        check(e.status() == DiffvkException.INVALID_ARGUMENT && e.getMessage().contains("checksum"),
              "a corrupt state: INVALID_ARGUMENT naming the checksum: " + e.getMessage());
      }
    }

    // Tokenizer and Session.generateText: streamed text, a stop string across tokens, cancel.
    try (Tokenizer tok = new Tokenizer(dir); Sampler greedy = Sampler.greedy(); Session s = model.newSession(0)) {
      int[] ids = tok.encode("Hello", false);
      check(tok.decode(ids).equals("Hello"), "Tokenizer: decode(encode(text)) == text");
      Session.GenerateOptions go = new Session.GenerateOptions();
      go.maxTokens = 16;
      go.eosToken = -1;
      StringBuilder streamed = new StringBuilder();
      Session.GenerateResult all = s.generateText(prompt, greedy, tok, go, piece -> {
        streamed.append(piece);
        return true;
      });
      check(all.stopReason == Session.GenerateResult.MAX_TOKENS && all.tokens == 16, "generateText: 16 tokens");
      // (Pieces end on whole UTF-8 characters, except that the bundled bytes tokenizer may emit broken ones.)
      if (all.text.indexOf('\uFFFD') < 0) check(streamed.toString().equals(all.text), "generateText: the streamed pieces are the text");
      check(s.position() == prompt.length + 15, "generateText: the session holds all but the last token");
      // Speculative decoding with prompt-lookup drafts: the same text and session position.
      s.reset();
      go.draft = Session.GenerateOptions.DRAFT_LOOKUP;
      Session.GenerateResult spec = s.generateText(prompt, greedy, tok, go, null);
      check(spec.text.equals(all.text) && spec.tokens == 16 && spec.accepted <= spec.drafted,
            "generateText with DRAFT_LOOKUP: the same text (" + spec.accepted + " of " + spec.drafted + " drafted kept)");
      check(s.position() == prompt.length + 15, "generateText with DRAFT_LOOKUP: the same session position");
      go.draftK = 0;
      try {
        s.generateText(prompt, greedy, tok, go, null);
        check(false, "draftK 0 was accepted");
      } catch (DiffvkException e) {
        check(e.status() == DiffvkException.INVALID_ARGUMENT && e.getMessage().contains("speculate.k"),
              "draftK 0: INVALID_ARGUMENT naming it: " + e.getMessage());
      }
      go.draft = Session.GenerateOptions.DRAFT_NONE;
      go.draftK = 8;
      // A stop string of three characters from the middle of the text, on a reset session: it ends there.
      String stop = null;
      for (int k = 2; k + 3 <= all.text.length() && stop == null; ++k) {
        String c = all.text.substring(k, k + 3);
        if (c.chars().allMatch(ch -> ch >= 0x20 && ch < 0x7F)) stop = c;  // printable ASCII: the same in bytes and chars
      }
      if (stop != null) {
        s.reset();
        go.stop = new String[] {"\u0001never\u0002", stop};
        Session.GenerateResult cut = s.generateText(prompt, greedy, tok, go, null);
        check(cut.stopReason == Session.GenerateResult.STOP_STRING && cut.stopIndex == 1, "generateText: stopped by stop[1]");
        check(cut.text.equals(all.text.substring(0, all.text.indexOf(stop))), "generateText: the text before the stop string");
      }
      go.stop = new String[0];
      int[] calls = {0};
      Session.GenerateResult cancelled = s.generateText(prompt, greedy, tok, go, piece -> ++calls[0] < 2);
      check(cancelled.stopReason == Session.GenerateResult.CANCELLED && calls[0] == 2, "generateText: cancelled by the listener");
      go.stop = new String[] {""};
      try {
        s.generateText(prompt, greedy, tok, go, null);
        check(false, "an empty stop string was accepted");
      } catch (DiffvkException e) {
        check(e.status() == DiffvkException.INVALID_ARGUMENT && e.getMessage().contains("stop string 0"),
              "an empty stop string: INVALID_ARGUMENT naming it: " + e.getMessage());
      }
    }

    // Context shift: generation runs past a context of 48 under OVERFLOW_SHIFT; the history
    // keeps the whole conversation; shift and prefillShifting directly.
    try (Tokenizer tok = new Tokenizer(dir); Sampler greedy = Sampler.greedy(); Session s = model.newSession(48)) {
      Session.GenerateOptions go = new Session.GenerateOptions();
      go.maxTokens = 80;
      go.eosToken = -1;
      go.overflow = Session.GenerateOptions.OVERFLOW_SHIFT;
      go.keep = 3;
      Session.GenerateResult r = s.generateText(prompt, greedy, tok, go, null);
      check(r.tokens == 80 && r.shifts >= 2, "generateText with OVERFLOW_SHIFT: 80 tokens, " + r.shifts + " shifts");
      int[] history = s.history();
      check(history.length == prompt.length + 79 && s.position() <= 48, "history(): the whole conversation");
      int held = s.position();
      s.shift(3, 5);
      check(s.position() == held - 5, "shift(3, 5): five tokens fewer");
      int[] more = Arrays.copyOf(history, history.length + 1);
      more[history.length] = 7;
      Session.Reuse reuse = s.prefillShifting(more, 3);
      check(reuse.reused == held - 5, "prefillShifting: only the new token runs");
      try {
        s.shift(3, 0);
        check(false, "shift(3, 0) was accepted");
      } catch (DiffvkException e) {
        check(e.status() == DiffvkException.INVALID_ARGUMENT, "shift(3, 0): INVALID_ARGUMENT");
      }
    }

    // ChatTemplate: a family by name renders the ChatML text; the bundled model has no template.
    try (ChatTemplate ct = ChatTemplate.builtin("chatml", null, null)) {
      check(ct.family().equals("chatml"), "ChatTemplate.family");
      check(ct.endOfTurn().equals("<|im_end|>"), "ChatTemplate.endOfTurn");
      String text = ct.apply(new String[] {"system", "user"}, new String[] {"Be brief.", "Héllo"}, true);
      check(text.equals("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHéllo<|im_end|>\n<|im_start|>assistant\n"),
            "ChatTemplate.apply: " + text);
    }
    try {
      ChatTemplate.load(dir).close();
      check(false, "a model without a chat template loaded one");
    } catch (DiffvkException e) {
      check(e.status() == DiffvkException.INVALID_ARGUMENT && e.getMessage().contains("no chat template"),
            "no chat template: INVALID_ARGUMENT: " + e.getMessage());
    }

    // Sampler.Options: a repetition penalty changes the greedy choice once the token was accepted.
    Sampler.Options so = new Sampler.Options();
    so.repeatPenalty = 2.0f;
    try (Sampler sp = new Sampler(so)) {
      float[] lg = new float[] {2.0f, 1.9f, -1.0f};
      check(sp.sample(lg) == 0, "greedy before accept");
      sp.accept(0);
      check(sp.sample(lg) == 1, "repeat penalty after accept(0)");
    }
    so.minP = 2.0f;
    try {
      new Sampler(so).close();
      check(false, "minP 2 was accepted");
    } catch (DiffvkException e) {
      check(e.status() == DiffvkException.INVALID_ARGUMENT && e.getMessage().contains("min_p"), "minP 2: " + e.getMessage());
    }

    // Loading from memory and from descriptors gives the same model.
    byte[] cfg = Files.readAllBytes(Paths.get(dir, "config.json"));
    byte[] st = Files.readAllBytes(Paths.get(dir, "model.safetensors"));
    float[] want;
    try (Session s = model.newSession(0)) {
      want = s.prefill(prompt);
    }
    try (Model m = Model.loadFromMemory(direct(cfg), direct(st), opts); Session s = m.newSession(0)) {
      check(Arrays.equals(want, s.prefill(prompt)), "loadFromMemory: same logits");
    }
    try {
      Model.loadFromMemory(ByteBuffer.wrap(cfg), direct(st), opts);
      check(false, "a heap ByteBuffer was accepted");
    } catch (DiffvkException e) {
      check(e.status() == DiffvkException.INVALID_ARGUMENT, "heap ByteBuffer: INVALID_ARGUMENT");
    }
    Path pack = Files.createTempFile("diffvk-assets", ".pack");  // like an APK: files at offsets in one file
    byte[] pad = new byte[] {1, 2, 3, 4, 5, 6, 7};
    try (java.io.OutputStream o = Files.newOutputStream(pack)) {
      o.write(pad);
      o.write(cfg);
      o.write(pad);
      o.write(st);
      o.write(pad);
    }
    try (RandomAccessFile f = new RandomAccessFile(pack.toFile(), "r")) {
      int fd = fdOf(f);
      try (Model m = Model.loadFromFds(fd, pad.length, cfg.length, fd, 2L * pad.length + cfg.length, st.length, opts);
           Session s = m.newSession(0)) {
        check(Arrays.equals(want, s.prefill(prompt)), "loadFromFds: same logits");
      }
      // The self-test's config from the same ranges (what loadFromFds passes it): the config.json range as it is.
      check(new String(cfg, java.nio.charset.StandardCharsets.UTF_8).equals(
                Model.configOfFds(fd, pad.length, cfg.length, fd, 2L * pad.length + cfg.length, st.length)),
          "configOfFds: the config.json range");
      check(Model.configOfFds(-1, 0, 0, fd, 2L * pad.length + cfg.length, st.length) == null,
          "configOfFds: null for a safetensors range without a config");
      try {
        Model.loadFromFds(fd, pad.length, cfg.length, fd, 2L * pad.length + cfg.length + 1, st.length, opts);
        check(false, "a shifted range was accepted");
      } catch (DiffvkException e) {
        check(e.status() == DiffvkException.FORMAT_ERROR, "shifted range: FORMAT_ERROR (" + e.getMessage() + ")");
      }
    } finally {
      Files.deleteIfExists(pack);
    }
    // The model's config for the self-test at load (Options.selftestModel): configOf gives a directory's config.json;
    // an unreadable model gives null, and a text the config parser refuses is the load's INVALID_ARGUMENT.
    String cfgText = new String(Files.readAllBytes(Paths.get(dir, "config.json")), java.nio.charset.StandardCharsets.UTF_8);
    check(cfgText.equals(Model.configOf(dir)), "configOf(dir): the config.json text");
    check(Model.configOf(dir + "/no-such-model") == null, "configOf: null for a missing model");
    Model.Options badModel = new Model.Options();
    badModel.selftestModel = "{\"hidden_size\": 32";
    try {
      Model.load(dir, badModel).close();
      check(false, "a broken selftestModel was accepted");
    } catch (DiffvkException e) {
      check(e.status() == DiffvkException.INVALID_ARGUMENT && e.getMessage().contains("selftest_model"),
          "a broken selftestModel: INVALID_ARGUMENT naming selftest_model (" + e.getMessage() + ")");
    }
    // A .gguf (args[1], written by `diffvk quantize` in a CTest fixture) from a path, memory and a descriptor.
    if (args.length > 1) {
      byte[] gguf = Files.readAllBytes(Paths.get(args[1]));
      float[] g;
      try (Model m = Model.load(args[1], opts); Session s = m.newSession(0)) {
        g = s.prefill(prompt);
      }
      try (Model m = Model.loadGgufFromMemory(direct(gguf), opts); Session s = m.newSession(0)) {
        check(Arrays.equals(g, s.prefill(prompt)), "loadGgufFromMemory: the logits of the file");
      }
      try (RandomAccessFile f = new RandomAccessFile(args[1], "r");
           Model m = Model.loadGgufFromFd(fdOf(f), 0, -1, opts); Session s = m.newSession(0)) {
        check(Arrays.equals(g, s.prefill(prompt)), "loadGgufFromFd: the logits of the file");
      }
      // Its tokenizer from the same descriptor range as from the path.
      try (RandomAccessFile f = new RandomAccessFile(args[1], "r");
           Tokenizer byPath = new Tokenizer(args[1]); Tokenizer byFd = Tokenizer.fromGgufFd(fdOf(f), 0, -1)) {
        check(Arrays.equals(byPath.encode("The cat", true), byFd.encode("The cat", true)), "Tokenizer.fromGgufFd: the file's tokenizer");
        check(byFd.decode(byFd.encode("The cat", false)).equals("The cat"), "Tokenizer.fromGgufFd: round trip");
      }
      // Its config for the self-test (Options.selftestModel; configOf): what its metadata stands for, the same
      // sizes as the directory's config.json.
      String gc = Model.configOf(args[1]);
      check(gc != null && gc.contains("\"num_heads\"") && gc.contains("\"hidden_size\""), "configOf(.gguf): " + gc);
      try (RandomAccessFile f = new RandomAccessFile(args[1], "r")) {
        check(gc.equals(Model.configOfFds(-1, 0, 0, fdOf(f), 0, -1)), "configOfFds(.gguf range): configOf's text");
      }
      try {
        Model.loadGgufFromMemory(direct(st), opts);
        check(false, "a safetensors file was accepted as a .gguf");
      } catch (DiffvkException e) {
        check(e.status() == DiffvkException.INVALID_ARGUMENT, "safetensors as a .gguf: INVALID_ARGUMENT (" + e.getMessage() + ")");
      }
    }

    // tokenizer.json (+ tokenizer_config.json) and tokenizer.model (args[2]: tests/data/tokenizer) as descriptor ranges of one
    // file, between other bytes (an APK's assets): the tokenizers of their directories.
    if (args.length > 2) {
      byte[] json = Files.readAllBytes(Paths.get(args[2], "llama3-bpe", "tokenizer.json"));
      byte[] tc = Files.readAllBytes(Paths.get(args[2], "llama3-bpe", "tokenizer_config.json"));
      byte[] spm = Files.readAllBytes(Paths.get(args[2], "spm-unigram", "tokenizer.model"));
      Path assets = Files.createTempFile("diffvk-v1test-tok", ".bin");
      try {
        byte[] gap = "junk".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
        long jOff = gap.length, tcOff = jOff + json.length + gap.length, sOff = tcOff + tc.length + gap.length;
        try (java.io.OutputStream o = Files.newOutputStream(assets)) {
          for (byte[] b : new byte[][] {gap, json, gap, tc, gap, spm, gap}) o.write(b);
        }
        String text = "Hello<|eot_id|> w\u00f6rld, 123";
        try (RandomAccessFile f = new RandomAccessFile(assets.toFile(), "r");
             Tokenizer jsonDir = new Tokenizer(Paths.get(args[2], "llama3-bpe").toString());
             Tokenizer jsonFd = Tokenizer.fromJsonFd(fdOf(f), jOff, json.length, fdOf(f), tcOff, tc.length, -1, 0, 0);
             Tokenizer bare = Tokenizer.fromJsonFd(fdOf(f), jOff, json.length);
             Tokenizer spmDir = new Tokenizer(Paths.get(args[2], "spm-unigram").toString());
             Tokenizer spmFd = Tokenizer.fromSentencePieceFd(fdOf(f), sOff, spm.length)) {
          for (boolean special : new boolean[] {false, true}) {
            check(Arrays.equals(jsonDir.encode(text, special), jsonFd.encode(text, special)), "Tokenizer.fromJsonFd: the directory's ids");
            check(Arrays.equals(spmDir.encode(text, special), spmFd.encode(text, special)), "Tokenizer.fromSentencePieceFd: the directory's ids");
          }
          check(jsonFd.decode(jsonFd.encode(text, false)).equals(text), "Tokenizer.fromJsonFd: round trip");
          check(Arrays.equals(bare.encode(text, false), jsonFd.encode(text, false)), "Tokenizer.fromJsonFd without configs: same ids");
          check(f.getFilePointer() == 0, "pread: the descriptor's offset did not move");
          try {
            Tokenizer.fromJsonFd(fdOf(f), jOff, json.length / 2).close();
            check(false, "a truncated tokenizer.json was accepted");
          } catch (DiffvkException e) {
            check(e.status() == DiffvkException.FORMAT_ERROR && e.getMessage().contains("tokenizer.json (fd"),
                  "truncated tokenizer.json: FORMAT_ERROR naming it (" + e.getMessage() + ")");
          }
          try {
            Tokenizer.fromSentencePieceFd(fdOf(f), sOff, spm.length + 100).close();
            check(false, "a range past the end was accepted");
          } catch (DiffvkException e) {
            check(e.status() == DiffvkException.IO_ERROR, "range past the end: IO_ERROR (" + e.getMessage() + ")");
          }
          try {
            Tokenizer.fromSentencePieceFd(-1, 0, -1).close();
            check(false, "descriptor -1 was accepted");
          } catch (DiffvkException e) {
            check(e.status() == DiffvkException.INVALID_ARGUMENT, "descriptor -1: INVALID_ARGUMENT (" + e.getMessage() + ")");
          }
        }
      } finally {
        Files.deleteIfExists(assets);
      }
    }

    // Options.weights (diffvk_model_options.weights): Q8_0 / Q4_0 load from every source, give finite logits
    // near the f16 ones (quantization noise only) and really differ from them; an unknown value is refused.
    for (int w : new int[] {Model.WEIGHTS_Q8_0, Model.WEIGHTS_Q4_0}) {
      Model.Options qo = new Model.Options();
      qo.validation = 1;
      qo.weights = w;
      float[] q;
      try (Model m = Model.load(dir, qo); Session s = m.newSession(0)) {
        q = s.prefill(prompt);
      }
      float worst = 0, span = 0;
      for (int i = 0; i < q.length; ++i) {
        check(Float.isFinite(q[i]), "weights " + w + ": finite logits");
        worst = Math.max(worst, Math.abs(q[i] - want[i]));
        span = Math.max(span, Math.abs(want[i]));
      }
      // Relative to the largest f16 logit. The random test model amplifies Q4_0 noise (measured 0.21 of the span,
      // Q8_0 0.012); c_api_v1_weights checks the trained model tightly. A broken format is off by the span.
      float bound = (w == Model.WEIGHTS_Q8_0 ? 0.05f : 0.4f) * span;
      System.out.println("V1Test: weights " + w + ": max |logit - f16| " + worst + ", bound " + bound);
      check(worst > 0 && worst < bound, "weights " + w + ": max |logit - f16| " + worst + ", bound " + bound);
      try (Model m = Model.loadFromMemory(direct(cfg), direct(st), qo); Session s = m.newSession(0)) {
        check(Arrays.equals(q, s.prefill(prompt)), "weights " + w + ": loadFromMemory gives the directory's logits");
      }
    }
    Model.Options badWeights = new Model.Options();
    badWeights.weights = 7;
    try {
      Model.load(dir, badWeights).close();
      check(false, "weights 7 was accepted");
    } catch (DiffvkException e) {
      check(e.status() == DiffvkException.INVALID_ARGUMENT && e.getMessage().contains("weights value 7"),
            "weights 7: INVALID_ARGUMENT naming the value (" + e.getMessage() + ")");
    }

    // Options.q4_0Head, quantDecode, quantPrefill (diffvk_model_options, since 1.1): a forced path is what
    // quantDecodePath() / quantPrefillPath() report, from every source; f16 weights have no quantized path;
    // q4_0Head reaches the loader (lm_head Q4_0 instead of Q8_0 changes the logits); an unknown path is refused.
    check(model.quantDecodePath() == Model.QUANT_PATH_AUTO && model.quantPrefillPath() == Model.QUANT_PATH_AUTO,
          "f16 weights: quant paths AUTO (none)");
    Model.Options qp = new Model.Options();
    qp.validation = 1;
    qp.weights = Model.WEIGHTS_Q4_0;
    qp.q4_0Head = true;
    qp.quantDecode = Model.QUANT_PATH_DEQUANT;
    qp.quantPrefill = Model.QUANT_PATH_DEQUANT;
    float[] head4;
    try (Model m = Model.loadFromMemory(direct(cfg), direct(st), qp); Session s = m.newSession(0)) {
      check(m.quantDecodePath() == Model.QUANT_PATH_DEQUANT && m.quantPrefillPath() == Model.QUANT_PATH_DEQUANT,
            "forced DEQUANT reported: " + m.quantDecodePath() + ", " + m.quantPrefillPath());
      head4 = s.prefill(prompt);
    }
    try (RandomAccessFile c = new RandomAccessFile(Paths.get(dir, "config.json").toFile(), "r");
         RandomAccessFile w = new RandomAccessFile(Paths.get(dir, "model.safetensors").toFile(), "r");
         Model m = Model.loadFromFds(fdOf(c), 0, -1, fdOf(w), 0, -1, qp); Session s = m.newSession(0)) {
      check(m.quantDecodePath() == Model.QUANT_PATH_DEQUANT, "loadFromFds: forced DEQUANT reported");
      check(Arrays.equals(head4, s.prefill(prompt)), "loadFromFds: the q4_0Head logits of loadFromMemory");
    }
    qp.q4_0Head = false;
    try (Model m = Model.load(dir, qp); Session s = m.newSession(0)) {
      check(m.quantPrefillPath() == Model.QUANT_PATH_DEQUANT, "load(dir): forced DEQUANT reported");
      check(!Arrays.equals(head4, s.prefill(prompt)), "q4_0Head changes the logits (lm_head Q4_0, not Q8_0)");
    }
    qp.quantPrefill = 5;
    try {
      Model.load(dir, qp).close();
      check(false, "quantPrefill 5 was accepted");
    } catch (DiffvkException e) {
      check(e.status() == DiffvkException.INVALID_ARGUMENT && e.getMessage().contains("quant_prefill value 5"),
            "quantPrefill 5: INVALID_ARGUMENT naming the field (" + e.getMessage() + ")");
    }
    model.close();

    // The benchmark through the library (diffvk_bench_run): cancel() before the run stops it with
    // CancelledException; then the phone preset with a 1 s budget returns its JSON report.
    if (Bench.available()) {
      Bench bench = new Bench();
      Bench.Options bo = new Bench.Options();
      bo.preset = "phone";
      bo.budgetSeconds = 1;
      bench.cancel();
      try {
        bench.run(opts, bo);
        check(false, "Bench.run after cancel() did not throw");
      } catch (CancelledException e) {
        check(e.status() == DiffvkException.CANCELLED, "Bench CancelledException status " + e.status());
      }
      String json = bench.run(opts, bo);
      check(json.contains("\"preset\"") && json.contains("\"phone\""), "Bench JSON names the phone preset");
      check(json.contains("thermal"), "Bench JSON has the thermal readings");
      bench.close();
    } else {
      check(false, "the JNI library was built without diffvk_bench");
    }
    Checks.finish("V1Test");
  }
}
