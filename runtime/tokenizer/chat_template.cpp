// Chat templates (include/diffvk/chat_template.hpp; docs/chat-templates.md): a checkpoint's Jinja template is
// recognised by comparing its canonical form with the published templates of each family, then rendered
// by that family's rules, which are the template's own logic written out.
#include "diffvk/chat_template.hpp"

#include <nlohmann/json.hpp>

#include "diffvk/error.hpp"
#include "io/bounded_json.hpp"
#include "tokenizer/tokenizer_files.hpp"

namespace diffvk {

namespace {

// The published templates, as their tokenizer_config.json (or chat_template.jinja) gives them (JSON-decoded Jinja
// source).
struct Known {
  const char* family;
  int variant;
  const char* source;  // where it comes from: docs/chat-templates.md
};
const Known kKnown[] = {
    // teknium/OpenHermes-2.5-Mistral-7B (ChatML, as most ChatML checkpoints ship it)
    {"chatml", 0,
     "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
     "'\\n'}}"
     "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"},
    // meta-llama/Llama-2-7b-chat-hf (and the 13b/70b chat models)
    {"llama2", 0,
     "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
     "messages[0]['content'] %}"
     "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in "
     "loop_messages %}"
     "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must "
     "alternate "
     "user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set "
     "content = "
     "'<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = "
     "message['content'] %}"
     "{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif "
     "message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"},
    // meta-llama/Meta-Llama-3-8B-Instruct (and 70B), current revision
    {"llama3", 0,
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
     "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
     "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
     "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"},
    // meta-llama/Meta-Llama-3-8B-Instruct, first release: the assistant header is always appended
    {"llama3", 1,
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
     "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
     "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
     "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"},
    // microsoft/Phi-4-mini-instruct: <|ROLE|>CONTENT<|end|> per message (a system message's tools, which
    // ChatMessage does not carry, go in <|tool|>...<|/tool|>), then <|assistant|> or EOS
    {"phi4", 0,
     "{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message and message['tools'] is "
     "not none %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|tool|>' + message['tools'] + '<|/tool|>' + "
     "'<|end|>' }}{% else %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}{% endif %}"
     "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}"},
    // microsoft/Phi-4-mini-reasoning: one system turn opening with its own sentence, the system messages appended
    {"phi4", 1,
     "{{ '<|system|>Your name is Phi, an AI math expert developed by Microsoft.' }}{% for message in messages %}"
     "{% if message['role'] == 'system' %} {{ message['content'] }}{% if 'tools' in message and message['tools'] is "
     "not none %}{{ '<|tool|>' + message['tools'] + '<|/tool|>' }}{% endif %}{% endif %}{% endfor %}"
     "{{ '<|end|>' }}{% for message in messages %}{% if message['role'] != 'system' %}{{ '<|' + message['role'] + "
     "'|>' + message['content'] + '<|end|>' }}{% endif %}{% endfor %}{% if add_generation_prompt %}"
     "{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}"},
};
const char* const kPhi4ReasoningSystem = "Your name is Phi, an AI math expert developed by Microsoft.";

// The canonical form of Jinja source, as transformers renders it (trim_blocks and lstrip_blocks on): text
// outside tags kept, less the newline right after a block tag, the blanks that open a line before a block
// tag, and the whitespace that {%- / -%} (and {{- / -}}) remove; inside {{ }} / {% %} whitespace and the '-'
// markers dropped, and each string literal replaced by \x01 + its decoded value + \x02 (so '\n' and a real
// newline, or ' and ", compare equal); comments dropped. Two templates with the same canonical form render
// the same.
std::string canonical(const std::string& t) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  std::string out;
  size_t i = 0;
  const size_t n = t.size();
  while (i < n) {
    if (t.compare(i, 2, "{#") == 0) {
      const size_t end = t.find("#}", i + 2);
      i = end == std::string::npos ? n : end + 2;
      continue;
    }
    if (t.compare(i, 2, "{{") != 0 && t.compare(i, 2, "{%") != 0) {
      out += t[i++];
      continue;
    }
    const char close = t[i + 1] == '{' ? '}' : '%';
    if (close == '%') {  // lstrip_blocks: blanks from the start of the line up to a block tag
      size_t j = i;
      while (j > 0 && (t[j - 1] == ' ' || t[j - 1] == '\t')) --j;
      if ((j == 0 || t[j - 1] == '\n') && out.size() >= i - j) out.resize(out.size() - (i - j));
    }
    const bool minus = i + 2 < n && t[i + 2] == '-';  // {%- / {{-: the whitespace before goes
    if (minus)
      while (!out.empty() && blank(out.back())) out.pop_back();
    out += t.substr(i, 2);
    i += minus ? 3 : 2;
    bool trim_after = false;
    while (i < n) {
      const char c = t[i];
      if (c == '\'' || c == '"') {
        out += '\x01';
        for (++i; i < n && t[i] != c; ++i) {
          if (t[i] == '\\' && i + 1 < n) {
            const char e = t[++i];
            out += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
          } else {
            out += t[i];
          }
        }
        out += '\x02';
        ++i;
      } else if (c == '-' && i + 2 < n && t[i + 1] == close && t[i + 2] == '}') {  // -%} / -}}
        trim_after = true;
        ++i;
      } else if (c == close && i + 1 < n && t[i + 1] == '}') {
        out += t.substr(i, 2);
        i += 2;
        if (trim_after) {
          while (i < n && blank(t[i])) ++i;
        } else if (close == '%' && i < n && t[i] == '\n') {  // trim_blocks
          ++i;
        }
        break;
      } else {
        if (!(c == ' ' || c == '\t' || c == '\n' || c == '\r')) out += c;
        ++i;
      }
    }
  }
  return out;
}

// Python's str.strip() / Jinja's trim, for ASCII whitespace (docs/chat-templates.md).
std::string strip(const std::string& s) {
  const char* ws = " \t\n\r\v\f";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::string token_text(const nlohmann::json& v, const std::string& path, const char* key) {
  if (v.is_null()) return {};
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  throw Error(Status::format_error, path + ": '" + key + "' must be a string or an object with a string 'content'");
}

}  // namespace

ChatTemplate::ChatTemplate(std::string family, int variant, std::string bos, std::string eos)
    : family_(std::move(family)), variant_(variant), bos_(std::move(bos)), eos_(std::move(eos)) {}

std::vector<std::string> ChatTemplate::families() { return {"chatml", "llama2", "llama3", "phi4"}; }

ChatTemplate ChatTemplate::builtin(const std::string& family, const std::string& bos_token,
                                   const std::string& eos_token) {
  for (const auto& f : families())
    if (f == family) return ChatTemplate(family, 0, bos_token, eos_token);
  throw Error(Status::invalid_argument,
              "no chat template family '" + printable(family) + "' (chatml, llama2, llama3, phi4)");
}

ChatTemplate ChatTemplate::from_source(const std::string& jinja, const std::string& bos_token,
                                       const std::string& eos_token) {
  const std::string c = canonical(jinja);
  for (const auto& k : kKnown)
    if (canonical(k.source) == c) return ChatTemplate(k.family, k.variant, bos_token, eos_token);
  std::string looks;
  if (jinja.find("<|im_start|>") != std::string::npos)
    looks = " It uses ChatML's markers but differs from the published ChatML template.";
  else if (jinja.find("[INST]") != std::string::npos)
    looks = " It uses [INST] like Llama-2 chat but differs from its published template.";
  else if (jinja.find("<|start_header_id|>") != std::string::npos)
    looks =
        " It uses Llama-3's headers but differs from its published templates (Llama-3.1 and later add tools and "
        "dates).";
  else if (jinja.find("<|end|>") != std::string::npos && jinja.find("<|assistant|>") != std::string::npos)
    looks = " It uses Phi-4's markers but differs from its published templates.";
  std::string head = jinja.substr(0, 80);
  throw Error(Status::unsupported,
              "chat template not supported: '" + printable(head) + (jinja.size() > 80 ? "...'" : "'") +
                  " is none of the templates diffvk renders (chatml, llama2, llama3, phi4; docs/chat-templates.md)." +
                  looks + " Choose a family by name to use it anyway (--chat-template NAME).");
}

ChatTemplate ChatTemplate::load(const std::string& model_dir) {
  const std::string path = model_dir + "/tokenizer_config.json";
  if (!tok::exists(path))
    throw Error(Status::invalid_argument, model_dir + " has no chat template (no tokenizer_config.json)");
  return of_config(tok::read_text_file(path, kJsonConfigMaxBytes), path);
}

ChatTemplate ChatTemplate::load_memory(const void* data, size_t size, const std::string& name) {
  if (!data && size) throw Error(Status::invalid_argument, name + ": NULL data with a size of " + std::to_string(size));
  if (size > kJsonConfigMaxBytes)
    throw Error(Status::format_error, name + ": " + std::to_string(size) + " bytes, more than the limit of " +
                                          std::to_string(kJsonConfigMaxBytes));
  return of_config(std::string(static_cast<const char*>(data), data ? size : 0), name);
}

// tokenizer_config.json's text (`path` names it in messages) -> the template: one function for every source.
ChatTemplate ChatTemplate::of_config(const std::string& text, const std::string& path) {
  const nlohmann::json j = parse_json(text, path, kJsonConfigMaxBytes);
  if (!j.is_object()) throw Error(Status::format_error, path + ": top level must be an object");
  if (!j.contains("chat_template") || j["chat_template"].is_null())
    throw Error(Status::invalid_argument, path + " has no chat template (no chat_template key)");
  const auto& t = j["chat_template"];
  std::string source;
  if (t.is_string()) {
    source = t.get<std::string>();
  } else if (t.is_array()) {  // [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
    std::string names;
    for (const auto& e : t) {
      if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("template") ||
          !e["template"].is_string())
        throw Error(Status::format_error, path + ": each chat_template entry must have a string 'name' and 'template'");
      if (e["name"] == "default") source = e["template"].get<std::string>();
      names += (names.empty() ? "" : ", ") + printable(e["name"].get<std::string>());
    }
    if (source.empty())
      throw Error(Status::unsupported, path + ": no chat_template named 'default' (it has " + names + ")");
  } else {
    throw Error(Status::format_error, path + ": chat_template must be a string or a list of {name, template}");
  }
  return from_source(source, token_text(j.value("bos_token", nlohmann::json()), path, "bos_token"),
                     token_text(j.value("eos_token", nlohmann::json()), path, "eos_token"));
}

std::string ChatTemplate::end_of_turn() const {
  if (family_ == "chatml") return "<|im_end|>";
  if (family_ == "llama3") return "<|eot_id|>";
  if (family_ == "phi4") return "<|end|>";
  return eos_;
}

std::string ChatTemplate::apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  if (messages.empty()) throw Error(Status::invalid_argument, "chat template " + family_ + ": no messages");
  std::string out;
  if (family_ == "chatml") {
    for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
  } else if (family_ == "llama3") {
    for (size_t i = 0; i < messages.size(); ++i)
      out += (i == 0 ? bos_ : std::string()) + "<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n" +
             strip(messages[i].content) + "<|eot_id|>";
    if (add_generation_prompt || variant_ == 1) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  } else if (family_ == "phi4") {  // no newline after the markers; the content as is
    if (variant_ == 1) {
      out += "<|system|>" + std::string(kPhi4ReasoningSystem);
      for (const auto& m : messages)
        if (m.role == "system") out += " " + m.content;
      out += "<|end|>";
    }
    for (const auto& m : messages)
      if (variant_ == 0 || m.role != "system") out += "<|" + m.role + "|>" + m.content + "<|end|>";
    out += add_generation_prompt ? "<|assistant|>" : eos_;
  } else {  // llama2: the system message goes into the first user turn; no generation prompt
    const bool system = messages[0].role == "system";
    for (size_t i = system ? 1 : 0, k = 0; i < messages.size(); ++i, ++k) {
      const ChatMessage& m = messages[i];
      if ((m.role == "user") != (k % 2 == 0))
        throw Error(Status::invalid_argument,
                    "chat template llama2: conversation roles must alternate user/assistant/user/"
                    "assistant/... (message " +
                        std::to_string(i) + " is '" + printable(m.role) + "')");
      const std::string content =
          k == 0 && system ? "<<SYS>>\n" + messages[0].content + "\n<</SYS>>\n\n" + m.content : m.content;
      if (m.role == "user")
        out += bos_ + "[INST] " + strip(content) + " [/INST]";
      else if (m.role == "assistant")
        out += " " + strip(content) + " " + eos_;
    }
  }
  return out;
}

}  // namespace diffvk
