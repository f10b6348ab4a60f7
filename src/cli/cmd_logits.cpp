// strata logits: teacher-forced float32 logits for every position, row-major [n_pos][n_vocab].
#include <cstdio>
#include <fstream>

#include "cli/commands.h"
#include "common.h"
#include "engine/session.h"
#include "tokenizer/tokenizer.h"

namespace strata::cli {

namespace {
struct LogitsOptions {
  model::Model::LoadOptions load;
  std::string model, prompt, ids, out;
  KvOptions kv;
  int threads = 0, ctx = 0, batch = 256;
};

void run_logits(const LogitsOptions& o) {
  if (o.prompt.empty() == o.ids.empty()) throw Error("give exactly one of -p/--prompt or --ids");
  auto m = model::Model::load(o.model, o.load);
  std::vector<int32_t> ids;
  if (!o.ids.empty()) {
    ids = parse_ids(o.ids);
  } else {
    auto tk = tok::Tokenizer::from_gguf(m->file());
    ids = tk->encode(o.prompt, true, false);
    std::printf("%s\n", join_ids(ids).c_str());
  }
  if (ids.empty()) throw Error("no tokens to evaluate");
  engine::SessionOptions so;
  so.n_ctx = o.ctx > 0 ? o.ctx : std::max<int>(static_cast<int>(ids.size()), 1);
  so.n_threads = o.threads;
  so.n_batch = o.batch;
  apply_kv_options(o.kv, so);
  engine::Session s(*m, so);
  if (o.kv.resident > 0) std::fprintf(stderr, "%s\n", s.kv().describe().c_str());
  auto logits = s.eval(ids, true);
  std::ofstream f(o.out, std::ios::binary);
  if (!f) throw Error("cannot write " + o.out);
  f.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
  if (!f) throw Error("write failed: " + o.out);
  std::fprintf(stderr, "wrote %zu x %d logits to %s\n", ids.size(), m->hparams().n_vocab, o.out.c_str());
}
}  // namespace

void add_logits(CLI::App& app) {
  auto o = std::make_shared<LogitsOptions>();
  auto* cmd = app.add_subcommand("logits", "Write float32 logits of every position of a prompt");
  cmd->add_option("-m,--model", o->model, "GGUF file")->required();
  cmd->add_option("-p,--prompt", o->prompt, "Text to tokenize (BOS added as the vocabulary asks; ids are printed)");
  cmd->add_option("--ids", o->ids, "Comma-separated token ids");
  cmd->add_option("-o,--output", o->out, "Output file, raw float32 [n_pos][n_vocab]")->required();
  cmd->add_option("-t,--threads", o->threads, "Threads (default: physical cores)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--ctx", o->ctx, "Context size (default: the prompt length)")->check(CLI::NonNegativeNumber);
  cmd->add_option("-b,--batch", o->batch, "Tokens per forward call")->check(CLI::PositiveNumber);
  add_kv_options(cmd, o->kv, "f32");
  add_load_options(cmd, o->load);
  cmd->callback([o] { run_logits(*o); });
}

}  // namespace strata::cli
