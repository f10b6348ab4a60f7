#include "server/server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "common.h"
#include "server/requests.h"
#include "tokenizer/chat_template.h"

namespace strata::server {

extern const char* const kWebPage;

using json = nlohmann::json;

namespace {

std::string new_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  auto now = std::chrono::system_clock::now().time_since_epoch().count();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%llx%04llx", prefix, static_cast<unsigned long long>(now),
                static_cast<unsigned long long>(counter++ & 0xFFFF));
  return buf;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void send_error(httplib::Response& res, int status, const std::string& msg, const std::string& type = "invalid_request_error",
                const std::string& param = "") {
  json e = {{"error", {{"message", msg}, {"type", type}, {"param", param.empty() ? json() : json(param)}, {"code", json()}}}};
  res.status = status;
  res.set_content(e.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

json usage_json(int prompt_tokens, int completion_tokens) {
  return {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

std::string sse(const json& j) { return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n"; }
std::string sse_event(const char* event, const json& j) {
  return std::string("event: ") + event + "\n" + sse(j);
}

}  // namespace

struct Server::Impl {
  ServerOptions opt;
  httplib::Server http;
  std::thread thread;
  int port = 0;
  std::atomic<bool> ready{false};
  const model::Model* model = nullptr;
  const tok::Tokenizer* tk = nullptr;
  tok::ChatTemplate chat;
  std::unique_ptr<engine::Scheduler> sched;
  std::atomic<uint64_t> http_requests{0}, rejected{0};

  bool authorized(const httplib::Request& req) const {
    if (opt.api_key.empty()) return true;
    auto bearer = req.get_header_value("Authorization");
    if (bearer == "Bearer " + opt.api_key) return true;
    return req.get_header_value("x-api-key") == opt.api_key;
  }

  // Common gate of the API routes: readiness and authentication.
  bool gate(const httplib::Request& req, httplib::Response& res) {
    ++http_requests;
    if (!ready) {
      send_error(res, 503, "the model is still loading", "unavailable");
      res.set_header("Retry-After", "2");
      return false;
    }
    if (!authorized(req)) {
      send_error(res, 401, "missing or wrong API key (send 'Authorization: Bearer KEY' or 'x-api-key: KEY')", "authentication_error");
      return false;
    }
    return true;
  }

  engine::GenRequest make_request(std::vector<int32_t> prompt, const GenSettings& g) {
    engine::GenRequest r;
    r.prompt = std::move(prompt);
    r.sampling = g.sampling;
    int room = sched->options().n_ctx - static_cast<int>(r.prompt.size()) - 1;
    if (room < 0)
      throw RequestError("the prompt has " + std::to_string(r.prompt.size()) + " tokens but the context holds " +
                         std::to_string(sched->options().n_ctx) + " per request", "messages");
    r.max_tokens = g.max_tokens ? std::min(*g.max_tokens, room) : room;
    r.stop = g.stop;
    r.top_logprobs = g.top_logprobs;
    r.ignore_eos = g.ignore_eos;
    return r;
  }

  // Queues a request; false (and a 503 sent) when the queue is full.
  bool submit(engine::GenRequest& r, httplib::Response& res) {
    if (!sched->submit(r)) {
      ++rejected;
      send_error(res, 503, "the server is busy: the request queue is full; retry later", "overloaded");
      res.set_header("Retry-After", "1");
      return false;
    }
    return true;
  }

  json logprob_entry(const engine::TokenEvent& e) {
    json top = json::array();
    for (auto [id, lp] : e.top) {
      std::string piece = tk->piece(id);
      top.push_back({{"token", piece}, {"logprob", lp}, {"bytes", std::vector<uint8_t>(piece.begin(), piece.end())}});
    }
    std::string piece = tk->piece(e.token);
    return {{"token", piece}, {"logprob", e.logprob}, {"bytes", std::vector<uint8_t>(piece.begin(), piece.end())},
            {"top_logprobs", top}};
  }

  // Collects a whole answer (non-streaming).
  struct Answer {
    std::string text, finish = "stop", error, stop_sequence;
    int prompt_tokens = 0, completion_tokens = 0;
    std::vector<engine::TokenEvent> tokens;
  };
  // Moves events into `a` for up to timeout_ms; true once the answer is complete (or failed).
  static bool pump(engine::Channel& out, Answer& a, int timeout_ms) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
      if (left <= 0) return false;
      auto e = out.pop(static_cast<int>(left));
      if (!e) return false;
      if (e->kind == engine::TokenEvent::Failed) {
        a.error = e->error;
        return true;
      }
      if (e->kind == engine::TokenEvent::Done) {
        a.finish = e->finish_reason;
        a.stop_sequence = e->stop_sequence;
        a.prompt_tokens = e->prompt_tokens;
        a.completion_tokens = e->completion_tokens;
        return true;
      }
      a.text += e->text;
      if (e->token >= 0) a.tokens.push_back(*e);
    }
  }

  // A non-streaming answer. The body is sent chunked: while the answer is generated a space is
  // written every second (JSON allows leading whitespace), so a client that has gone away is
  // noticed by a failed write and its sequence is cancelled, as for streams. An engine failure
  // after the headers went out is reported as an error object in the body.
  void respond_when_done(httplib::Response& res, std::shared_ptr<engine::Channel> out, const std::string& error_type,
                         std::function<json(const Answer&)> build) {
    auto a = std::make_shared<Answer>();
    auto finished = std::make_shared<bool>(false);
    res.set_chunked_content_provider(
        "application/json",
        [out, a, finished, error_type, build](size_t, httplib::DataSink& sink) {
          if (!pump(*out, *a, 1000)) return sink.write(" ", 1);
          json body = a->error.empty()
                          ? build(*a)
                          : json{{"error", {{"message", a->error}, {"type", error_type}, {"param", nullptr}, {"code", nullptr}}}};
          std::string text = body.dump(-1, ' ', false, json::error_handler_t::replace);
          *finished = true;
          bool ok = sink.write(text.data(), text.size());
          sink.done();
          return ok;
        },
        [out, finished](bool success) {
          if (!success || !*finished) out->cancel();  // the client left: free the sequence
        });
  }

  std::vector<int32_t> chat_prompt(const ChatRequest& cr) {
    try {
      tok::ThinkingControl think{chat.thinking, cr.enable_thinking.value_or(true)};
      return tk->encode(tok::apply_chat_template(chat.format, cr.messages, true, think), true, true);
    } catch (const Error& e) {
      throw RequestError(e.what(), "messages");
    }
  }

  void chat_completions(const httplib::Request& req, httplib::Response& res) {
    ChatRequest cr = parse_chat(parse_body(req.body));
    engine::GenRequest r = make_request(chat_prompt(cr), cr.gen);
    if (!submit(r, res)) return;
    const std::string id = new_id("chatcmpl"), model_name = cr.model.empty() ? opt.model_name : cr.model;
    const int64_t created = unix_now();
    const bool want_lp = cr.gen.top_logprobs >= 0;
    if (!cr.gen.stream) {
      const bool split = chat.thinking;
      respond_when_done(res, r.out, "server_error", [=, this](const Answer& a) {
        json message = {{"role", "assistant"}, {"content", a.text}};
        if (split) {  // thinking apart from the answer, as reasoning_content
          auto parts = tok::ReasoningSplitter::split(a.text);
          message["content"] = parts.content;
          if (!parts.reasoning.empty()) message["reasoning_content"] = parts.reasoning;
        }
        json choice = {{"index", 0}, {"message", message}, {"finish_reason", a.finish}};
        if (want_lp) {
          json content = json::array();
          for (const auto& t : a.tokens) content.push_back(logprob_entry(t));
          choice["logprobs"] = {{"content", content}};
        } else {
          choice["logprobs"] = nullptr;
        }
        return json{{"id", id}, {"object", "chat.completion"}, {"created", created}, {"model", model_name},
                    {"choices", json::array({choice})}, {"usage", usage_json(a.prompt_tokens, a.completion_tokens)}};
      });
      return;
    }
    auto out = r.out;
    const bool usage = cr.gen.include_usage;
    auto state = std::make_shared<int>(0);  // 0: role chunk pending, 1: streaming, 2: finished
    auto splitter = chat.thinking ? std::make_shared<tok::ReasoningSplitter>() : nullptr;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [out, id, model_name, created, usage, want_lp, state, splitter, this](size_t, httplib::DataSink& sink) {
          auto chunk = [&](json delta, json finish, json lp = nullptr) {
            json c = {{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", std::move(finish)}};
            if (want_lp) c["logprobs"] = std::move(lp);
            return json{{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model_name},
                        {"choices", json::array({c})}};
          };
          if (*state == 0) {
            *state = 1;
            std::string s = sse(chunk({{"role", "assistant"}, {"content", ""}}, nullptr));
            return sink.write(s.data(), s.size());
          }
          auto e = out->pop(200);
          if (!e) return sink.is_writable();  // keep waiting while the client is there
          std::string s;
          if (e->kind == engine::TokenEvent::Failed) {
            s = sse({{"error", {{"message", e->error}, {"type", "server_error"}}}}) + "data: [DONE]\n\n";
            sink.write(s.data(), s.size());
            sink.done();
            return true;
          }
          // A delta carries the answer as content and the thinking as reasoning_content.
          auto delta = [&](const tok::ReasoningSplitter::Parts& p) {
            json d = json::object();
            if (!p.reasoning.empty()) d["reasoning_content"] = p.reasoning;
            if (!p.content.empty()) d["content"] = p.content;
            return d;
          };
          if (e->kind == engine::TokenEvent::Done) {
            if (splitter) {
              json d = delta(splitter->finish());
              if (!d.empty()) s += sse(chunk(d, nullptr));
            }
            s += sse(chunk(json::object(), e->finish_reason));
            if (usage)
              s += sse({{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model_name},
                        {"choices", json::array()}, {"usage", usage_json(e->prompt_tokens, e->completion_tokens)}});
            s += "data: [DONE]\n\n";
            *state = 2;
            bool ok = sink.write(s.data(), s.size());
            sink.done();
            return ok;
          }
          json lp = nullptr;
          if (want_lp && e->token >= 0) lp = {{"content", json::array({logprob_entry(*e)})}};
          json d = splitter ? delta(splitter->push(e->text)) : json{{"content", e->text}};
          if (e->text.empty() || d.empty()) {
            if (lp.is_null()) return true;
            d["content"] = "";
          }
          s = sse(chunk(d, nullptr, lp));
          return sink.write(s.data(), s.size());
        },
        [out, state](bool success) {
          if (!success || *state != 2) out->cancel();  // the client left: free the sequence
        });
  }

  void completions(const httplib::Request& req, httplib::Response& res) {
    CompletionRequest cr = parse_completion(parse_body(req.body));
    std::vector<int32_t> prompt = cr.has_ids ? cr.prompt_ids : tk->encode(cr.prompt_text, true, false);
    engine::GenRequest r = make_request(prompt, cr.gen);
    if (!submit(r, res)) return;
    const std::string id = new_id("cmpl"), model_name = cr.model.empty() ? opt.model_name : cr.model;
    const int64_t created = unix_now();
    const bool want_lp = cr.gen.top_logprobs >= 0;
    auto lp_json = [want_lp, this](const std::vector<engine::TokenEvent>& toks) -> json {
      if (!want_lp) return nullptr;
      json tokens = json::array(), lps = json::array(), tops = json::array();
      for (const auto& t : toks) {
        tokens.push_back(tk->piece(t.token));
        lps.push_back(t.logprob);
        json top = json::object();
        for (auto [tid, l] : t.top) top[tk->piece(tid)] = l;
        tops.push_back(top);
      }
      return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}};
    };
    if (!cr.gen.stream) {
      respond_when_done(res, r.out, "server_error", [=](const Answer& a) {
        return json{{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model_name},
                    {"choices", json::array({{{"index", 0}, {"text", a.text}, {"finish_reason", a.finish}, {"logprobs", lp_json(a.tokens)}}})},
                    {"usage", usage_json(a.prompt_tokens, a.completion_tokens)}};
      });
      return;
    }
    auto out = r.out;
    const bool usage = cr.gen.include_usage;
    auto state = std::make_shared<int>(1);
    res.set_chunked_content_provider(
        "text/event-stream",
        [out, id, model_name, created, usage, want_lp, state, lp_json](size_t, httplib::DataSink& sink) {
          auto e = out->pop(200);
          if (!e) return sink.is_writable();
          auto chunk = [&](const std::string& text, json finish, json lp) {
            return json{{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model_name},
                        {"choices", json::array({{{"index", 0}, {"text", text}, {"finish_reason", finish}, {"logprobs", lp}}})}};
          };
          std::string s;
          if (e->kind == engine::TokenEvent::Failed) {
            s = sse({{"error", {{"message", e->error}, {"type", "server_error"}}}}) + "data: [DONE]\n\n";
            sink.write(s.data(), s.size());
            sink.done();
            return true;
          }
          if (e->kind == engine::TokenEvent::Done) {
            s = sse(chunk("", e->finish_reason, nullptr));
            if (usage)
              s += sse({{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model_name},
                        {"choices", json::array()}, {"usage", usage_json(e->prompt_tokens, e->completion_tokens)}});
            s += "data: [DONE]\n\n";
            *state = 2;
            bool ok = sink.write(s.data(), s.size());
            sink.done();
            return ok;
          }
          if (e->text.empty() && !want_lp) return true;
          s = sse(chunk(e->text, nullptr, want_lp && e->token >= 0 ? lp_json({*e}) : json(nullptr)));
          return sink.write(s.data(), s.size());
        },
        [out, state](bool success) {
          if (!success || *state != 2) out->cancel();
        });
  }

  void messages(const httplib::Request& req, httplib::Response& res) {
    ChatRequest cr = parse_anthropic(parse_body(req.body));
    engine::GenRequest r = make_request(chat_prompt(cr), cr.gen);
    if (!submit(r, res)) return;
    const std::string id = new_id("msg"), model_name = cr.model.empty() ? opt.model_name : cr.model;
    auto reason = [](const std::string& f, bool stop_seq) {
      return f == "length" ? "max_tokens" : (stop_seq ? "stop_sequence" : "end_turn");
    };
    if (!cr.gen.stream) {
      const bool split = chat.thinking;
      respond_when_done(res, r.out, "api_error", [=](const Answer& a) {
        const bool stop_seq = !a.stop_sequence.empty();
        json content = json::array();
        std::string text = a.text;
        if (split) {  // the thinking goes into a thinking block before the text
          auto parts = tok::ReasoningSplitter::split(a.text);
          text = parts.content;
          if (!parts.reasoning.empty())
            content.push_back({{"type", "thinking"}, {"thinking", parts.reasoning}, {"signature", ""}});
        }
        content.push_back({{"type", "text"}, {"text", text}});
        return json{{"id", id}, {"type", "message"}, {"role", "assistant"}, {"model", model_name},
                    {"content", content},
                    {"stop_reason", reason(a.finish, stop_seq)},
                    {"stop_sequence", stop_seq ? json(a.stop_sequence) : json(nullptr)},
                    {"usage", {{"input_tokens", a.prompt_tokens}, {"output_tokens", a.completion_tokens}}}};
      });
      return;
    }
    auto out = r.out;
    const int prompt_tokens = static_cast<int>(r.prompt.size());
    // Content blocks open as the text arrives: a thinking block (models that think) and then the
    // text block, each with its own index.
    struct Stream {
      int state = 0;  // 0: message_start pending, 1: streaming, 2: finished
      int index = -1;
      std::string open;  // type of the open block, "" when none
      std::unique_ptr<tok::ReasoningSplitter> splitter;
    };
    auto st = std::make_shared<Stream>();
    if (chat.thinking) st->splitter = std::make_unique<tok::ReasoningSplitter>();
    res.set_chunked_content_provider(
        "text/event-stream",
        [out, id, model_name, st, prompt_tokens, reason](size_t, httplib::DataSink& sink) {
          std::string s;
          auto block = [&](const std::string& type, const std::string& text) {
            if (text.empty()) return;
            if (st->open != type) {
              if (!st->open.empty()) s += sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", st->index}});
              st->open = type;
              ++st->index;
              json cb = type == "thinking" ? json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                                           : json{{"type", "text"}, {"text", ""}};
              s += sse_event("content_block_start", {{"type", "content_block_start"}, {"index", st->index}, {"content_block", cb}});
            }
            json d = type == "thinking" ? json{{"type", "thinking_delta"}, {"thinking", text}}
                                        : json{{"type", "text_delta"}, {"text", text}};
            s += sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", st->index}, {"delta", d}});
          };
          auto parts = [&](const tok::ReasoningSplitter::Parts& p) {
            block("thinking", p.reasoning);
            block("text", p.content);
          };
          if (st->state == 0) {
            st->state = 1;
            s = sse_event("message_start", {{"type", "message_start"},
                                            {"message", {{"id", id}, {"type", "message"}, {"role", "assistant"}, {"model", model_name},
                                                         {"content", json::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                                                         {"usage", {{"input_tokens", prompt_tokens}, {"output_tokens", 0}}}}}});
            if (!st->splitter) {  // plain models: the text block opens at once
              st->open = "text";
              st->index = 0;
              s += sse_event("content_block_start", {{"type", "content_block_start"}, {"index", 0},
                                                     {"content_block", {{"type", "text"}, {"text", ""}}}});
            }
            return sink.write(s.data(), s.size());
          }
          auto e = out->pop(200);
          if (!e) return sink.is_writable();
          if (e->kind == engine::TokenEvent::Failed) {
            s = sse_event("error", {{"type", "error"}, {"error", {{"type", "api_error"}, {"message", e->error}}}});
            sink.write(s.data(), s.size());
            sink.done();
            return true;
          }
          if (e->kind == engine::TokenEvent::Done) {
            if (st->splitter) parts(st->splitter->finish());
            if (st->open.empty()) {  // nothing was generated: an empty text block
              st->open = "text";
              ++st->index;
              s += sse_event("content_block_start", {{"type", "content_block_start"}, {"index", st->index},
                                                     {"content_block", {{"type", "text"}, {"text", ""}}}});
            }
            s += sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", st->index}}) +
                 sse_event("message_delta", {{"type", "message_delta"},
                                             {"delta", {{"stop_reason", reason(e->finish_reason, !e->stop_sequence.empty())},
                                                        {"stop_sequence", e->stop_sequence.empty() ? json(nullptr) : json(e->stop_sequence)}}},
                                             {"usage", {{"output_tokens", e->completion_tokens}}}}) +
                 sse_event("message_stop", {{"type", "message_stop"}});
            st->state = 2;
            bool ok = sink.write(s.data(), s.size());
            sink.done();
            return ok;
          }
          if (e->text.empty()) return true;
          if (st->splitter) parts(st->splitter->push(e->text));
          else block("text", e->text);
          if (s.empty()) return true;
          return sink.write(s.data(), s.size());
        },
        [out, st](bool success) {
          if (!success || st->state != 2) out->cancel();
        });
  }

  json status_json() {
    auto st = sched->stats();
    return {{"model", opt.model_name},
            {"arch", model->hparams().arch},
            {"kv", st.kv_description},
            {"kv_format", kv::format_name(sched->options().kv_format)},
            {"kv_resident_cells", sched->options().kv_resident},
            {"kv_bytes_in_use", st.kv_bytes_in_use},
            {"kv_bytes_capacity", st.kv_bytes_capacity},
            {"kv_bytes_prefix_cache", st.kv_bytes_prefix_cache},
            {"prefix_cached_sequences", st.cached_sequences},
            {"prefix_reused_tokens", st.reused_tokens},
            {"slots", st.n_parallel},
            {"active", st.active},
            {"queued", st.queued},
            {"ctx_per_slot", sched->options().n_ctx},
            {"requests", st.requests},
            {"generated_tokens", st.generated_tokens},
            {"generation_tokens_per_s", st.generate_seconds > 0 ? st.generated_tokens / st.generate_seconds : 0.0}};
  }

  void routes() {
    auto wrap = [this](void (Impl::*fn)(const httplib::Request&, httplib::Response&)) {
      return [this, fn](const httplib::Request& req, httplib::Response& res) {
        if (!gate(req, res)) return;
        try {
          (this->*fn)(req, res);
        } catch (const RequestError& e) {
          send_error(res, 400, e.what(), "invalid_request_error", e.param);
        } catch (const Error& e) {
          send_error(res, 400, e.what());
        } catch (const std::exception& e) {
          send_error(res, 500, e.what(), "server_error");
        }
      };
    };
    http.Post("/v1/chat/completions", wrap(&Impl::chat_completions));
    http.Post("/v1/completions", wrap(&Impl::completions));
    http.Post("/v1/messages", wrap(&Impl::messages));
    http.Post("/tokenize", wrap(&Impl::tokenize));
    http.Post("/detokenize", wrap(&Impl::detokenize));
    http.Get("/v1/models", wrap(&Impl::models));
    http.Get("/v1/status", wrap(&Impl::status));
    http.Get("/metrics", wrap(&Impl::metrics));
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      if (!ready) {
        res.status = 503;
        res.set_content(R"({"status":"loading"})", "application/json");
      } else {
        res.set_content(R"({"status":"ok"})", "application/json");
      }
    });
    http.Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_content(kWebPage, "text/html; charset=utf-8"); });
    http.set_payload_max_length(opt.max_body);
    http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
      if (!res.body.empty()) return;
      std::string msg = res.status == 404 ? "no such endpoint" : res.status == 413 ? "request body too large" : "request failed";
      send_error(res, res.status, msg);
    });
  }

  void tokenize(const httplib::Request& req, httplib::Response& res) {
    json j = parse_body(req.body);
    if (!j.contains("content") || !j["content"].is_string()) throw RequestError("'content' must be a string", "content");
    bool special = j.value("parse_special", false), bos = j.value("add_special", false);
    auto ids = tk->encode(j["content"].get<std::string>(), bos, special);
    res.set_content(json{{"tokens", ids}}.dump(), "application/json");
  }
  void detokenize(const httplib::Request& req, httplib::Response& res) {
    json j = parse_body(req.body);
    if (!j.contains("tokens") || !j["tokens"].is_array()) throw RequestError("'tokens' must be an array of token ids", "tokens");
    std::string s;
    for (const auto& t : j["tokens"]) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tk->n_vocab())
        throw RequestError("'tokens' must hold token ids of this vocabulary", "tokens");
      s += tk->piece(static_cast<int32_t>(t.get<int64_t>()));
    }
    res.set_content(json{{"content", s}}.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
  }
  void models(const httplib::Request&, httplib::Response& res) {
    json m = {{"id", opt.model_name}, {"object", "model"}, {"created", unix_now()}, {"owned_by", "strata"}};
    res.set_content(json{{"object", "list"}, {"data", json::array({m})}}.dump(), "application/json");
  }
  void status(const httplib::Request&, httplib::Response& res) { res.set_content(status_json().dump(), "application/json"); }
  void metrics(const httplib::Request&, httplib::Response& res) {
    auto st = sched->stats();
    std::string s;
    auto metric = [&](const char* name, const char* type, const char* help, double v) {
      s += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + std::to_string(v) + "\n";
    };
    metric("strata_requests_total", "counter", "Generation requests accepted.", static_cast<double>(st.requests));
    metric("strata_requests_rejected_total", "counter", "Requests refused because the queue was full.", static_cast<double>(rejected));
    metric("strata_http_requests_total", "counter", "HTTP requests to API routes.", static_cast<double>(http_requests));
    metric("strata_prompt_tokens_total", "counter", "Prompt tokens processed.", static_cast<double>(st.prompt_tokens));
    metric("strata_generated_tokens_total", "counter", "Tokens generated.", static_cast<double>(st.generated_tokens));
    metric("strata_generation_tokens_per_second", "gauge", "Generated tokens per second of generating steps.",
           st.generate_seconds > 0 ? st.generated_tokens / st.generate_seconds : 0.0);
    metric("strata_queue_depth", "gauge", "Requests waiting for a slot.", st.queued);
    metric("strata_active_sequences", "gauge", "Sequences being generated.", st.active);
    metric("strata_kv_bytes_in_use", "gauge", "KV cache bytes held by sequences.", static_cast<double>(st.kv_bytes_in_use));
    metric("strata_kv_bytes_capacity", "gauge", "KV cache capacity in bytes.", static_cast<double>(st.kv_bytes_capacity));
    metric("strata_kv_bytes_prefix_cache", "gauge", "KV bytes held by finished sequences kept for prefix reuse.",
           static_cast<double>(st.kv_bytes_prefix_cache));
    metric("strata_prefix_reused_tokens_total", "counter", "Prompt tokens whose cells were copied from the prefix cache.",
           static_cast<double>(st.reused_tokens));
    res.set_content(s, "text/plain; version=0.0.4");
  }
};

Server::Server(const ServerOptions& o) : impl_(new Impl) {
  impl_->opt = o;
  if (!is_loopback(o.host) && o.api_key.empty() && !o.insecure)
    throw Error("refusing to listen on " + o.host + " without an API key: pass --api-key (or STRATA_API_KEY), or --insecure");
  impl_->routes();
}

Server::~Server() {
  stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

void Server::start() {
  if (impl_->opt.port == 0) {
    impl_->port = impl_->http.bind_to_any_port(impl_->opt.host.c_str());
    if (impl_->port <= 0) throw Error("cannot bind " + impl_->opt.host);
  } else {
    if (!impl_->http.bind_to_port(impl_->opt.host.c_str(), impl_->opt.port))
      throw Error("cannot bind " + impl_->opt.host + ":" + std::to_string(impl_->opt.port) + " (in use?)");
    impl_->port = impl_->opt.port;
  }
  impl_->thread = std::thread([this] { impl_->http.listen_after_bind(); });
}

void Server::attach(const model::Model& m, const tok::Tokenizer& tk, const engine::SchedulerOptions& so) {
  impl_->model = &m;
  impl_->tk = &tk;
  impl_->chat = tok::detect_chat_template(tk.chat_template(), m.hparams().arch);
  impl_->sched = std::make_unique<engine::Scheduler>(m, tk, so);
  impl_->ready = true;
}

void Server::stop() { impl_->http.stop(); }

void Server::detach() {
  impl_->ready = false;
  impl_->sched.reset();
}

void Server::wait() {
  if (impl_->thread.joinable()) impl_->thread.join();
}

int Server::port() const { return impl_->port; }

}  // namespace strata::server
