package android.graphics;
public class Bitmap {}
