// OpenAI- and Anthropic-compatible HTTP server. HTTP threads parse and validate JSON, apply the
// chat template and tokenize; the scheduler's engine thread runs the model.
#pragma once
#include <memory>
#include <string>

#include "engine/scheduler.h"

namespace strata::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;       // empty: no authentication
  bool insecure = false;     // allow a non-loopback address without an API key
  size_t max_body = 1 << 20;
  std::string model_name;    // name reported by /v1/models
};

class Server {
 public:
  explicit Server(const ServerOptions& o);
  ~Server();
  // Binds (throws when it cannot) and serves in a background thread; /health says 503 until
  // attach() is called.
  void start();
  // Makes the loaded model available; from now on requests are served.
  void attach(const model::Model& m, const tok::Tokenizer& tk, const engine::SchedulerOptions& so);
  void stop();
  void wait();    // until stopped
  void detach();  // stops the engine thread; call before the model and tokenizer go away
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::server
