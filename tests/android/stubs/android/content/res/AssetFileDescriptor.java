package android.content.res;
public class AssetFileDescriptor implements java.io.Closeable {
  public android.os.ParcelFileDescriptor getParcelFileDescriptor() { return null; }
  public java.io.FileDescriptor getFileDescriptor() { return null; }
  public long getStartOffset() { return 0; }
  public long getLength() { return 0; }
  public long getDeclaredLength() { return 0; }
  public void close() throws java.io.IOException {}
}
