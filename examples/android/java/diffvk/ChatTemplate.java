package diffvk;

import java.nio.charset.StandardCharsets;

/**
 * A conversation to the prompt text of a chat model (diffvk_chat_template; docs/chat-templates.md): the
 * checkpoint's chat_template is recognised as ChatML, Llama-2 chat or Llama-3 instruct and rendered as Hugging
 * Face renders it, or refused (DiffvkException UNSUPPORTED naming it). Encode the text with
 * Tokenizer.encode(text, false): BOS is in the text where the family puts it. Immutable.
 */
public final class ChatTemplate implements AutoCloseable {
  private long handle;

  private ChatTemplate(long handle) {
    this.handle = handle;
  }

  /** tokenizer_config.json's chat_template of a model directory. */
  public static ChatTemplate load(String modelDir) {
    Native.load();
    return new ChatTemplate(nativeLoad(modelDir));
  }

  /** A family by name: "chatml", "llama2", "llama3" or "phi4", with the text of the BOS and EOS tokens. */
  public static ChatTemplate builtin(String family, String bosToken, String eosToken) {
    Native.load();
    return new ChatTemplate(nativeBuiltin(family, bosToken, eosToken));
  }

  public synchronized String family() {
    return nativeFamily(handle);
  }

  /** The text that ends an assistant turn: a stop string for Session.generateText. */
  public synchronized String endOfTurn() {
    return nativeEndOfTurn(handle);
  }

  /** roles[i] and contents[i] are message i; addGenerationPrompt: open the assistant's turn. */
  public synchronized String apply(String[] roles, String[] contents, boolean addGenerationPrompt) {
    if (roles == null || contents == null || roles.length != contents.length)
      throw new DiffvkException(DiffvkException.INVALID_ARGUMENT, "ChatTemplate.apply: roles and contents differ in length");
    byte[][] r = new byte[roles.length][];
    byte[][] c = new byte[roles.length][];
    for (int i = 0; i < roles.length; ++i) {
      if (roles[i] == null || contents[i] == null)
        throw new DiffvkException(DiffvkException.INVALID_ARGUMENT, "ChatTemplate.apply: message " + i + " has a null field");
      r[i] = roles[i].getBytes(StandardCharsets.UTF_8);
      c[i] = contents[i].getBytes(StandardCharsets.UTF_8);
    }
    return new String(nativeApply(handle, r, c, addGenerationPrompt), StandardCharsets.UTF_8);
  }

  /** Idempotent. */
  @Override
  public synchronized void close() {
    if (handle != 0) {
      nativeFree(handle);
      handle = 0;
    }
  }

  static native long nativeLoad(String dir);
  static native long nativeBuiltin(String family, String bos, String eos);
  static native void nativeFree(long t);
  static native String nativeFamily(long t);
  static native String nativeEndOfTurn(long t);
  static native byte[] nativeApply(long t, byte[][] roles, byte[][] contents, boolean addGenerationPrompt);
}
