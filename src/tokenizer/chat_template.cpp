#include "tokenizer/chat_template.h"

#include <algorithm>
#include <string_view>

#include "common.h"

namespace strata::tok {

const char* chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::ChatML: return "chatml";
    case ChatFormat::Gemma: return "gemma";
    case ChatFormat::Llama3: return "llama3";
    case ChatFormat::Llama2: return "llama2";
  }
  return "?";
}

ChatTemplate detect_chat_template(const std::optional<std::string>& t, const std::string& arch) {
  ChatTemplate ct;
  if (t) {
    const std::string& s = *t;
    auto has = [&](const char* m) { return s.find(m) != std::string::npos; };
    ct.recognised = true;
    if (has("<|im_start|>")) ct.format = ChatFormat::ChatML;
    else if (has("<start_of_turn>")) ct.format = ChatFormat::Gemma;
    else if (has("<|start_header_id|>")) ct.format = ChatFormat::Llama3;
    else if (has("[INST]")) ct.format = ChatFormat::Llama2;
    else ct.recognised = false;
    if (ct.recognised) {
      ct.thinking = ct.format == ChatFormat::ChatML && has("<think>");
      ct.note = std::string("chat template recognised as ") + chat_format_name(ct.format) +
                (ct.thinking ? " with switchable thinking" : "");
      return ct;
    }
  }
  ct.format = arch == "gemma3" ? ChatFormat::Gemma : ChatFormat::ChatML;
  ct.note = std::string(t ? "chat template not recognised" : "the model file has no chat template") + "; using the " +
            chat_format_name(ct.format) + " format";
  return ct;
}

namespace {
constexpr std::string_view kOpen = "<think>", kClose = "</think>";

// An assistant turn without its thinking: everything up to the closing tag goes.
std::string strip_thinking(const std::string& text) {
  size_t close = text.find(kClose);
  if (close == std::string::npos) return text;
  size_t start = close + kClose.size();
  while (start < text.size() && (text[start] == '\n' || text[start] == ' ')) ++start;
  return text.substr(start);
}
}  // namespace

std::string apply_chat_template(ChatFormat f, const std::vector<Message>& in, bool gen, ThinkingControl thinking) {
  for (const auto& m : in)
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      throw Error("unknown chat role '" + m.role + "' (system, user, assistant)");
  std::vector<Message> msgs = in;
  if (thinking.supported)
    for (auto& m : msgs)
      if (m.role == "assistant") m.content = strip_thinking(m.content);
  std::string out;
  switch (f) {
    case ChatFormat::ChatML:
      for (const auto& m : msgs) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      if (gen) out += "<|im_start|>assistant\n";
      if (gen && thinking.supported && !thinking.enabled) out += "<think>\n\n</think>\n\n";
      break;
    case ChatFormat::Gemma: {
      // Gemma has no system role: the system text opens the first user turn.
      std::string pending_system;
      for (const auto& m : msgs) {
        if (m.role == "system") {
          pending_system += m.content + "\n\n";
          continue;
        }
        std::string role = m.role == "assistant" ? "model" : "user";
        std::string content = m.content;
        if (role == "user" && !pending_system.empty()) {
          content = pending_system + content;
          pending_system.clear();
        }
        out += "<start_of_turn>" + role + "\n" + content + "<end_of_turn>\n";
      }
      if (gen) out += "<start_of_turn>model\n";
      break;
    }
    case ChatFormat::Llama3:
      for (const auto& m : msgs) out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
      if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatFormat::Llama2: {
      std::string system;
      bool first_user = true;
      for (const auto& m : msgs) {
        if (m.role == "system") {
          system = m.content;
        } else if (m.role == "user") {
          if (!first_user) out += "<s>";
          out += "[INST] ";
          if (!system.empty()) {
            out += "<<SYS>>\n" + system + "\n<</SYS>>\n\n";
            system.clear();
          }
          out += m.content + " [/INST]";
          first_user = false;
        } else {
          out += " " + m.content + " </s>";
        }
      }
      break;
    }
  }
  return out;
}

// ---- ReasoningSplitter ----
namespace {
// Length of the longest suffix of s that is a proper prefix of tag.
size_t partial_tag(const std::string& s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.compare(s.size() - n, n, tag.data(), n) == 0) return n;
  return 0;
}
bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
}  // namespace

ReasoningSplitter::Parts ReasoningSplitter::push(const std::string& text) {
  Parts p;
  held_ += text;
  for (;;) {
    if (state_ == State::Start) {
      size_t i = 0;
      while (i < held_.size() && is_space(held_[i])) ++i;
      std::string_view rest(held_.data() + i, held_.size() - i);
      if (rest.size() >= kOpen.size() && rest.substr(0, kOpen.size()) == kOpen) {
        held_.erase(0, i + kOpen.size());
        state_ = State::Thinking;
        skip_newlines_ = true;
        continue;
      }
      if (kOpen.substr(0, rest.size()) == rest) return p;  // maybe the start of <think>
      state_ = State::Answer;
      continue;
    }
    if (skip_newlines_) {
      size_t i = 0;
      while (i < held_.size() && is_space(held_[i])) ++i;
      held_.erase(0, i);
      if (held_.empty()) return p;
      skip_newlines_ = false;
    }
    if (state_ == State::Answer) {
      p.content += held_;
      held_.clear();
      return p;
    }
    // Thinking: emit up to the closing tag; hold a possible partial tag and trailing blanks.
    size_t close = held_.find(kClose);
    if (close != std::string::npos) {
      size_t end = close;
      while (end > 0 && is_space(held_[end - 1])) --end;
      p.reasoning += held_.substr(0, end);
      held_.erase(0, close + kClose.size());
      state_ = State::Answer;
      skip_newlines_ = true;
      continue;
    }
    size_t keep = partial_tag(held_, kClose);
    size_t end = held_.size() - keep;
    while (end > 0 && is_space(held_[end - 1])) --end;
    p.reasoning += held_.substr(0, end);
    held_.erase(0, end);
    return p;
  }
}

ReasoningSplitter::Parts ReasoningSplitter::split(const std::string& whole) {
  ReasoningSplitter sp;
  Parts p = sp.push(whole), rest = sp.finish();
  p.reasoning += rest.reasoning;
  p.content += rest.content;
  return p;
}

ReasoningSplitter::Parts ReasoningSplitter::finish() {
  Parts p;
  if (state_ == State::Thinking) {
    size_t end = held_.size();
    while (end > 0 && is_space(held_[end - 1])) --end;
    p.reasoning = held_.substr(0, end);
  } else if (!skip_newlines_) {
    p.content = held_;
  }
  held_.clear();
  return p;
}

}  // namespace strata::tok
