package diffvk;

/**
 * The Vulkan device was lost (status {@link DiffvkException#DEVICE_LOST}): the GPU was reset, the
 * driver crashed, or the app was backgrounded too long on some devices. Permanent for the Model it
 * happened on and its Sessions: every later call on them throws this again at once. Recover by closing
 * the Sessions and the Model and loading the Model again (a new Vulkan context).
 */
public final class DeviceLostException extends DiffvkException {
  private static final long serialVersionUID = 1L;

  /** Called from the native code (examples/android/jni/diffvk_jni.c); keep it (R8/ProGuard). */
  public DeviceLostException(int status, String message) {
    super(status, message);
  }
}
