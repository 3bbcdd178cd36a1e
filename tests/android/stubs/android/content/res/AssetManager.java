package android.content.res;
public class AssetManager {
  public String[] list(String path) throws java.io.IOException { return null; }
  public java.io.InputStream open(String name) throws java.io.IOException { return null; }
  public AssetFileDescriptor openFd(String name) throws java.io.IOException { return null; }
}
