package android.widget;
public class ScrollView extends android.view.ViewGroup {
  public static final int FOCUS_DOWN = 130;
  public ScrollView(android.content.Context c) { super(c); }
  public boolean fullScroll(int direction) { return true; }
}
