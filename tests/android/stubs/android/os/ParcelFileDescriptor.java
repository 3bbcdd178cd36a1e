package android.os;
public class ParcelFileDescriptor implements java.io.Closeable {
  public int getFd() { return -1; }
  public int detachFd() { return -1; }
  public void close() throws java.io.IOException {}
}
