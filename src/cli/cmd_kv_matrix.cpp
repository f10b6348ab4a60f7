// strata kv-matrix: the isolation matrix — every KV configuration against the same checks, one
// row each, so a user can pick a format and a resident size.
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/kv_tools.h"
#include "common.h"

namespace strata::cli {

namespace {
struct MatrixOptions {
  std::string model, file, kv = "f16,int8,q4_0,k8v4", ctxs = "2048", depths = "10,50,90";
  int resident = 0, threads = 0, max_tokens = 400;
  bool json = false;
};

void run_matrix(const MatrixOptions& o) {
  auto m = model::Model::load(o.model);
  auto tk = tok::Tokenizer::from_gguf(m->file());
  std::string text = kDefaultHaystack;
  if (!o.file.empty()) {
    std::ifstream in(o.file, std::ios::binary);
    if (!in) throw Error("cannot read " + o.file);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  std::vector<int> ctxs, depths;
  for (int32_t c : parse_ids(o.ctxs)) {
    if (c < 256) throw Error("--ctx: " + std::to_string(c) + " is too small (at least 256)");
    ctxs.push_back(c);
  }
  for (int32_t d : parse_ids(o.depths)) {
    if (d > 100) throw Error("--depths: " + std::to_string(d) + " is not a percentage");
    depths.push_back(d);
  }
  auto variants = kv_variants(o.kv, o.resident);
  variants.insert(variants.begin(), KvVariant{kv::Format::F32, 0});  // the reference row
  const int max_ctx = *std::max_element(ctxs.begin(), ctxs.end());

  // Probes do not depend on the context size: run them once per configuration.
  std::vector<ProbeOutcome> factual, longgen;
  for (const auto& v : variants) {
    factual.push_back(run_probe(*m, *tk, "primary_colours", v, max_ctx, o.threads, o.max_tokens));
    longgen.push_back(run_probe(*m, *tk, "count_words", v, max_ctx, o.threads, o.max_tokens));
  }
  auto twin = [&](size_t vi) -> int {  // index of the unstreamed twin, or -1
    if (variants[vi].resident == 0) return -1;
    for (size_t u = 0; u < variants.size(); ++u)
      if (variants[u].resident == 0 && variants[u].format == variants[vi].format) return static_cast<int>(u);
    return -1;
  };

  nlohmann::json rows = nlohmann::json::array();
  bool failed = false;
  auto all_ids = tk->encode(text, true, false);
  for (int ctx : ctxs) {
    // Needles: one prompt per depth, the same for every configuration.
    std::vector<std::vector<bool>> pass(variants.size());
    std::vector<std::vector<std::vector<int32_t>>> answers(variants.size());
    for (size_t di = 0; di < depths.size(); ++di) {
      NeedleCase c = needle_case(*tk, text, ctx, depths[di], static_cast<int>(di));
      for (size_t vi = 0; vi < variants.size(); ++vi) {
        std::string answer;
        answers[vi].push_back(needle_answer(*m, *tk, c, variants[vi], ctx, o.threads, answer));
        pass[vi].push_back(answer.find(c.code) != std::string::npos);
      }
    }
    // KL against f32 over the first ctx tokens of the text.
    std::vector<int32_t> ids(all_ids.begin(), all_ids.begin() + std::min<size_t>(all_ids.size(), static_cast<size_t>(ctx)));
    std::vector<KvVariant> compared(variants.begin() + 1, variants.end());
    double ref_ppl = 0;
    nlohmann::json kl = kl_rows(*m, ids, compared, o.threads, 256, ref_ppl);
    for (size_t vi = 0; vi < variants.size(); ++vi) {
      int passed = 0;
      for (bool p : pass[vi]) passed += p;
      std::string identical = "-";
      if (int u = twin(vi); u >= 0) {
        bool same = answers[vi] == answers[u] && factual[vi].ids == factual[u].ids && longgen[vi].ids == longgen[u].ids &&
                    kl[vi - 1].value("identical_to_unstreamed", true);
        identical = same ? "yes" : "NO";
        failed |= !same;
      }
      const bool caused = longgen[vi].degenerate() && !longgen[0].degenerate();
      failed |= caused;
      nlohmann::json row = {{"kv", variants[vi].label()},
                            {"format", kv::format_name(variants[vi].format)},
                            {"resident", variants[vi].resident},
                            {"ctx", ctx},
                            {"needles_passed", passed},
                            {"needles", static_cast<int>(depths.size())},
                            {"factual_tokens", factual[vi].ids.size()},
                            {"factual_stopped", factual[vi].stopped},
                            {"factual_answer", factual[vi].text},
                            {"long_tokens", longgen[vi].ids.size()},
                            {"long_degenerate", longgen[vi].degenerate()},
                            {"long_degenerate_by_cache", caused},
                            {"identical_to_unstreamed", identical},
                            {"mean_kl", vi == 0 ? 0.0 : kl[vi - 1]["mean_kl"].get<double>()},
                            {"kl_tokens", ids.size()}};
      rows.push_back(row);
    }
  }
  if (o.json) {
    std::printf("%s\n", rows.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("%s: isolation matrix. needles: %s%% depth; factual: \"three primary colours\" answer (tokens, stopped by itself);\n"
                "long: counting one..sixty in words (tokens, clean or degenerate = an n-gram repeated %d+ times);\n"
                "identical: every output of a streamed configuration equals its unstreamed twin; KL: mean vs f32, teacher-forced.\n\n",
                o.model.c_str(), o.depths.c_str(), kDegenerateRun);
    std::printf("| kv            |   ctx | needles | factual          | long generation        | identical | mean KL    |\n");
    std::printf("|---------------|-------|---------|------------------|------------------------|-----------|------------|\n");
    for (const auto& r : rows) {
      char factual_s[40], long_s[40], kl_s[16];
      std::snprintf(factual_s, sizeof factual_s, "%d tok, %s", r["factual_tokens"].get<int>(), r["factual_stopped"].get<bool>() ? "stops" : "runs on");
      std::snprintf(long_s, sizeof long_s, "%s, %d tok",
                    r["long_degenerate"].get<bool>() ? (r["long_degenerate_by_cache"].get<bool>() ? "DEGENERATE" : "loops (model)") : "clean",
                    r["long_tokens"].get<int>());
      if (r["format"] == "f32") std::snprintf(kl_s, sizeof kl_s, "reference");
      else std::snprintf(kl_s, sizeof kl_s, "%.3e", r["mean_kl"].get<double>());
      std::printf("| %-13s | %5d | %3d/%-3d | %-16s | %-22s | %-9s | %-10s |\n", r["kv"].get<std::string>().c_str(),
                  r["ctx"].get<int>(), r["needles_passed"].get<int>(), r["needles"].get<int>(), factual_s, long_s,
                  r["identical_to_unstreamed"].get<std::string>().c_str(), kl_s);
    }
  }
  if (failed)
    throw Error("kv-matrix: a streamed configuration differs from its unstreamed twin, or a cache format made the output degenerate");
}
}  // namespace

void add_kv_matrix(CLI::App& app) {
  auto o = std::make_shared<MatrixOptions>();
  auto* cmd = app.add_subcommand("kv-matrix", "Isolation matrix: needles, probes, streamed == unstreamed and KL for each KV configuration");
  cmd->add_option("-m,--model", o->model, "GGUF file")->required();
  cmd->add_option("--kv", o->kv, "Comma-separated formats (an f32 reference row always comes first)");
  cmd->add_option("--kv-resident", o->resident, "Also run each format streamed with this many resident cells")->check(CLI::NonNegativeNumber);
  cmd->add_option("--ctx", o->ctxs, "Comma-separated context sizes for the needles and the KL text");
  cmd->add_option("--depths", o->depths, "Needle depths in percent");
  cmd->add_option("-f,--file", o->file, "Text for the needles' haystack and the KL run (default: the project's documentation)");
  cmd->add_option("-n,--max-tokens", o->max_tokens, "Cap on generated tokens per probe")->check(CLI::PositiveNumber);
  cmd->add_option("-t,--threads", o->threads, "Threads")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->callback([o] { run_matrix(*o); });
}

}  // namespace strata::cli
