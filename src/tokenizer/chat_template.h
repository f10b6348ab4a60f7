// Chat formats. The GGUF's Jinja template is not executed: it is recognised by its markers and
// the matching built-in format is applied.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace strata::tok {

enum class ChatFormat { ChatML, Gemma, Llama3, Llama2 };

struct Message {
  std::string role;  // system, user, assistant
  std::string content;
};

struct ChatTemplate {
  ChatFormat format = ChatFormat::ChatML;
  bool recognised = false;
  std::string note;  // what was detected, or why a fallback is used
};

const char* chat_format_name(ChatFormat f);
// template_text: tokenizer.chat_template if present; arch: general.architecture (used when the
// file carries no template).
ChatTemplate detect_chat_template(const std::optional<std::string>& template_text, const std::string& arch);
// Prompt text for the conversation; special markers are meant to be tokenized with
// parse_special = true. BOS is not included (the tokenizer adds it).
std::string apply_chat_template(ChatFormat f, const std::vector<Message>& msgs, bool add_generation_prompt);

}  // namespace strata::tok
