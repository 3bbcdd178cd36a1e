package android.content.res;
public class Resources {
  public android.util.DisplayMetrics getDisplayMetrics() { return null; }
}
