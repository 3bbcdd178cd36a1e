package diffvk;

/**
 * One sequence with its KV cache (diffvk_session). Threading: Sessions of the same Model may run
 * concurrently on different threads (one Session per conversation, each on its own thread, is the
 * intended use); the methods are synchronized, so one Session runs one call at a time even if it is
 * shared. On any error (DiffvkException) the session is unchanged (a failed prefill leaves the position
 * and the cache as before) and stays usable, except after close(), when every call throws
 * DiffvkException (INVALID_ARGUMENT), and after a {@link DeviceLostException}, after which every call on
 * the Model and its Sessions throws DeviceLostException: close them and load the Model again.
 */
public final class Session implements AutoCloseable {
  /** Receives each generated token; return false to stop early. */
  public interface TokenListener {
    boolean onToken(int token);
  }

  private final Model model;
  private final int vocab;
  private long handle;
  private final long cancelFlag;  // freed by close(); read without the lock by cancel()

  /** KV cache formats (the C ABI's DIFFVK_KV_*): the storage type, or GGUF Q8_0 blocks (about half the bytes). */
  public static final int KV_F16 = 0;
  public static final int KV_Q8_0 = 1;

  /** contextLength 0 = the model's max_position_embeddings; chunk 0 = automatic (from the matmul tile and the memory plan). */
  public Session(Model model, int contextLength, int chunk) {
    this(model, contextLength, chunk, KV_F16);
  }

  /** As above, with the KV cache's format: {@link #KV_F16} or {@link #KV_Q8_0} (another value: DiffvkException). */
  public Session(Model model, int contextLength, int chunk, int kvCache) {
    this.model = model;
    this.vocab = model.vocabSize();
    long flag = nativeNewCancelFlag();
    try {
      this.handle = nativeCreate(model.handle(), contextLength, chunk, kvCache, flag);
    } catch (RuntimeException e) {
      nativeFreeCancelFlag(flag);
      throw e;
    }
    this.cancelFlag = flag;
  }

  /**
   * Stops the prefill/decode/generate running on another thread (or, when none is running, the next
   * call) with a {@link CancelledException}, within about one layer of GPU work: a long prefill does
   * not have to finish first. Not synchronized (it is meant to be called while a call holds the lock).
   * The cancelled call changes nothing; the session stays usable.
   */
  public void cancel() {
    synchronized (cancelLock) {
      if (!closed) nativeCancel(cancelFlag);
    }
  }

  private final Object cancelLock = new Object();  // cancel() vs close() freeing the flag
  private boolean closed;                          // guarded by cancelLock

  public Model model() {
    return model;
  }

  /** Appends tokens to the sequence; returns the logits of the last one (vocabSize floats). */
  public synchronized float[] prefill(int[] tokens) {
    return nativePrefill(handle, tokens, vocab);
  }

  /** Appends one token; returns its logits (vocabSize floats). */
  public synchronized float[] decode(int token) {
    return nativeDecode(handle, token, vocab);
  }

  /** Empties the KV cache (position 0). */
  public synchronized void reset() {
    nativeReset(handle);
  }

  /**
   * Rewind (regenerate, edit a turn): keeps the first n tokens (0 <= n <= position()) and forgets the
   * rest, without recomputing the kept prefix; the next prefill or decode continues at position n.
   */
  public synchronized void rewind(int n) {
    nativeRewind(handle, n);
  }
  /** The ids of the tokens the session holds, positions 0 .. position()-1. */
  public synchronized int[] tokens() {
    return nativeTokens(handle);
  }
  /** The result of {@link #prefillReusing}: the last token's logits and how many tokens were kept. */
  public static final class Reuse {
    public final float[] logits;
    public final int reused;
    Reuse(float[] logits, int reused) {
      this.logits = logits;
      this.reused = reused;
    }
  }
  /**
   * Prompt-prefix reuse: keeps the longest common prefix of tokens() and {@code tokens} (at most
   * tokens.length - 1 of them), prefills only the rest and returns the last token's logits, those of
   * prefill(tokens) on a fresh session. Bad input is refused before anything changes; a failure while
   * running leaves the session holding the kept prefix.
   */
  public synchronized Reuse prefillReusing(int[] tokens) {
    int[] reused = new int[1];
    float[] logits = nativePrefillReusing(handle, tokens, vocab, reused);
    return new Reuse(logits, reused[0]);
  }
  /**
   * Context shift (docs/context-overflow.md): drops the tokens at positions keep .. keep + discard - 1 and
   * moves the later ones down, their cached keys re-rotated on the device; nothing is recomputed. The moved
   * rows are approximate (they attended to the dropped tokens): prefillReusing keeps at most keep of them.
   * Where the self-test of the shift kernel at its first use fails, a DiffvkException (unsupported) naming the op
   * and the variant, and nothing changes.
   */
  public synchronized void shift(int keep, int discard) {
    nativeShift(handle, keep, discard);
  }
  /** Every token given since reset: tokens() plus those shifts dropped, in order. */
  public synchronized int[] history() {
    return nativeHistory(handle);
  }
  /**
   * Prefill under the shift policy: keeps the common prefix with history() when it reaches what the
   * session holds (a conversation that only grew), prefills the rest and shifts out half of what follows
   * keep whenever the next chunk does not fit. tokens may be longer than the context.
   */
  public synchronized Reuse prefillShifting(int[] tokens, int keep) {
    int[] reused = new int[1];
    float[] logits = nativePrefillShifting(handle, tokens, keep, vocab, reused);
    return new Reuse(logits, reused[0]);
  }
  /**
   * Saved state (app suspend/resume, a saved system prompt): the tokens held and their KV cache rows
   * (docs/session-state.md). restoreState refuses (DiffvkException INVALID_ARGUMENT, naming what differs)
   * a state of another model, precision or version, a corrupt one, or one longer than capacity(), and
   * then changes nothing. A restored session continues exactly as the saved one would.
   */
  public synchronized byte[] saveState() {
    return nativeSaveState(handle);
  }
  public synchronized void restoreState(byte[] state) {
    nativeRestoreState(handle, state);
  }
  /** Writes the state to path atomically. */
  public synchronized void saveState(String path) {
    nativeSaveStateFile(handle, path);
  }
  public synchronized void restoreState(String path) {
    nativeRestoreStateFile(handle, path);
  }
  /** Tokens in the KV cache. */
  public synchronized int position() {
    return nativePosition(handle);
  }

  /** KV-cache capacity in tokens. */
  public synchronized int capacity() {
    return nativeCapacity(handle);
  }

  /** Greedy/sampled next token for logits from prefill/decode. */
  public static int sample(Sampler sampler, float[] logits) {
    return sampler.sample(logits);
  }

  /**
   * Convenience loop: prefill(prompt), then up to maxNewTokens times sample + decode. Stops at EOS
   * (included in the result) when stopAtEos, or when the KV cache is full. Returns the new tokens.
   */
  public int[] generate(int[] prompt, int maxNewTokens, Sampler sampler, boolean stopAtEos) {
    return generate(prompt, maxNewTokens, sampler, stopAtEos, null);
  }

  public synchronized int[] generate(int[] prompt, int maxNewTokens, Sampler sampler, boolean stopAtEos,
                                     TokenListener listener) {
    if (maxNewTokens < 0) throw new DiffvkException(DiffvkException.INVALID_ARGUMENT, "generate: maxNewTokens < 0");
    int eos = stopAtEos ? model.eosToken() : -1;
    int[] out = new int[maxNewTokens];
    int n = 0;
    if (maxNewTokens == 0) return out;
    float[] logits = prefill(prompt);
    while (n < maxNewTokens) {
      int tok = sampler.sample(logits);
      out[n++] = tok;
      if (listener != null && !listener.onToken(tok)) break;
      if (tok == eos) break;
      if (n == maxNewTokens || position() >= capacity()) break;
      logits = decode(tok);
    }
    return java.util.Arrays.copyOf(out, n);
  }

  /** Receives each piece of generated text once it is final; return false to stop (StopReason CANCELLED). */
  public interface TextListener {
    boolean onText(String piece);
  }

  /** diffvk_generate_options. */
  public static final class GenerateOptions {
    public int maxTokens = 64;
    /** Stop strings (at most 16, each non-empty and at most 256 UTF-8 bytes); they may span tokens. */
    public String[] stop = new String[0];
    /** The token that ends generation: -2 = the model's (default), -1 = none. */
    public int eosToken = -2;
    public static final int OVERFLOW_REFUSE = 0, OVERFLOW_SHIFT = 1;
    /** OVERFLOW_REFUSE (default): a conversation beyond the context is an error; OVERFLOW_SHIFT: context shift. */
    public int overflow = OVERFLOW_REFUSE;
    /** OVERFLOW_SHIFT: the tokens at the start that are never dropped (a system prompt). */
    public int keep = 0;
    public static final int DRAFT_NONE = 0, DRAFT_LOOKUP = 1, DRAFT_MODEL = 2;
    /**
     * DRAFT_LOOKUP: speculative decoding with prompt-lookup drafts (greedy: the same tokens; sampling: the same distribution), up to
     * draftK tokens (1 ... 16) per pass, matching n-grams of up to draftNgram tokens (1 ... 16). DRAFT_MODEL: the drafts are
     * draftSession's greedy tokens (a session of a smaller model sharing the tokenizer, not this session; locked for the call).
     */
    public int draft = DRAFT_NONE;
    public int draftK = 7;  // a pass of 8 rows (GenerateOptions' default in C and C++)
    public int draftNgram = 3;
    public Session draftSession = null;
  }

  /** diffvk_generate_result plus the text. */
  public static final class GenerateResult {
    public static final int EOS = 0, STOP_STRING = 1, MAX_TOKENS = 2, CANCELLED = 3;
    public String text;
    public int tokens;
    public int reused;
    public int stopReason;
    /** Index into GenerateOptions.stop of the stop string that matched, else -1. */
    public int stopIndex;
    /** Context shifts made while sampling (OVERFLOW_SHIFT). */
    public int shifts;
    /** Speculation (DRAFT_LOOKUP): passes of drafted rows, tokens drafted, drafted tokens kept. */
    public int verifyPasses, drafted, accepted;
  }

  // Collects the pieces' bytes (the text) and hands each piece to the listener (called from native code).
  private static final class Pieces {
    final java.io.ByteArrayOutputStream all = new java.io.ByteArrayOutputStream();
    final TextListener listener;
    Pieces(TextListener listener) {
      this.listener = listener;
    }
    boolean piece(byte[] b) {
      all.write(b, 0, b.length);
      return listener == null || listener.onText(new String(b, java.nio.charset.StandardCharsets.UTF_8));
    }
  }

  /**
   * diffvk_session_generate: prefills the prompt with prompt-prefix reuse, then samples up to maxTokens tokens,
   * streaming final text to the listener (may be null), ending at EOS, a stop string (not emitted, nor what
   * follows) or when the listener returns false. Afterwards the session holds the prompt and every sampled token
   * but the last.
   */
  public synchronized GenerateResult generateText(int[] prompt, Sampler sampler, Tokenizer tokenizer,
                                                  GenerateOptions options, TextListener listener) {
    if (prompt == null || sampler == null || tokenizer == null || options == null || options.stop == null)
      throw new DiffvkException(DiffvkException.INVALID_ARGUMENT, "Session.generateText: a null argument");
    byte[][] stop = new byte[options.stop.length][];
    for (int i = 0; i < stop.length; ++i) {
      if (options.stop[i] == null)
        throw new DiffvkException(DiffvkException.INVALID_ARGUMENT, "Session.generateText: stop[" + i + "] is null");
      stop[i] = options.stop[i].getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }
    Pieces pieces = new Pieces(listener);
    int[] out = new int[8];
    Session d = options.draft == GenerateOptions.DRAFT_MODEL ? options.draftSession : null;
    Object draftLock = d != null ? d : new Object();
    synchronized (sampler) {
      synchronized (draftLock) {
        nativeGenerate(handle, sampler.handle(), tokenizer.handle(), prompt, options.maxTokens, stop, options.eosToken,
                       options.overflow, options.keep, options.draft, options.draftK, options.draftNgram,
                       d != null ? d.handle : 0, pieces, out);
      }
    }
    GenerateResult r = new GenerateResult();
    r.text = new String(pieces.all.toByteArray(), java.nio.charset.StandardCharsets.UTF_8);
    r.tokens = out[0];
    r.reused = out[1];
    r.stopReason = out[2];
    r.stopIndex = out[3];
    r.shifts = out[4];
    r.verifyPasses = out[5];
    r.drafted = out[6];
    r.accepted = out[7];
    return r;
  }

  /** Idempotent. */
  @Override
  public synchronized void close() {
    if (handle != 0) {
      nativeDestroy(handle);
      handle = 0;
      synchronized (cancelLock) {
        closed = true;
        nativeFreeCancelFlag(cancelFlag);
      }
    }
  }

  static native void nativeGenerate(long session, long sampler, long tokenizer, int[] prompt, int maxTokens, byte[][] stop,
                                    int eosToken, int overflow, int keep, int draft, int draftK, int draftNgram,
                                    long draftSession, Object pieces, int[] out);
  static native long nativeNewCancelFlag();
  static native void nativeFreeCancelFlag(long flag);
  static native void nativeCancel(long flag);
  static native long nativeCreate(long model, int contextLength, int chunk, int kvCache, long cancelFlag);
  static native void nativeDestroy(long session);
  static native float[] nativePrefill(long session, int[] tokens, int vocab);
  static native float[] nativeDecode(long session, int token, int vocab);
  static native void nativeReset(long session);
  static native void nativeRewind(long session, int n);
  static native int[] nativeTokens(long session);
  static native int[] nativeHistory(long session);
  static native void nativeShift(long session, int keep, int discard);
  static native float[] nativePrefillShifting(long session, int[] tokens, int keep, int vocab, int[] reused);
  static native float[] nativePrefillReusing(long session, int[] tokens, int vocab, int[] reused);
  static native byte[] nativeSaveState(long session);
  static native void nativeRestoreState(long session, byte[] state);
  static native void nativeSaveStateFile(long session, String path);
  static native void nativeRestoreStateFile(long session, String path);
  static native int nativePosition(long session);
  static native int nativeCapacity(long session);
}
