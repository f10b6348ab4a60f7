#include "tokenizer/chat_template.h"

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
      ct.note = std::string("chat template recognised as ") + chat_format_name(ct.format);
      return ct;
    }
  }
  ct.format = arch == "gemma3" ? ChatFormat::Gemma : ChatFormat::ChatML;
  ct.note = std::string(t ? "chat template not recognised" : "the model file has no chat template") + "; using the " +
            chat_format_name(ct.format) + " format";
  return ct;
}

std::string apply_chat_template(ChatFormat f, const std::vector<Message>& msgs, bool gen) {
  for (const auto& m : msgs)
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      throw Error("unknown chat role '" + m.role + "' (system, user, assistant)");
  std::string out;
  switch (f) {
    case ChatFormat::ChatML:
      for (const auto& m : msgs) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      if (gen) out += "<|im_start|>assistant\n";
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

}  // namespace strata::tok
