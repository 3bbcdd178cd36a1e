package android.widget;
public class TableLayout extends LinearLayout { public TableLayout(android.content.Context c) { super(c); }
  public void setStretchAllColumns(boolean b) {} }
