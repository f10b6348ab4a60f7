// strata serve: the OpenAI/Anthropic-compatible HTTP server.
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "common.h"
#include "server/server.h"

namespace strata::cli {

namespace {
struct ServeOptions {
  model::Model::LoadOptions load;
  std::string model, host = "127.0.0.1", api_key, kv = "f16", kv_spill, alias;
  int port = 8080, parallel = 4, ctx = 4096, threads = 0, kv_resident = 0, max_queue = 64, prefix_cache = -1;
  bool insecure = false;
};

server::Server* g_server = nullptr;
void on_signal(int) {
  if (g_server) g_server->stop();
}

void run_serve(const ServeOptions& o) {
  server::ServerOptions so;
  so.host = o.host;
  so.port = o.port;
  so.api_key = o.api_key;
  if (so.api_key.empty())
    if (const char* k = std::getenv("STRATA_API_KEY")) so.api_key = k;
  so.insecure = o.insecure;
  std::string name = o.model.substr(o.model.find_last_of('/') + 1);
  so.model_name = o.alias.empty() ? name : o.alias;
  server::Server srv(so);
  srv.start();  // listening (health: 503) while the model loads
  std::fprintf(stderr, "strata serve: listening on http://%s:%d/ (loading %s)\n", o.host.c_str(), srv.port(), o.model.c_str());
  g_server = &srv;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  engine::SchedulerOptions sc;
  sc.n_parallel = o.parallel;
  sc.n_ctx = o.ctx;
  sc.n_threads = o.threads;
  sc.kv_format = kv::parse_format(o.kv);
  sc.kv_resident = o.kv_resident;
  sc.kv_spill = o.kv_spill;
  sc.max_queue = o.max_queue;
  sc.prefix_cache = o.prefix_cache;
  model::Model::LoadOptions load = o.load;
  load.reserve = [&sc](const model::Model& m) { return kv::KvStore::ram_bytes(engine::Scheduler::kv_config(m, sc)); };
  auto m = model::Model::load(o.model, load);
  auto tk = tok::Tokenizer::from_gguf(m->file());
  srv.attach(*m, *tk, sc);
  std::fprintf(stderr, "strata serve: ready, %d parallel sequences of %d tokens; weights %s\n", o.parallel, o.ctx,
               repack_summary(*m).c_str());
  std::fflush(stderr);
  srv.wait();
  g_server = nullptr;
  srv.detach();  // the engine thread ends before the model it uses
}
}  // namespace

void add_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand("serve", "OpenAI- and Anthropic-compatible HTTP server with a web chat page");
  cmd->add_option("-m,--model", o->model, "GGUF file")->required();
  cmd->add_option("--host", o->host, "Address to bind (default 127.0.0.1)");
  cmd->add_option("--port", o->port, "Port (0: any free port)")->check(CLI::Range(0, 65535));
  cmd->add_option("--parallel", o->parallel, "Sequences decoded together")->check(CLI::PositiveNumber);
  cmd->add_option("--ctx", o->ctx, "Context per sequence")->check(CLI::PositiveNumber);
  cmd->add_option("--max-queue", o->max_queue, "Waiting requests before 503")->check(CLI::PositiveNumber);
  cmd->add_option("--prefix-cache", o->prefix_cache, "Finished sequences kept for prefix reuse (default: --parallel; 0: off)")
      ->check(CLI::Range(-1, 1024));
  cmd->add_option("-t,--threads", o->threads, "Threads")->check(CLI::NonNegativeNumber);
  cmd->add_option("--kv", o->kv, "KV cache format (f16, f32, int8, q4_0, k8v4)");
  cmd->add_option("--kv-resident", o->kv_resident, "Fast-tier KV cells per layer")->check(CLI::NonNegativeNumber);
  cmd->add_option("--kv-spill", o->kv_spill, "Directory for a file-backed KV backing tier");
  add_load_options(cmd, o->load);
  cmd->add_option("--api-key", o->api_key, "Require this key (Bearer or x-api-key); also STRATA_API_KEY");
  cmd->add_option("--alias", o->alias, "Model name reported by /v1/models");
  cmd->add_flag("--insecure", o->insecure, "Allow a non-loopback address without an API key");
  cmd->callback([o] { run_serve(*o); });
}

}  // namespace strata::cli
