package diffvk;

/**
 * Token sampling (diffvk_sampler): temperature 0 = greedy (argmax); top-k 0 = off; top-p 1 = off.
 * temperature must be finite and >= 0, top-p finite and in (0, 1] (else INVALID_ARGUMENT). Methods are
 * synchronized (one call at a time); give each thread its own Sampler to avoid contention.
 */
public final class Sampler implements AutoCloseable {
  private long handle;

  public Sampler(float temperature, int topK, float topP, long seed) {
    Native.load();
    handle = nativeCreate(temperature, topK, topP, seed);
  }

  /** Every control (diffvk_sampler_options): min-p and the repetition, frequency and presence penalties too. */
  public static final class Options {
    public float temperature = 0.0f;
    public int topK = 0;
    public float topP = 1.0f;
    public long seed = 0;
    /** Drop tokens below minP x the top token's probability; 0 = off; in [0, 1]. */
    public float minP = 0.0f;
    /** CTRL repetition penalty over the last penaltyLastN accepted tokens; 1 = off; in (0, 100]. */
    public float repeatPenalty = 1.0f;
    /** Subtracted per occurrence; 0 = off; in [-2, 2]. */
    public float frequencyPenalty = 0.0f;
    /** Subtracted once per token seen; 0 = off; in [-2, 2]. */
    public float presencePenalty = 0.0f;
    public int penaltyLastN = 64;
  }
  public Sampler(Options o) {
    Native.load();
    handle = nativeCreateWithOptions(o.temperature, o.topK, o.topP, o.seed, o.minP, o.repeatPenalty, o.frequencyPenalty,
                                     o.presencePenalty, o.penaltyLastN);
  }
  /** Records a token of the sequence (the prompt's, then each one used) for the penalties. */
  public synchronized void accept(int token) {
    nativeAccept(handle, token);
  }
  public static Sampler greedy() {
    return new Sampler(0.0f, 0, 1.0f, 0);
  }

  /** The next token for these logits (one row of vocabSize floats). */
  public synchronized int sample(float[] logits) {
    return nativeSample(handle, logits);
  }

  synchronized long handle() {
    if (handle == 0) throw new DiffvkException(DiffvkException.INVALID_ARGUMENT, "Sampler: used after close()");
    return handle;
  }

  /** Idempotent; sample() after close throws DiffvkException (INVALID_ARGUMENT). */
  @Override
  public synchronized void close() {
    if (handle != 0) {
      nativeDestroy(handle);
      handle = 0;
    }
  }

  static native long nativeCreate(float temperature, int topK, float topP, long seed);
  static native long nativeCreateWithOptions(float temperature, int topK, float topP, long seed, float minP,
                                             float repeatPenalty, float frequencyPenalty, float presencePenalty,
                                             int penaltyLastN);
  static native void nativeAccept(long sampler, int token);
  static native void nativeDestroy(long sampler);
  static native int nativeSample(long sampler, float[] logits);
}
