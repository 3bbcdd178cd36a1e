package android.app;
public class Activity extends android.content.Context {
  protected void onCreate(android.os.Bundle state) {}
  protected void onPause() {}
  protected void onResume() {}
  protected void onDestroy() {}
  public void setContentView(android.view.View view) {}
  public android.content.Intent getIntent() { return null; }
  public void runOnUiThread(Runnable r) {}
}
