package diffvk;

/**
 * The check counter of the desktop-JVM tests of the binding (SessionTest: CTest 'jni'; V1Test: 'jni_v1'),
 * so that they need no JUnit. Each test is its own JVM process: the counts are per process.
 */
final class Checks {
  private static int failures = 0;
  private static int checks = 0;

  private Checks() {}

  static void check(boolean cond, String what) {
    ++checks;
    if (!cond) {
      ++failures;
      System.err.println("FAILED: " + what);
    }
  }

  /** Prints the summary line and exits: status 0 when every check passed. */
  static void finish(String test) {
    System.out.println(test + ": " + checks + " checks, " + failures + " failed: " + (failures == 0 ? "passed" : "FAILED"));
    System.exit(failures == 0 ? 0 : 1);
  }
}
