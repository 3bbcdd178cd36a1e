package diffvk;

/** Library-wide settings: the version, where the library's log goes, and its cache directory. */
public final class Diffvk {
  public static final int LOG_ERROR = 0;
  public static final int LOG_WARN = 1;
  public static final int LOG_INFO = 2;
  public static final int LOG_DEBUG = 3;

  /** Receives the library's log lines (level LOG_ERROR..LOG_DEBUG). Called on the thread that logs,
   *  possibly several at once; exceptions it throws are ignored. Keep it (R8/ProGuard). */
  public interface LogHandler {
    void log(int level, String message);
  }

  private Diffvk() {}

  /** "MAJOR.MINOR.PATCH" of the native library. */
  public static String version() {
    Native.load();
    return nativeVersion();
  }

  /** Routes the log (levels up to maxLevel) to handler instead of stderr/logcat; null restores the default. */
  public static void setLogHandler(LogHandler handler, int maxLevel) {
    Native.load();
    nativeSetLogHandler(handler, maxLevel);
  }

  /**
   * The base of the library's cache directory (the pipeline cache files go to base/diffvk/pipelines/): pass
   * Context.getCacheDir().getAbsolutePath() once at start-up. Android has no default, so without it the pipeline
   * cache is off unless {@link Model.Options#pipelineCachePath} names a file. null or "" restores the default.
   */
  public static void setCacheDir(String base) {
    Native.load();
    nativeSetCacheDir(base);
  }

  private static native void nativeSetLogHandler(LogHandler handler, int maxLevel);
  private static native void nativeSetCacheDir(String base);
  private static native String nativeVersion();
}
