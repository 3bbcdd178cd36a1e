package android.widget;
public class TableRow extends LinearLayout { public TableRow(android.content.Context c) { super(c); } }
