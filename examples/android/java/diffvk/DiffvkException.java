package diffvk;

/**
 * A failing diffvk call: {@link #status()} is the C ABI's diffvk_status code (constants below) and
 * {@link #getMessage()} is diffvk_last_error() of that call, e.g.
 * "diffvk_model_load: cannot open '/x/config.json': No such file or directory".
 * Unchecked, so Android callers are not forced into try/catch around every decode step.
 * DEVICE_LOST is thrown as the subclass {@link DeviceLostException}: recreate the Model.
 */
public class DiffvkException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public static final int OK = 0;
  public static final int INVALID_ARGUMENT = 1;
  public static final int IO_ERROR = 2;
  public static final int FORMAT_ERROR = 3;
  public static final int UNSUPPORTED = 4;
  public static final int OUT_OF_MEMORY = 5;
  public static final int DEVICE_LOST = 6;
  public static final int VULKAN_ERROR = 7;
  public static final int CONTEXT_OVERFLOW = 8;
  public static final int INTERNAL = 9;
  public static final int BUFFER_TOO_SMALL = 10;
  /** Thrown as the subclass {@link CancelledException}. */
  public static final int CANCELLED = 11;

  private final int status;

  /** Called from the native code (examples/android/jni/diffvk_jni.c); keep it (R8/ProGuard). */
  public DiffvkException(int status, String message) {
    super(message);
    this.status = status;
  }

  /** The diffvk_status code. */
  public int status() {
    return status;
  }

  /** diffvk_status_string(status), e.g. "io_error". */
  public String statusName() {
    Native.load();
    return nativeStatusString(status);
  }

  @Override
  public String toString() {
    return "diffvk.DiffvkException[" + status + "]: " + getMessage();
  }

  private static native String nativeStatusString(int status);
}
