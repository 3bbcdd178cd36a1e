package diffvk;

import java.nio.charset.StandardCharsets;

/**
 * A Vulkan context plus one loaded checkpoint (a directory with config.json and model.safetensors).
 * Thread-safe: any number of {@link Session}s of one Model may run concurrently on different threads
 * (one Session per conversation; a Session itself runs one call at a time). After a
 * {@link DeviceLostException} every call on the Model and its Sessions throws it again: close them
 * and load the Model again. Close sessions first:
 * closing a model while one of its sessions is open throws (INVALID_ARGUMENT) and leaves it open.
 *
 * <pre>
 * try (Model m = Model.load("/data/user/0/app/files/tiny-diff");
 *      Session s = m.newSession(0);
 *      Sampler greedy = Sampler.greedy()) {
 *   int[] out = s.generate(m.encode("Debian is"), 32, greedy, true);
 *   String text = m.decodeText(out);
 * }
 * </pre>
 */
public final class Model implements AutoCloseable {
  public static final int PRECISION_AUTO = 0;
  public static final int PRECISION_FP16 = 1;
  public static final int PRECISION_FP32 = 2;
  /** Options.selftest (diffvk_context_options.selftest, DIFFVK_SELFTEST_*). */
  public static final int SELFTEST_AUTO = 0;
  public static final int SELFTEST_ALWAYS = 1;
  public static final int SELFTEST_OFF = 2;
  /** Linear weights in the storage type (fp16, or fp32 on the fp32 fallback): DIFFVK_WEIGHTS_F16. */
  public static final int WEIGHTS_F16 = 0;
  /** Linear weights quantized to GGUF Q8_0 blocks while they load (DIFFVK_WEIGHTS_Q8_0). */
  public static final int WEIGHTS_Q8_0 = 1;
  /** Linear weights quantized to GGUF Q4_0 blocks (lm_head Q8_0) while they load (DIFFVK_WEIGHTS_Q4_0). */
  public static final int WEIGHTS_Q4_0 = 2;
  /**
   * Options.quantDecode / quantPrefill: the device's choice (int8 dot products where it accelerates them, else
   * dequantized weights). quantDecodePath() / quantPrefillPath(): the model has no quantized weights.
   */
  public static final int QUANT_PATH_AUTO = 0;
  /** Quantized weights dequantized in registers (DIFFVK_QUANT_PATH_DEQUANT). */
  public static final int QUANT_PATH_DEQUANT = 1;
  /**
   * Int8 activations and 4x8-bit integer dot products (DIFFVK_QUANT_PATH_INT8_DOT); needs the device's
   * shaderIntegerDotProduct: forced on a device without it, the load throws DiffvkException(UNSUPPORTED).
   */
  public static final int QUANT_PATH_INT8_DOT = 2;

  /** Context and model options (diffvk_context_options, diffvk_model_options). */
  public static final class Options {
    /** null/"" = the best device; else an index ("1") or a case-insensitive name substring ("adreno"). */
    public String device;
    /** PRECISION_AUTO (fp16 storage when the device supports it), PRECISION_FP16 or PRECISION_FP32. */
    public int precision = PRECISION_AUTO;
    /** -1 = environment/build default (DIFFVK_VALIDATION), 0 = off, 1 = Khronos validation layer on. */
    public int validation = -1;
    /**
     * The file of the driver's pipeline cache; null = the default file in the library's cache directory
     * ({@link Diffvk#setCacheDir}; on Android none until it is set).
     */
    public String pipelineCachePath;
    /** false: no pipeline cache file (then pipelineCachePath must be null). */
    public boolean pipelineCache = true;
    /**
     * The self-test at load: SELFTEST_AUTO (test every op's pipelines once per device, driver and shader build,
     * keep the verdict in the cache directory), SELFTEST_ALWAYS or SELFTEST_OFF. A failing variant falls back
     * through the tuning keys; when nothing passes, the create throws naming the op and variant. The cases are in
     * the benchmark library: a binding built without it tests nothing under AUTO and fails under ALWAYS.
     */
    public int selftest = SELFTEST_AUTO;
    /**
     * The model's config.json text for the self-test (diffvk_context_options.selftest_model): it then runs the
     * attention and the scan at the model's own sizes, which are compiled into their pipelines. null (the default):
     * the load's own config (a directory, a .gguf path, the buffers of the memory loads, the ranges of the
     * descriptor loads: configOf, configOfFds). Where it cannot be read, the self-test runs the case tables' sizes
     * only (and the load says what is wrong with the model).
     */
    public String selftestModel;
    /**
     * WEIGHTS_F16, WEIGHTS_Q8_0 or WEIGHTS_Q4_0: the format of the linear weights (q/k/v/o, gate/up/down,
     * lm_head) on the device; the embedding, norms and a lm_head tied to the embedding stay in the storage
     * type. Another value: DiffvkException(INVALID_ARGUMENT) from the load.
     */
    public int weights = WEIGHTS_F16;
    /**
     * Under WEIGHTS_Q4_0: lm_head (and an embedding tied to it) in Q4_0 too instead of Q8_0 (about a tenth fewer
     * weight bytes with a 32k vocabulary; the head's error reaches every logit). Ignored under the other formats.
     */
    public boolean q4_0Head;
    /**
     * QUANT_PATH_AUTO, QUANT_PATH_DEQUANT or QUANT_PATH_INT8_DOT: how decode (one row) multiplies quantized
     * weights; ignored without quantized weights. Another value: DiffvkException(INVALID_ARGUMENT) from the load.
     */
    public int quantDecode = QUANT_PATH_AUTO;
    /** The same choice for prefill's matmuls (more than one row). */
    public int quantPrefill = QUANT_PATH_AUTO;
  }

  private long context;
  private long model;
  private final int vocab;
  private final int quantDecodePath, quantPrefillPath;

  private Model(long context, long model) {
    this.context = context;
    this.model = model;
    this.vocab = nativeVocabSize(model);
    this.quantDecodePath = nativeQuantPath(model, false);
    this.quantPrefillPath = nativeQuantPath(model, true);
  }

  /** Loads a model on the default device with default options. */
  public static Model load(String dir) {
    return load(dir, new Options());
  }

  public static Model load(String dir, Options options) {
    return load(options, () -> nativeModelConfig(dir, null, null),
        (ctx, o) -> nativeModelLoad(ctx, dir, o.weights, o.q4_0Head, o.quantDecode, o.quantPrefill));
  }

  /**
   * A model's config.json text (Options.selftestModel): a directory's config.json, or for a .gguf file the
   * config.json its metadata stands for. null where it cannot be read.
   */
  public static String configOf(String path) {
    Native.load();
    return path == null ? null : nativeModelConfig(path, null, null);
  }

  /**
   * The same from the arguments of loadFromFds (configFd -1: a .gguf range, as loadGgufFromFd takes it); the
   * descriptors are neither moved nor closed. null where it cannot be read.
   */
  public static String configOfFds(int configFd, long configOffset, long configLength, int weightsFd, long weightsOffset,
                                   long weightsLength) {
    Native.load();
    return nativeModelConfigFd(configFd, configOffset, configLength, weightsFd, weightsOffset, weightsLength);
  }

  /**
   * The two files of a checkpoint from memory: config.json and model.safetensors as DIRECT ByteBuffers
   * (whole capacity), read during the call only.
   */
  public static Model loadFromMemory(java.nio.ByteBuffer configJson, java.nio.ByteBuffer safetensors, Options options) {
    return load(options, () -> nativeModelConfig(null, configJson, safetensors),
        (ctx, o) -> nativeModelLoadMemory(ctx, configJson, safetensors, o.weights, o.q4_0Head, o.quantDecode,
                                          o.quantPrefill));
  }

  /**
   * The two files as byte ranges of open file descriptors (the descriptors are neither moved nor closed): the
   * config read with pread, the weights memory-mapped where the descriptor is a regular file (an asset's range
   * included: no copy on the Java or native heap), else read; length -1 = to the end of the file. Android assets stored uncompressed
   * (aaptOptions/androidResources noCompress "json", "safetensors"): AssetManager.openFd(name) gives an
   * AssetFileDescriptor; pass getParcelFileDescriptor().getFd(), getStartOffset(), getLength().
   */
  public static Model loadFromFds(int configFd, long configOffset, long configLength, int weightsFd, long weightsOffset,
                                  long weightsLength, Options options) {
    return load(options,
        () -> nativeModelConfigFd(configFd, configOffset, configLength, weightsFd, weightsOffset, weightsLength),
        (ctx, o) -> nativeModelLoadFd(ctx, configFd, configOffset, configLength, weightsFd, weightsOffset, weightsLength,
                                      o.weights, o.q4_0Head, o.quantDecode, o.quantPrefill));
  }

  /**
   * A .gguf file (docs/gguf.md; `diffvk quantize`) from memory: a DIRECT ByteBuffer (whole capacity), read
   * during the call only. The file carries its own configuration.
   */
  public static Model loadGgufFromMemory(java.nio.ByteBuffer gguf, Options options) {
    if (gguf == null) throw new DiffvkException(DiffvkException.INVALID_ARGUMENT, "Model.loadGgufFromMemory: gguf is null");
    return load(options, () -> nativeModelConfig(null, null, gguf),
        (ctx, o) -> nativeModelLoadMemory(ctx, null, gguf, o.weights, o.q4_0Head, o.quantDecode, o.quantPrefill));
  }

  /** A .gguf file as a byte range of an open descriptor (an uncompressed asset: AssetManager.openFd); length -1 = to the end. */
  public static Model loadGgufFromFd(int fd, long offset, long length, Options options) {
    return load(options, () -> nativeModelConfigFd(-1, 0, 0, fd, offset, length),
        (ctx, o) -> nativeModelLoadFd(ctx, -1, 0, 0, fd, offset, length, o.weights, o.q4_0Head, o.quantDecode,
                                      o.quantPrefill));
  }

  private interface Loader {
    long load(long context, Options options);
  }

  private interface ConfigSource {
    String config();
  }

  private static Model load(Options options, ConfigSource source, Loader loader) {
    Native.load();
    if (options == null) options = new Options();
    String model = options.selftestModel;
    if (model == null && options.selftest != SELFTEST_OFF) model = source.config();
    long ctx = nativeContextCreate(options.device, options.precision, options.validation, options.pipelineCachePath,
        options.pipelineCache, options.selftest, model);
    long m;
    try {
      m = loader.load(ctx, options);
    } catch (RuntimeException e) {
      nativeContextDestroy(ctx);
      throw e;
    }
    try {
      return new Model(ctx, m);
    } catch (RuntimeException e) {
      nativeModelDestroy(m);
      nativeContextDestroy(ctx);
      throw e;
    }
  }

  /** A new session with a KV cache of contextLength tokens (0 = max_position_embeddings). */
  public Session newSession(int contextLength) {
    return new Session(this, contextLength, 0);
  }

  synchronized long handle() {
    return model;  // 0 after close: the C ABI then reports INVALID_ARGUMENT
  }

  public int vocabSize() {
    return vocab;
  }

  public synchronized int eosToken() {
    return nativeEosToken(model);
  }

  public synchronized int bosToken() {
    return nativeBosToken(model);
  }

  public synchronized String deviceName() {
    return nativeDeviceName(context);
  }

  /**
   * How decode multiplies the model's quantized weights: QUANT_PATH_DEQUANT or QUANT_PATH_INT8_DOT (Options.quantDecode,
   * or the device's choice under QUANT_PATH_AUTO); QUANT_PATH_AUTO when the model has no quantized weights.
   */
  public int quantDecodePath() {
    return quantDecodePath;
  }

  /** The same for prefill's matmuls (Options.quantPrefill). */
  public int quantPrefillPath() {
    return quantPrefillPath;
  }

  /** PRECISION_FP16 or PRECISION_FP32: what the context chose. */
  public synchronized int precision() {
    return nativePrecision(context);
  }

  /** The "bytes" tokenizer: token = UTF-8 byte value (0..255). Does not add BOS. */
  public int[] encode(String text) {
    byte[] b = text.getBytes(StandardCharsets.UTF_8);
    int[] t = new int[b.length];
    for (int i = 0; i < b.length; ++i) t[i] = b[i] & 0xff;
    return t;
  }

  /** Inverse of encode; tokens outside 0..255 and the BOS/EOS control bytes are dropped. */
  public String decodeText(int[] tokens) {
    int bos = bosToken(), eos = eosToken();
    byte[] b = new byte[tokens.length];
    int n = 0;
    for (int t : tokens) {
      if (t < 0 || t > 255 || t == bos || t == eos) continue;
      b[n++] = (byte) t;
    }
    return new String(b, 0, n, StandardCharsets.UTF_8);
  }

  /** Idempotent. Throws DiffvkException (INVALID_ARGUMENT) while a session of this model is open. */
  @Override
  public synchronized void close() {
    if (model != 0) {
      nativeModelDestroy(model);  // throws while sessions are alive; then nothing changes
      model = 0;
    }
    if (context != 0) {
      nativeContextDestroy(context);
      context = 0;
    }
  }

  static native long nativeContextCreate(String device, int precision, int validation, String pipelineCachePath,
      boolean pipelineCache, int selftest, String selftestModel);
  static native String nativeModelConfig(String path, java.nio.ByteBuffer config, java.nio.ByteBuffer weights);
  static native String nativeModelConfigFd(int configFd, long configOffset, long configLength, int weightsFd,
      long weightsOffset, long weightsLength);
  static native void nativeContextDestroy(long context);
  static native String nativeDeviceName(long context);
  static native int nativePrecision(long context);
  static native long nativeModelLoad(long context, String dir, int weights, boolean q4_0Head, int quantDecode, int quantPrefill);
  static native long nativeModelLoadMemory(long context, java.nio.ByteBuffer configJson, java.nio.ByteBuffer safetensors,
                                           int weights, boolean q4_0Head, int quantDecode, int quantPrefill);
  static native long nativeModelLoadFd(long context, int configFd, long configOffset, long configLength, int weightsFd,
                                       long weightsOffset, long weightsLength, int weights, boolean q4_0Head, int quantDecode,
                                       int quantPrefill);
  static native void nativeModelDestroy(long model);
  static native int nativeVocabSize(long model);
  static native int nativeQuantPath(long model, boolean prefill);
  static native int nativeEosToken(long model);
  static native int nativeBosToken(long model);
}
