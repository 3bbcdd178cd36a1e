package android.widget;
public class ImageView extends android.view.View {
  public ImageView(android.content.Context c) { super(c); }
  public void setImageBitmap(android.graphics.Bitmap b) {}
  public void setAdjustViewBounds(boolean b) {}
  public void setImageDrawable(Object d) {}
}
