package org.json;
public class JSONObject {
  public JSONObject(String s) throws JSONException {}
  public JSONObject getJSONObject(String k) throws JSONException { return null; }
  public JSONArray getJSONArray(String k) throws JSONException { return null; }
  public JSONArray optJSONArray(String k) { return null; }
  public JSONObject optJSONObject(String k) { return null; }
  public String getString(String k) throws JSONException { return null; }
  public String optString(String k) { return null; }
  public String optString(String k, String d) { return null; }
  public double getDouble(String k) throws JSONException { return 0; }
  public double optDouble(String k) { return 0; }
  public double optDouble(String k, double d) { return 0; }
  public int getInt(String k) throws JSONException { return 0; }
  public int optInt(String k) { return 0; }
  public boolean has(String k) { return false; }
  public boolean optBoolean(String k) { return false; }
  public Object opt(String k) { return null; }
  public java.util.Iterator<String> keys() { return null; }
  public String toString(int indent) throws JSONException { return null; }
}
