package diffvk;

/** Loads libdiffvk_jni.so once (System.loadLibrary("diffvk_jni"): java.library.path on a desktop JVM,
 *  the APK's lib/<abi>/ on Android). */
final class Native {
  private static boolean loaded;

  private Native() {}

  static synchronized void load() {
    if (!loaded) {
      System.loadLibrary("diffvk_jni");
      loaded = true;
    }
  }
}
