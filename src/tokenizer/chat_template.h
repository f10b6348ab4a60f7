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
  // The model thinks in <think> ... </think> before answering and the template lets a request
  // switch that off (Qwen3's enable_thinking).
  bool thinking = false;
  std::string note;  // what was detected, or why a fallback is used
};

struct ThinkingControl {
  bool supported = false;  // ChatTemplate::thinking
  bool enabled = true;
};

const char* chat_format_name(ChatFormat f);
// template_text: tokenizer.chat_template if present; arch: general.architecture (used when the
// file carries no template).
ChatTemplate detect_chat_template(const std::optional<std::string>& template_text, const std::string& arch);
// Prompt text for the conversation; special markers are meant to be tokenized with
// parse_special = true. BOS is not included (the tokenizer adds it).
// With thinking supported, earlier assistant turns lose their <think> block (the model only
// sees its answers), and a disabled thinking gets an empty <think></think> block after the
// generation prompt, as Qwen3's template does for enable_thinking = false.
std::string apply_chat_template(ChatFormat f, const std::vector<Message>& msgs, bool add_generation_prompt,
                                ThinkingControl thinking = {});

// Splits generated text into the thinking (between <think> and </think>) and the answer, as the
// text arrives in pieces of any size. A tag split across pieces is held back until it resolves.
class ReasoningSplitter {
 public:
  struct Parts {
    std::string reasoning, content;
  };
  Parts push(const std::string& text);
  Parts finish();  // end of generation: releases what was held back
  static Parts split(const std::string& whole);  // a complete text at once

 private:
  enum class State { Start, Thinking, Answer } state_ = State::Start;
  std::string held_;
  bool skip_newlines_ = false;  // right after a tag
};

}  // namespace strata::tok
