package android.widget;
public class TextView extends android.view.View {
  public TextView(android.content.Context c) { super(c); }
  public void setText(CharSequence text) {}
  public CharSequence getText() { return null; }
  public void setTextIsSelectable(boolean b) {}
  public void setHint(CharSequence hint) {}
  public void setSingleLine(boolean b) {}
  public void setInputType(int type) {}
  public void setTypeface(Object tf) {}
}
