package diffvk;

/**
 * The benchmark (the C library diffvk_bench: diffvk_bench_run), e.g. the "phone" preset. Run it on a
 * background thread; {@link #cancel()} from any thread stops it with a {@link CancelledException}.
 * Returns the JSON report; with {@link Options#plotPath} also writes the PNG plot.
 * {@link #available()} is false when the app was built without the benchmark library.
 */
public final class Bench {
  /** diffvk_bench_options. */
  public static final class Options {
    /** "default" or "phone". */
    public String preset = "phone";
    /** A checkpoint directory for the model part, or null for the kernels only. */
    public String modelDir;
    /**
     * A published model's shape ("diffllama-1b", ...) for the model part with random weights made on the device (no
     * file), or null. Not with {@link #modelDir}.
     */
    public String shape;
    /** Time budget in seconds; 0 = the preset's. */
    public double budgetSeconds;
    /** Where to write the PNG plot, or null. */
    public String plotPath;
  }

  private long cancelFlag;

  public Bench() {
    Native.load();
    cancelFlag = Session.nativeNewCancelFlag();
  }

  public static boolean available() {
    try {
      Native.load();
      return nativeAvailable();
    } catch (UnsatisfiedLinkError e) {
      return false;
    }
  }

  /** Runs on the calling thread, on a context made from device (null = defaults). */
  public String run(Model.Options device, Options options) {
    if (options == null) options = new Options();
    if (device == null) device = new Model.Options();
    // The self-test at the model's sizes: Options.selftestModel, else the model directory's (a shape's: not read here).
    String model = device.selftestModel;
    if (model == null && device.selftest != Model.SELFTEST_OFF && options.modelDir != null)
      model = Model.nativeModelConfig(options.modelDir, null, null);
    long ctx = Model.nativeContextCreate(device.device, device.precision, device.validation, device.pipelineCachePath,
        device.pipelineCache, device.selftest, model);
    try {
      return nativeRun(ctx, options.preset, options.modelDir, options.shape, options.budgetSeconds, options.plotPath,
          flag());
    } finally {
      Model.nativeContextDestroy(ctx);
    }
  }

  /** Stops the run in progress (or the next one, when none is running). Any thread. */
  public void cancel() {
    Session.nativeCancel(flag());
  }

  private synchronized long flag() {
    return cancelFlag;
  }

  /** Frees the cancel flag; call when no run is in progress. */
  public synchronized void close() {
    if (cancelFlag != 0) {
      Session.nativeFreeCancelFlag(cancelFlag);
      cancelFlag = 0;
    }
  }

  private static native boolean nativeAvailable();
  private static native String nativeRun(long context, String preset, String modelDir, String shape,
                                         double budgetSeconds, String plotPath, long cancelFlag);
}
