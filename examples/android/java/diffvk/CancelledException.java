package diffvk;

/** A call stopped by {@link Session#cancel()} or {@link Bench#cancel()} (status CANCELLED); like every
 *  DiffvkException, it changed nothing: the session is as before the call and stays usable. */
public class CancelledException extends DiffvkException {
  private static final long serialVersionUID = 1L;

  /** Called from the native code; keep it (R8/ProGuard). */
  public CancelledException(int status, String message) {
    super(status, message);
  }
}
