// strata kv-compare: teacher-forced quality of KV formats against an f32 cache.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/thread_pool.h"
#include "cli/commands.h"
#include "cli/kv_tools.h"
#include "common.h"
#include "engine/session.h"
#include "tokenizer/tokenizer.h"

namespace strata::cli {

namespace {
struct CompareOptions {
  std::string model, file, kv = "int8,q4_0,k8v4";
  int ctx = 2048, resident = 0, threads = 0, chunk = 256;
  bool json = false;
};

struct Acc {
  std::vector<double> kl;
  int top1 = 0, n = 0;
  double nll = 0;
  int n_nll = 0;
  bool identical = true;  // streamed variants: logits bit-identical to the unstreamed twin
};

// log(sum(exp(x))) of a row, in double.
double log_sum_exp(const float* x, int n) {
  double mx = *std::max_element(x, x + n), s = 0;
  for (int i = 0; i < n; ++i) s += std::exp(x[i] - mx);
  return mx + std::log(s);
}
}  // namespace

nlohmann::json kl_rows(const model::Model& m, const std::vector<int32_t>& ids, const std::vector<KvVariant>& variants,
                       int threads, int chunk, double& ref_ppl) {
  const int V = m.hparams().n_vocab, N = static_cast<int>(ids.size());
  const auto& hp = m.hparams();
  for (const auto& v : variants) {
    std::string why = kv::format_unsupported_reason(v.format, hp.head_dim_k, hp.head_dim_v);
    if (!why.empty()) throw Error(why);
  }
  auto make = [&](kv::Format f, int resident) {
    engine::SessionOptions so;
    so.n_ctx = N;
    so.n_threads = threads;
    so.n_batch = chunk;
    so.kv_format = f;
    so.kv_resident = resident;
    return std::make_unique<engine::Session>(m, so);
  };
  auto ref = make(kv::Format::F32, 0);
  std::vector<std::unique_ptr<engine::Session>> sessions;
  for (const auto& v : variants) sessions.push_back(make(v.format, v.resident));
  std::vector<Acc> acc(variants.size());
  Acc ref_acc;
  std::vector<std::vector<float>> unstreamed(variants.size());
  // Per-position statistics are independent: spread them over threads (large vocabularies make
  // this the expensive part), then add them up in position order.
  ThreadPool pool(threads > 0 ? threads : ThreadPool::default_threads());
  for (int b = 0; b < N; b += chunk) {
    std::vector<int32_t> piece(ids.begin() + b, ids.begin() + std::min(N, b + chunk));
    const int n = static_cast<int>(piece.size());
    auto rl = ref->eval(piece, true);
    std::vector<double> ref_lse(n);
    pool.parallel_for(n, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) ref_lse[t] = log_sum_exp(rl.data() + static_cast<size_t>(t) * V, V);
    });
    for (int t = 0; t < n && b + t + 1 < N; ++t) {
      ref_acc.nll -= rl[static_cast<size_t>(t) * V + ids[b + t + 1]] - ref_lse[t];
      ++ref_acc.n_nll;
    }
    for (size_t vi = 0; vi < variants.size(); ++vi) {
      auto tl = sessions[vi]->eval(piece, true);
      if (variants[vi].resident == 0) unstreamed[vi] = tl;
      std::vector<double> kl(n), nll(n);
      std::vector<char> same_top(n);
      pool.parallel_for(n, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          const float* r = rl.data() + static_cast<size_t>(t) * V;
          const float* q = tl.data() + static_cast<size_t>(t) * V;
          const double lr = ref_lse[t], lq = log_sum_exp(q, V);
          double k = 0;
          for (int i = 0; i < V; ++i) {
            const double pr = r[i] - lr, pq = q[i] - lq;
            k += std::exp(pr) * (pr - pq);
          }
          kl[t] = std::max(0.0, k);
          same_top[t] = std::max_element(r, r + V) - r == std::max_element(q, q + V) - q;
          if (b + t + 1 < N) nll[t] = -(q[ids[b + t + 1]] - lq);
        }
      });
      for (int t = 0; t < n; ++t) {
        acc[vi].kl.push_back(kl[t]);
        acc[vi].top1 += same_top[t];
        ++acc[vi].n;
        if (b + t + 1 < N) {
          acc[vi].nll += nll[t];
          ++acc[vi].n_nll;
        }
      }
      if (variants[vi].resident > 0) {
        // The unstreamed twin is the variant with the same format and no residency limit.
        for (size_t u = 0; u < variants.size(); ++u)
          if (variants[u].resident == 0 && variants[u].format == variants[vi].format)
            acc[vi].identical &= std::memcmp(unstreamed[u].data(), tl.data(), tl.size() * 4) == 0;
      }
    }
  }
  ref_ppl = std::exp(ref_acc.nll / std::max(1, ref_acc.n_nll));
  nlohmann::json rows = nlohmann::json::array();
  for (size_t vi = 0; vi < variants.size(); ++vi) {
    auto& a = acc[vi];
    std::vector<double> sorted = a.kl;
    std::sort(sorted.begin(), sorted.end());
    double mean = 0;
    for (double k : a.kl) mean += k;
    mean /= std::max<size_t>(1, a.kl.size());
    double p99 = sorted.empty() ? 0 : sorted[std::min(sorted.size() - 1, static_cast<size_t>(0.99 * sorted.size()))];
    double ppl = std::exp(a.nll / std::max(1, a.n_nll));
    kv::KvStore probe(m.kv_config(16, variants[vi].format));
    nlohmann::json row = {{"kv", variants[vi].label()},
                          {"format", kv::format_name(variants[vi].format)},
                          {"resident", variants[vi].resident},
                          {"mean_kl", mean},
                          {"p99_kl", p99},
                          {"top1_agreement", static_cast<double>(a.top1) / std::max(1, a.n)},
                          {"perplexity", ppl},
                          {"perplexity_ratio", ppl / ref_ppl},
                          {"kv_bytes_per_token", static_cast<double>(probe.bytes_per_cell_per_layer()) * hp.n_layer}};
    if (variants[vi].resident > 0) row["identical_to_unstreamed"] = a.identical;
    rows.push_back(row);
  }
  return rows;
}

namespace {
void run_compare(const CompareOptions& o) {
  std::ifstream in(o.file, std::ios::binary);
  if (!in) throw Error("cannot read " + o.file);
  std::stringstream ss;
  ss << in.rdbuf();
  auto m = model::Model::load(o.model);
  auto tk = tok::Tokenizer::from_gguf(m->file());
  auto ids = tk->encode(ss.str(), true, false);
  if (static_cast<int>(ids.size()) > o.ctx) ids.resize(o.ctx);
  if (ids.size() < 2) throw Error(o.file + " gives fewer than 2 tokens");
  const int N = static_cast<int>(ids.size());
  const auto& hp = m->hparams();
  auto variants = kv_variants(o.kv, o.resident);
  double ref_ppl = 0;
  nlohmann::json rows = kl_rows(*m, ids, variants, o.threads, o.chunk, ref_ppl);
  const double f32_bytes = 4.0 * (hp.head_dim_k + hp.head_dim_v) * hp.n_head_kv * hp.n_layer;
  if (o.json) {
    nlohmann::json j = {{"model", o.model}, {"file", o.file}, {"tokens", N}, {"reference_kv", "f32"},
                        {"reference_perplexity", ref_ppl}, {"reference_kv_bytes_per_token", f32_bytes}, {"results", rows}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s: %d tokens of %s, reference f32 KV cache: perplexity %.4f, %.0f KV bytes per token\n\n", o.model.c_str(), N,
                o.file.c_str(), ref_ppl, f32_bytes);
    std::printf("| kv            | mean KL    | p99 KL     | top-1    | perplexity | ppl ratio | KV B/token | identical to unstreamed |\n");
    std::printf("|---------------|------------|------------|----------|------------|-----------|------------|-------------------------|\n");
    for (const auto& r : rows)
      std::printf("| %-13s | %10.3e | %10.3e | %7.2f%% | %10.4f | %9.5f | %10.0f | %-23s |\n", r["kv"].get<std::string>().c_str(),
                  r["mean_kl"].get<double>(), r["p99_kl"].get<double>(), 100 * r["top1_agreement"].get<double>(),
                  r["perplexity"].get<double>(), r["perplexity_ratio"].get<double>(), r["kv_bytes_per_token"].get<double>(),
                  r.contains("identical_to_unstreamed") ? (r["identical_to_unstreamed"].get<bool>() ? "yes" : "NO") : "-");
  }
  for (const auto& r : rows)
    if (r.contains("identical_to_unstreamed") && !r["identical_to_unstreamed"].get<bool>())
      throw Error("streamed " + r["kv"].get<std::string>() + " differs from its unstreamed twin");
}
}  // namespace

void add_kv_compare(CLI::App& app) {
  auto o = std::make_shared<CompareOptions>();
  auto* cmd = app.add_subcommand("kv-compare", "Teacher-forced KL / top-1 / perplexity of KV formats against an f32 cache");
  cmd->add_option("-m,--model", o->model, "GGUF file")->required();
  cmd->add_option("-f,--file", o->file, "Text to run (its first --ctx tokens)")->required();
  cmd->add_option("--ctx", o->ctx, "Tokens to evaluate")->check(CLI::PositiveNumber);
  cmd->add_option("--kv", o->kv, "Comma-separated formats to compare (f16, int8, q4_0, k8v4)");
  cmd->add_option("--kv-resident", o->resident, "Also run each format streamed with this many resident cells")->check(CLI::NonNegativeNumber);
  cmd->add_option("-t,--threads", o->threads, "Threads")->check(CLI::NonNegativeNumber);
  cmd->add_option("--chunk", o->chunk, "Tokens per forward call")->check(CLI::PositiveNumber);
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->callback([o] { run_compare(*o); });
}

}  // namespace strata::cli
