// strata bench: prompt processing and generation speed, bytes read per token, and the fraction
// of the machine's measured read bandwidth that generation achieves.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "backend/bandwidth.h"
#include "cli/commands.h"
#include "common.h"
#include "engine/session.h"
#include "quant/kernels.h"

namespace strata::cli {

namespace {
// Readings further apart than this are taken as the memory changing speed during the run: on the
// Zen 4 host of the README, readings within one state spread up to 1.2x (31-37 GB/s), while its
// two states differ by 1.35x or more (31-37 against 50-64 GB/s).
constexpr double kBandwidthMoved = 1.3;

struct BenchOptions {
  model::Model::LoadOptions load;
  std::string model;
  KvOptions kv;
  int n_prompt = 512, n_gen = 128, depth = 0, threads = 0, reps = 3, batch = 512;
  bool json = false;
};

struct Stat {
  double median = 0, min = 0, max = 0;
};
Stat stat(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Stat s;
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  return s;
}

// Weight bytes one generated token reads: every matrix once (the embedding table only one row,
// unless it doubles as the output matrix).
double weight_bytes_per_token(const model::Model& m) {
  double total = 0;
  for (const auto& t : m.file().tensors()) {
    if (t.name == "token_embd.weight" && !m.hparams().tied_output) {
      total += static_cast<double>(t.n_bytes) / static_cast<double>(t.ne[1]);
      continue;
    }
    total += static_cast<double>(t.n_bytes);
  }
  return total;
}

void run_bench(const BenchOptions& o) {
  using clock = std::chrono::steady_clock;
  engine::SessionOptions so;
  so.n_ctx = o.depth + o.n_prompt + o.n_gen + 1;
  so.n_threads = o.threads;
  so.n_batch = o.batch;
  apply_kv_options(o.kv, so);
  model::Model::LoadOptions load = o.load;
  load.reserve = [&so](const model::Model& m) { return kv::KvStore::ram_bytes(engine::Session::kv_config(m, so)); };
  auto m = model::Model::load(o.model, load);
  const auto& hp = m->hparams();
  engine::Session s(*m, so);
  // Deterministic pseudo-random tokens (ids avoid the first 4, usually special): the depth's
  // context, then the timed prompt.
  std::vector<int32_t> context(o.depth), prompt(o.n_prompt);
  uint64_t x = 0x2545F4914F6CDD1Dull;
  for (auto* v : {&prompt, &context})
    for (auto& t : *v) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      t = static_cast<int32_t>(4 + x % static_cast<uint64_t>(std::max(1, hp.n_vocab - 4)));
    }
  if (!o.json) std::fprintf(stderr, "%s\n", s.kv().describe().c_str());
  // The read bandwidth is measured before and after the repetitions and the better reading kept:
  // on a shared machine a single reading can land in a slow moment (fractions above 1 were seen).
  ThreadPool pool(s.n_threads());
  const double bw_before = measure_read_bandwidth(pool);
  std::vector<double> pp, tg;
  for (int r = 0; r < o.reps; ++r) {
    s.reset();
    if (o.depth > 0) s.eval(context);  // untimed: the prompt and the generation run at this depth
    if (o.n_prompt > 0) {
      auto t0 = clock::now();
      s.eval(prompt);
      pp.push_back(o.n_prompt / std::chrono::duration<double>(clock::now() - t0).count());
    } else if (o.depth == 0) {
      s.eval({1});
    }
    if (o.n_gen > 0) {
      int32_t tok = 5;
      auto t0 = clock::now();
      for (int i = 0; i < o.n_gen; ++i) {
        auto logits = s.eval({tok});
        tok = engine::Sampler::argmax(logits.data(), hp.n_vocab);
      }
      tg.push_back(o.n_gen / std::chrono::duration<double>(clock::now() - t0).count());
    }
  }
  const double bw_after = measure_read_bandwidth(pool);
  const double bw = std::max(bw_before, bw_after);
  // Both readings are reported: where the machine's memory changes speed during the run (hosts
  // whose readings jump between two levels), the kept reading may not be the one generation met.
  const bool bw_moved = std::min(bw_before, bw_after) > 0 && bw / std::min(bw_before, bw_after) > kBandwidthMoved;
  double wbytes = weight_bytes_per_token(*m);
  // KV cells read per generated token, at the middle of the generation.
  double kv_bytes =
      static_cast<double>(s.kv().bytes_per_cell_per_layer()) * hp.n_layer * (o.depth + o.n_prompt + o.n_gen / 2.0);
  double bytes_per_token = wbytes + kv_bytes;
  Stat ps = pp.empty() ? Stat{} : stat(pp), ts = tg.empty() ? Stat{} : stat(tg);
  double frac = bw > 0 ? bytes_per_token * ts.median / (bw * 1e9) : 0;
  if (o.json) {
    nlohmann::json j = {{"model", o.model},
                        {"arch", hp.arch},
                        {"threads", s.n_threads()},
                        {"kernels", kernels().isa},
                        {"kv", o.kv.format},
                        {"n_prompt", o.n_prompt},
                        {"n_gen", o.n_gen},
                        {"n_depth", o.depth},
                        {"reps", o.reps},
                        {"pp_tokens_per_s", ps.median},
                        {"pp_tokens_per_s_min", ps.min},
                        {"pp_tokens_per_s_max", ps.max},
                        {"tg_tokens_per_s", ts.median},
                        {"tg_tokens_per_s_min", ts.min},
                        {"tg_tokens_per_s_max", ts.max},
                        {"model_bytes_per_token", bytes_per_token},
                        {"weight_bytes_per_token", wbytes},
                        {"kv_bytes_per_token", kv_bytes},
                        {"bandwidth_gbps", bw},
                        {"bandwidth_before_gbps", bw_before},
                        {"bandwidth_after_gbps", bw_after},
                        {"bandwidth_moved", bw_moved},
                        {"achieved_gbps", bytes_per_token * ts.median / 1e9},
                        {"bandwidth_fraction", frac},
                        {"repacked_bytes", m->packed_bytes()},
                        {"grown_bytes", m->grown_bytes()},
                        {"repack_seconds", m->repack_seconds()}};
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("model: %s (%s), %d threads, %s kernels, KV %s, %d repetitions", o.model.c_str(), hp.arch.c_str(),
              s.n_threads(), kernels().isa, o.kv.format.c_str(), o.reps);
  if (o.depth > 0) std::printf(", after %d context tokens", o.depth);
  std::printf("\n");
  std::printf("| test   | tokens/s (median) | min      | max      |\n|--------|-------------------|----------|----------|\n");
  if (!pp.empty()) std::printf("| pp%-4d | %17.2f | %8.2f | %8.2f |\n", o.n_prompt, ps.median, ps.min, ps.max);
  if (!tg.empty()) std::printf("| tg%-4d | %17.2f | %8.2f | %8.2f |\n", o.n_gen, ts.median, ts.min, ts.max);
  std::printf("bytes per generated token: %s (weights %s, KV %s)\n", human_bytes(bytes_per_token).c_str(),
              human_bytes(wbytes).c_str(), human_bytes(kv_bytes).c_str());
  std::printf("measured read bandwidth: %.1f GB/s (%.1f before, %.1f after); generation reads %.1f GB/s = %.0f%% of it\n",
              bw, bw_before, bw_after, bytes_per_token * ts.median / 1e9, 100 * frac);
  if (bw_moved)
    std::printf("the two bandwidth readings differ by more than %.0f%%: the machine's memory changed speed during the run, "
                "so the fraction may not describe the kernels; run again\n",
                100 * (kBandwidthMoved - 1));
  std::printf("weights repacked at load (8-row layout, held in memory): %s of %s in the file, in %.2f s",
              human_bytes(static_cast<double>(m->packed_bytes())).c_str(), human_bytes(static_cast<double>(m->weight_bytes())).c_str(),
              m->repack_seconds());
  if (m->grown_bytes() > 0) std::printf(", grown layouts adding %s", human_bytes(static_cast<double>(m->grown_bytes())).c_str());
  std::printf("\n");
}
}  // namespace

void add_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "Measure prompt and generation speed against memory bandwidth");
  cmd->add_option("-m,--model", o->model, "GGUF file")->required();
  cmd->add_option("-p,--n-prompt", o->n_prompt, "Prompt tokens")->check(CLI::NonNegativeNumber);
  cmd->add_option("-n,--n-gen", o->n_gen, "Generated tokens")->check(CLI::NonNegativeNumber);
  cmd->add_option("-d,--depth", o->depth, "Context tokens evaluated (untimed) before the prompt and generation, as llama-bench's -d")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-t,--threads", o->threads, "Threads (default: physical cores)")->check(CLI::NonNegativeNumber);
  cmd->add_option("-r,--reps", o->reps, "Repetitions (median and spread are reported)")->check(CLI::PositiveNumber);
  cmd->add_option("-b,--batch", o->batch, "Prompt tokens per forward call")->check(CLI::PositiveNumber);
  add_kv_options(cmd, o->kv, "f16");
  add_load_options(cmd, o->load);
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o] { run_bench(*o); });
}

}  // namespace strata::cli
