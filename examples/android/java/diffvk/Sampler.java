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

  public static Sampler greedy() {
    return new Sampler(0.0f, 0, 1.0f, 0);
  }

  /** The next token for these logits (one row of vocabSize floats). */
  public synchronized int sample(float[] logits) {
    return nativeSample(handle, logits);
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
  static native void nativeDestroy(long sampler);
  static native int nativeSample(long sampler, float[] logits);
}
