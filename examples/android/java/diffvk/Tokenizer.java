package diffvk;

import java.nio.charset.StandardCharsets;

/**
 * Text <-> token ids (diffvk_tokenizer): a model directory's tokenizer.model (SentencePiece), else
 * tokenizer.json (byte-level BPE), else config.json alone (the bytes tokenizer of the bundled tiny models);
 * a .gguf file's (a path ending in .gguf, or fromGgufFd); tokenizer.json / tokenizer.model from descriptor ranges
 * (fromJsonFd, fromSentencePieceFd: Android assets).
 * Pure CPU, immutable: encode/decode may run on many threads at once.
 */
public final class Tokenizer implements AutoCloseable {
  private long handle;

  public Tokenizer(String modelDir) {
    Native.load();
    handle = nativeLoad(modelDir);
  }

  private Tokenizer(long handle) {
    this.handle = handle;
  }

  /**
   * The tokenizer of a .gguf file as a byte range of an open descriptor (an uncompressed asset:
   * AssetManager.openFd); length -1 = to the end. The same range Model.loadGgufFromFd loads.
   */
  public static Tokenizer fromGgufFd(int fd, long offset, long length) {
    Native.load();
    return new Tokenizer(nativeLoadFd(fd, offset, length));
  }

  /**
   * A Hugging Face tokenizer.json as a byte range of an open descriptor (an uncompressed asset: AssetManager.openFd;
   * length -1 = to the end), without tokenizer_config.json / config.json (no BOS/EOS unless its post-processor adds one).
   */
  public static Tokenizer fromJsonFd(int fd, long offset, long length) {
    return fromJsonFd(fd, offset, length, -1, 0, 0, -1, 0, 0);
  }

  /**
   * tokenizer.json with the tokenizer_config.json and config.json that name BOS and EOS, each a descriptor range
   * (fd -1 = that file is absent): the tokenizer new Tokenizer(dir) gives for a directory holding those files.
   */
  public static Tokenizer fromJsonFd(int fd, long offset, long length, int tokenizerConfigFd, long tokenizerConfigOffset,
                                     long tokenizerConfigLength, int configFd, long configOffset, long configLength) {
    Native.load();
    return new Tokenizer(nativeLoadJsonFd(fd, offset, length, tokenizerConfigFd, tokenizerConfigOffset, tokenizerConfigLength,
                                          configFd, configOffset, configLength));
  }

  /** A SentencePiece tokenizer.model as a byte range of an open descriptor (length -1 = to the end). */
  public static Tokenizer fromSentencePieceFd(int fd, long offset, long length) {
    Native.load();
    return new Tokenizer(nativeLoadSentencePieceFd(fd, offset, length));
  }

  /** The ids of UTF-8 text; addSpecial: the special tokens the tokenizer adds (e.g. BOS). */
  public synchronized int[] encode(String text, boolean addSpecial) {
    return nativeEncode(handle, text.getBytes(StandardCharsets.UTF_8), addSpecial);
  }

  /** The bytes of the ids (UTF-8 text, broken byte sequences as U+FFFD). */
  public synchronized byte[] decodeBytes(int[] ids) {
    return nativeDecode(handle, ids);
  }

  public String decode(int[] ids) {
    return new String(decodeBytes(ids), StandardCharsets.UTF_8);
  }

  synchronized long handle() {
    if (handle == 0) throw new DiffvkException(DiffvkException.INVALID_ARGUMENT, "Tokenizer: used after close()");
    return handle;
  }

  /** Idempotent. */
  @Override
  public synchronized void close() {
    if (handle != 0) {
      nativeFree(handle);
      handle = 0;
    }
  }

  static native long nativeLoad(String dir);
  static native long nativeLoadFd(int fd, long offset, long length);
  static native long nativeLoadJsonFd(int fd, long offset, long length, int tcFd, long tcOffset, long tcLength, int cFd,
                                      long cOffset, long cLength);
  static native long nativeLoadSentencePieceFd(int fd, long offset, long length);
  static native void nativeFree(long tokenizer);
  static native int[] nativeEncode(long tokenizer, byte[] text, boolean addSpecial);
  static native byte[] nativeDecode(long tokenizer, int[] ids);
}
