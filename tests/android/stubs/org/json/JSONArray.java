package org.json;
public class JSONArray {
  public int length() { return 0; }
  public JSONObject getJSONObject(int i) throws JSONException { return null; }
  public JSONObject optJSONObject(int i) { return null; }
  public String getString(int i) throws JSONException { return null; }
  public double getDouble(int i) throws JSONException { return 0; }
  public Object get(int i) throws JSONException { return null; }
  public Object opt(int i) { return null; }
}
