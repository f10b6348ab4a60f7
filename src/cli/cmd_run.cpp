// strata run: generate from a prompt or token ids, or chat interactively.
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "common.h"
#include "engine/session.h"
#include "quant/kernels.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace strata::cli {

namespace {

struct RunOptions {
  model::Model::LoadOptions load;
  std::string model, prompt, ids, system;
  KvOptions kv;
  int n_predict = 128, threads = 0, ctx = 4096, batch = 256;
  bool chat = false, ignore_eos = false, print_ids = false, verbose = false, no_echo = false;
  engine::SamplerParams sp;
};

void print_speed(const engine::GenerateStats& st) {
  std::fprintf(stderr, "\nprompt: %d tokens in %.3f s (%.1f tok/s); generation: %d tokens in %.3f s (%.1f tok/s)\n",
               st.prompt_tokens, st.prompt_seconds, st.prompt_seconds > 0 ? st.prompt_tokens / st.prompt_seconds : 0.0,
               st.generated_tokens, st.generate_seconds,
               st.generate_seconds > 0 ? st.generated_tokens / st.generate_seconds : 0.0);
}

void run_chat(const RunOptions& o, const model::Model& m, const tok::Tokenizer& tk, engine::Session& s) {
  auto ct = tok::detect_chat_template(tk.chat_template(), m.hparams().arch);
  std::fprintf(stderr, "%s\nchat: type a message and press Enter; an empty line or Ctrl-D ends the chat\n", ct.note.c_str());
  std::vector<tok::Message> msgs;
  if (!o.system.empty()) msgs.push_back({"system", o.system});
  std::vector<int32_t> fed;  // tokens the KV cache holds, in order
  engine::Sampler sampler(o.sp);
  auto is_eog = [&](int32_t t) { return tk.is_eog(t); };
  for (;;) {
    std::fprintf(stderr, "\n> ");
    std::string line;
    if (!std::getline(std::cin, line) || line.empty()) break;
    msgs.push_back({"user", line});
    auto ids = tk.encode(tok::apply_chat_template(ct.format, msgs, true), true, true);
    // Reuse the cached prefix; roll back anything the new rendering changed.
    size_t common = 0;
    while (common < fed.size() && common < ids.size() && fed[common] == ids[common]) ++common;
    if (common == ids.size()) --common;  // at least one token must be evaluated for fresh logits
    s.truncate(static_cast<int>(common));
    fed.resize(common);
    std::vector<int32_t> suffix(ids.begin() + common, ids.end());
    std::string reply;
    Utf8Stream out;
    std::vector<int32_t> generated;
    auto st = s.generate(suffix, o.n_predict, sampler, [&](int32_t t) {
      generated.push_back(t);
      std::string p = tk.piece(t);
      reply += p;
      out.write(p);
      return true;
    }, false, is_eog);
    out.flush();
    fed = ids;
    fed.insert(fed.end(), generated.begin(), generated.end());
    // The cache holds every generated token except the last one sampled.
    if (static_cast<int>(fed.size()) > s.n_past()) fed.resize(s.n_past());
    msgs.push_back({"assistant", reply});
    if (o.verbose) print_speed(st);
  }
}

void run_generate(const RunOptions& o) {
  if (o.chat && !o.ids.empty()) throw Error("--chat and --ids cannot be combined");
  if (!o.chat && o.prompt.empty() && o.ids.empty()) throw Error("give a prompt with -p, token ids with --ids, or --chat");
  if (!o.prompt.empty() && !o.ids.empty()) throw Error("give only one of -p/--prompt and --ids");
  engine::SessionOptions so;
  so.n_ctx = o.ctx;
  so.n_threads = o.threads;
  so.n_batch = o.batch;
  apply_kv_options(o.kv, so);
  model::Model::LoadOptions load = o.load;
  load.reserve = [&so](const model::Model& m) { return kv::KvStore::ram_bytes(engine::Session::kv_config(m, so)); };
  auto m = model::Model::load(o.model, load);
  auto tk = tok::Tokenizer::from_gguf(m->file());
  engine::Session s(*m, so);
  if (o.verbose) {
    const auto& hp = m->hparams();
    std::fprintf(stderr, "model: %s, %d layers, %s weights (%s); %d threads; kernels %s\n", hp.arch.c_str(), hp.n_layer,
                 human_bytes(static_cast<double>(m->weight_bytes())).c_str(), repack_summary(*m).c_str(), s.n_threads(),
                 kernels().isa);
  }
  if (o.verbose || o.kv.resident > 0) std::fprintf(stderr, "%s\n", s.kv().describe().c_str());
  if (o.chat) return run_chat(o, *m, *tk, s);

  std::vector<int32_t> prompt = o.ids.empty() ? tk->encode(o.prompt, true, false) : parse_ids(o.ids);
  for (int32_t t : prompt)
    if (t < 0 || t >= tk->n_vocab()) throw Error("token id " + std::to_string(t) + " is outside the vocabulary");
  Utf8Stream out;
  if (!o.no_echo) out.write(o.ids.empty() ? o.prompt : tk->decode(prompt));
  std::vector<int32_t> generated;
  engine::Sampler sampler(o.sp);
  auto st = s.generate(prompt, o.n_predict, sampler, [&](int32_t t) {
    generated.push_back(t);
    out.write(tk->piece(t));
    return true;
  }, o.ignore_eos, [&](int32_t t) { return tk->is_eog(t); });
  out.flush();
  std::printf("\n");
  if (o.print_ids) std::printf("%s\n", join_ids(generated).c_str());
  print_speed(st);
}

}  // namespace

void add_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "Generate text from a prompt, or chat (--chat)");
  cmd->add_option("-m,--model", o->model, "GGUF file")->required();
  cmd->add_option("-p,--prompt", o->prompt, "Prompt text");
  cmd->add_option("--ids", o->ids, "Prompt as comma-separated token ids");
  cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate")->check(CLI::NonNegativeNumber);
  cmd->add_option("--temp", o->sp.temperature, "Temperature (0 = greedy)");
  cmd->add_option("--top-k", o->sp.top_k, "Top-k (0 = off)");
  cmd->add_option("--top-p", o->sp.top_p, "Top-p (1 = off)");
  cmd->add_option("--min-p", o->sp.min_p, "Min-p (0 = off)");
  cmd->add_option("--repeat-penalty", o->sp.repeat_penalty, "Repetition penalty (1 = off)");
  cmd->add_option("--repeat-last-n", o->sp.repeat_last_n, "Tokens the penalty looks back over");
  cmd->add_option("--seed", o->sp.seed, "Random seed");
  cmd->add_option("-t,--threads", o->threads, "Threads (default: physical cores)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--ctx", o->ctx, "Context size in tokens")->check(CLI::PositiveNumber);
  cmd->add_option("-b,--batch", o->batch, "Prompt tokens per forward call")->check(CLI::PositiveNumber);
  add_kv_options(cmd, o->kv, "f16");
  add_load_options(cmd, o->load);
  cmd->add_flag("--chat", o->chat, "Interactive chat using the model's chat format");
  cmd->add_option("--system", o->system, "System message for --chat");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Do not stop at end-of-generation tokens");
  cmd->add_flag("--print-ids", o->print_ids, "Print the generated ids, comma-separated, as the last line of stdout");
  cmd->add_flag("--no-echo", o->no_echo, "Do not print the prompt before the generation");
  cmd->add_flag("-v,--verbose", o->verbose, "Print model, memory and kernel details");
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace strata::cli
