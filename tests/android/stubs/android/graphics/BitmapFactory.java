package android.graphics;
public class BitmapFactory { public static Bitmap decodeFile(String path) { return null; } }
