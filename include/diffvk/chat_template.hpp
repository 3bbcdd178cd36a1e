// diffvk — chat templates: a conversation to the prompt text a chat model was trained on.
// A checkpoint's template (tokenizer_config.json's `chat_template`, Jinja source) is recognised as one of the
// families diffvk renders, comparing its source with the published templates of that family (string literals
// decoded, whitespace between tags ignored): ChatML, Llama-2 chat, Llama-3 instruct and Phi-4-mini. Any other
// template is refused with an error naming it: a prompt in the wrong format would still run, silently worse. No Jinja
// interpreter is involved (docs/chat-templates.md lists the templates and the rules each family follows).
// Pure CPU; a ChatTemplate is immutable.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace diffvk {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (ChatML and Llama-3 take any role name)
  std::string content;
};

class ChatTemplate {
 public:
  // The template of a model directory: tokenizer_config.json's chat_template (a string, or a list of
  // {name, template} whose "default" entry is used) with its bos_token / eos_token. Errors: no file or no
  // chat_template (invalid_argument, "has no chat template"), a malformed file (format_error), a template of
  // no supported family (unsupported, naming the template's start and the families).
  static ChatTemplate load(const std::string& model_dir);
  // The same from tokenizer_config.json's bytes (an Android asset, a buffer; read during the call only); `name` is
  // used in messages. The same errors, and NULL data with a size is invalid_argument.
  static ChatTemplate load_memory(const void* tokenizer_config, size_t size,
                                  const std::string& name = "tokenizer_config.json (memory)");
  // Jinja source with the tokens it uses; the same recognition and errors.
  static ChatTemplate from_source(const std::string& jinja, const std::string& bos_token, const std::string& eos_token);
  // A family by name ("chatml", "llama2", "llama3", "phi4"), for checkpoints that ship no template.
  static ChatTemplate builtin(const std::string& family, const std::string& bos_token, const std::string& eos_token);
  static std::vector<std::string> families();

  // The prompt text of `messages` (what the Hugging Face template renders, byte for byte), with the opening of
  // the assistant's turn when add_generation_prompt (Llama-2 has none: its user turn ends the prompt). Encode
  // it without adding special tokens: BOS is in the text where the family puts it. Throws invalid_argument
  // where the template raises an exception (Llama-2: roles that do not alternate user/assistant).
  std::string apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  const std::string& family() const { return family_; }
  // The text that ends an assistant turn (a stop string for generation): "<|im_end|>", the EOS token, "<|eot_id|>",
  // "<|end|>".
  std::string end_of_turn() const;

 private:
  ChatTemplate(std::string family, int variant, std::string bos, std::string eos);
  static ChatTemplate of_config(const std::string& text, const std::string& name);  // load and load_memory
  std::string family_;
  int variant_ = 0;
  std::string bos_, eos_;
};

}  // namespace diffvk
