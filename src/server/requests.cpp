#include "server/requests.h"

namespace strata::server {

using json = nlohmann::json;

json parse_body(const std::string& body, int max_depth) {
  if (body.empty()) throw RequestError("the request body is empty; send a JSON object");
  try {
    json j = json::parse(body, [max_depth](int depth, json::parse_event_t, json&) {
      if (depth > max_depth) throw RequestError("JSON nesting deeper than " + std::to_string(max_depth) + " levels");
      return true;
    });
    if (!j.is_object()) throw RequestError("the request body must be a JSON object");
    return j;
  } catch (const json::exception& e) {
    throw RequestError(std::string("invalid JSON: ") + e.what());
  }
}

namespace {

const json* field(const json& j, const char* k) {
  auto it = j.find(k);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

double number(const json& j, const char* k, double lo, double hi, double fallback) {
  const json* v = field(j, k);
  if (!v) return fallback;
  if (!v->is_number()) throw RequestError(std::string("'") + k + "' must be a number", k);
  double x = v->get<double>();
  if (!(x >= lo && x <= hi))
    throw RequestError(std::string("'") + k + "' must be between " + json(lo).dump() + " and " + json(hi).dump(), k);
  return x;
}

std::optional<int64_t> integer(const json& j, const char* k, int64_t lo, int64_t hi) {
  const json* v = field(j, k);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) throw RequestError(std::string("'") + k + "' must be an integer", k);
  int64_t x = v->get<int64_t>();
  if (x < lo || x > hi)
    throw RequestError(std::string("'") + k + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi), k);
  return x;
}

bool boolean(const json& j, const char* k, bool fallback) {
  const json* v = field(j, k);
  if (!v) return fallback;
  if (!v->is_boolean()) throw RequestError(std::string("'") + k + "' must be true or false", k);
  return v->get<bool>();
}

std::vector<std::string> stops(const json& j, const char* k) {
  const json* v = field(j, k);
  std::vector<std::string> out;
  if (!v) return out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > 16) throw RequestError(std::string("'") + k + "' holds at most 16 strings", k);
    for (const auto& s : *v) {
      if (!s.is_string()) throw RequestError(std::string("'") + k + "' must be a string or an array of strings", k);
      out.push_back(s.get<std::string>());
    }
  } else {
    throw RequestError(std::string("'") + k + "' must be a string or an array of strings", k);
  }
  return out;
}

// OpenAI message content: a string, or an array of parts of which the text ones are used.
std::string content_text(const json& c, const std::string& param) {
  if (c.is_null()) return "";
  if (c.is_string()) return c.get<std::string>();
  if (c.is_array()) {
    std::string s;
    for (const auto& part : c) {
      if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
        throw RequestError("each content part must be an object with a 'type'", param);
      if (part["type"] == "text") {
        if (!part.contains("text") || !part["text"].is_string()) throw RequestError("a text part needs a string 'text'", param);
        s += part["text"].get<std::string>();
      } else {
        throw RequestError("content part type '" + part["type"].get<std::string>() + "' is not supported (text only)", param);
      }
    }
    return s;
  }
  throw RequestError("'content' must be a string or an array of content parts", param);
}

void sampling(const json& j, GenSettings& g, bool openai) {
  g.sampling.temperature = static_cast<float>(number(j, "temperature", 0, 2, 1.0));
  g.sampling.top_p = static_cast<float>(number(j, "top_p", 0, 1, 1.0));
  g.sampling.min_p = static_cast<float>(number(j, "min_p", 0, 1, 0.0));
  g.sampling.top_k = static_cast<int>(integer(j, "top_k", 0, 1 << 20).value_or(0));
  g.sampling.repeat_penalty = static_cast<float>(number(j, "repeat_penalty", 0.01, 10, 1.0));
  g.sampling.repeat_last_n = 64;
  if (openai) {
    g.sampling.presence_penalty = static_cast<float>(number(j, "presence_penalty", -2, 2, 0));
    g.sampling.frequency_penalty = static_cast<float>(number(j, "frequency_penalty", -2, 2, 0));
  }
  if (auto s = integer(j, "seed", INT64_MIN, INT64_MAX)) g.sampling.seed = static_cast<uint64_t>(*s);
  g.stream = boolean(j, "stream", false);
  g.ignore_eos = boolean(j, "ignore_eos", false);
}

void max_tokens(const json& j, GenSettings& g) {
  auto a = integer(j, "max_completion_tokens", INT32_MIN, INT32_MAX);
  auto b = integer(j, "max_tokens", INT32_MIN, INT32_MAX);
  auto v = a ? a : b;
  if (v && *v < 0) throw RequestError("'max_tokens' must not be negative", a ? "max_completion_tokens" : "max_tokens");
  if (v) g.max_tokens = static_cast<int>(*v);
}

}  // namespace

ChatRequest parse_chat(const json& j) {
  ChatRequest r;
  if (const json* m = field(j, "model")) {
    if (!m->is_string()) throw RequestError("'model' must be a string", "model");
    r.model = m->get<std::string>();
  }
  const json* msgs = field(j, "messages");
  if (!msgs) throw RequestError("'messages' is required", "messages");
  if (!msgs->is_array() || msgs->empty()) throw RequestError("'messages' must be a non-empty array", "messages");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    std::string p = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw RequestError(p + " must be an object", p);
    if (!m.contains("role") || !m["role"].is_string()) throw RequestError(p + ".role must be a string", p + ".role");
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant")
      throw RequestError(p + ".role '" + role + "' is not one of system, developer, user, assistant", p + ".role");
    r.messages.push_back({role, content_text(m.contains("content") ? m["content"] : json(), p + ".content")});
  }
  sampling(j, r.gen, true);
  max_tokens(j, r.gen);
  r.gen.stop = stops(j, "stop");
  if (boolean(j, "logprobs", false)) r.gen.top_logprobs = static_cast<int>(integer(j, "top_logprobs", 0, 20).value_or(0));
  if (const json* so = field(j, "stream_options")) {
    if (!so->is_object()) throw RequestError("'stream_options' must be an object", "stream_options");
    r.gen.include_usage = boolean(*so, "include_usage", false);
  }
  if (const json* re = field(j, "reasoning_effort")) {
    if (!re->is_string()) throw RequestError("'reasoning_effort' must be a string", "reasoning_effort");
    std::string v = re->get<std::string>();
    if (v != "none" && v != "minimal" && v != "low" && v != "medium" && v != "high")
      throw RequestError("'reasoning_effort' must be one of none, minimal, low, medium, high", "reasoning_effort");
    r.enable_thinking = !(v == "none" || v == "minimal");
  }
  if (const json* kw = field(j, "chat_template_kwargs")) {
    if (!kw->is_object()) throw RequestError("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    if (const json* et = field(*kw, "enable_thinking")) {
      if (!et->is_boolean())
        throw RequestError("'chat_template_kwargs.enable_thinking' must be a boolean", "chat_template_kwargs.enable_thinking");
      r.enable_thinking = et->get<bool>();
    }
  }
  return r;
}

CompletionRequest parse_completion(const json& j) {
  CompletionRequest r;
  if (const json* m = field(j, "model")) {
    if (!m->is_string()) throw RequestError("'model' must be a string", "model");
    r.model = m->get<std::string>();
  }
  const json* p = field(j, "prompt");
  if (!p) throw RequestError("'prompt' is required", "prompt");
  if (p->is_string()) {
    r.prompt_text = p->get<std::string>();
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number_integer()) {
    r.has_ids = true;
    for (const auto& v : *p) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
        throw RequestError("'prompt' token ids must be non-negative integers", "prompt");
      r.prompt_ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
    }
  } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
    r.prompt_text = (*p)[0].get<std::string>();
  } else {
    throw RequestError("'prompt' must be a string, an array of one string, or an array of token ids", "prompt");
  }
  sampling(j, r.gen, true);
  max_tokens(j, r.gen);
  if (!r.gen.max_tokens) r.gen.max_tokens = 16;  // the completions API's documented default
  r.gen.stop = stops(j, "stop");
  if (auto lp = integer(j, "logprobs", 0, 20)) r.gen.top_logprobs = static_cast<int>(*lp);
  if (const json* so = field(j, "stream_options")) {
    if (!so->is_object()) throw RequestError("'stream_options' must be an object", "stream_options");
    r.gen.include_usage = boolean(*so, "include_usage", false);
  }
  return r;
}

ChatRequest parse_anthropic(const json& j) {
  ChatRequest r;
  if (const json* m = field(j, "model")) {
    if (!m->is_string()) throw RequestError("'model' must be a string", "model");
    r.model = m->get<std::string>();
  }
  auto mt = integer(j, "max_tokens", 0, INT32_MAX);
  if (!mt) throw RequestError("'max_tokens' is required (a non-negative integer)", "max_tokens");
  r.gen.max_tokens = static_cast<int>(*mt);
  if (const json* sys = field(j, "system")) r.messages.push_back({"system", content_text(*sys, "system")});
  const json* msgs = field(j, "messages");
  if (!msgs || !msgs->is_array() || msgs->empty()) throw RequestError("'messages' must be a non-empty array", "messages");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    std::string p = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) throw RequestError(p + " needs a string role", p);
    std::string role = m["role"].get<std::string>();
    if (role != "user" && role != "assistant") throw RequestError(p + ".role must be user or assistant", p + ".role");
    if (!m.contains("content")) throw RequestError(p + ".content is required", p + ".content");
    r.messages.push_back({role, content_text(m["content"], p + ".content")});
  }
  sampling(j, r.gen, false);
  r.gen.stop = stops(j, "stop_sequences");
  if (const json* th = field(j, "thinking")) {
    if (!th->is_object() || !th->contains("type") || !(*th)["type"].is_string())
      throw RequestError("'thinking' must be an object with a string 'type'", "thinking");
    const std::string type = (*th)["type"].get<std::string>();
    if (type != "enabled" && type != "disabled") throw RequestError("'thinking.type' must be enabled or disabled", "thinking.type");
    r.enable_thinking = type == "enabled";
  }
  return r;
}

}  // namespace strata::server
