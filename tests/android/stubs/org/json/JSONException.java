package org.json;
public class JSONException extends Exception {
  private static final long serialVersionUID = 1;
  public JSONException(String m) { super(m); } }
