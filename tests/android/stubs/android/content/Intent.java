package android.content;
public class Intent {
  public Intent(Context context, Class<?> cls) {}
  public Intent putExtra(String name, String value) { return this; }
  public String getStringExtra(String name) { return null; }
}
