package android.content;
public class Context {
  public java.io.File getFilesDir() { return null; }
  public java.io.File getCacheDir() { return null; }
  public android.content.res.AssetManager getAssets() { return null; }
  public android.content.res.Resources getResources() { return null; }
  public void startActivity(Intent intent) {}
}
