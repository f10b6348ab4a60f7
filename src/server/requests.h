// Parsing and validation of API request bodies into native generation settings. Pure functions:
// no model, no sockets (so they can be fuzzed and unit-tested).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "tokenizer/chat_template.h"

namespace strata::server {

// A client error: HTTP 400 with OpenAI's error shape; `param` names the offending field.
struct RequestError : std::runtime_error {
  RequestError(const std::string& msg, std::string p = "") : std::runtime_error(msg), param(std::move(p)) {}
  std::string param;
};

// Parses JSON with a nesting limit; invalid JSON, invalid UTF-8 and deep nesting are RequestErrors.
nlohmann::json parse_body(const std::string& body, int max_depth = 32);

struct GenSettings {
  engine::SamplerParams sampling;
  std::optional<int> max_tokens;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  bool ignore_eos = false;  // keep generating past end-of-generation tokens (benchmarks)
  int top_logprobs = -1;  // < 0: none
};

struct ChatRequest {
  std::vector<tok::Message> messages;
  GenSettings gen;
  std::string model;
  // Thinking on or off for templates that can switch it (reasoning_effort none/minimal = off,
  // low/medium/high = on; chat_template_kwargs.enable_thinking, or Anthropic's thinking.type,
  // decide when given). Unset: the template's default (on).
  std::optional<bool> enable_thinking;
};
ChatRequest parse_chat(const nlohmann::json& j);       // /v1/chat/completions

struct CompletionRequest {
  std::string prompt_text;
  std::vector<int32_t> prompt_ids;  // when the prompt is given as token ids
  bool has_ids = false;
  GenSettings gen;
  std::string model;
};
CompletionRequest parse_completion(const nlohmann::json& j);  // /v1/completions

ChatRequest parse_anthropic(const nlohmann::json& j);  // /v1/messages

}  // namespace strata::server
