// Shared pieces of the KV quality tools (kv-compare, probe, needle).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kv/formats.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace strata::cli {

// One KV configuration under test: a format, and a fast-tier size (0 = unstreamed).
struct KvVariant {
  kv::Format format = kv::Format::F16;
  int resident = 0;
  std::string label() const;
};

// "--kv int8,q4_0" plus "--kv-resident N" -> each format unstreamed, then (if N > 0) streamed.
std::vector<KvVariant> kv_variants(const std::string& formats, int resident);

// Longest run of one n-gram (n = 1..8 tokens) repeated back to back, in repetitions.
int longest_repeat_run(const std::vector<int32_t>& ids);
// len(text) / len(zlib(text)): high for looping text.
double compression_ratio(const std::string& text);

// ---- The measurements behind kv-compare, probe and needle, shared with kv-matrix ----

// Teacher-forced run of ids with an f32 cache and each variant: one JSON row per variant
// (kv, format, resident, mean_kl, p99_kl, top1_agreement, perplexity, perplexity_ratio,
// kv_bytes_per_token, identical_to_unstreamed for streamed ones). ref_ppl: the f32 perplexity.
nlohmann::json kl_rows(const model::Model& m, const std::vector<int32_t>& ids, const std::vector<KvVariant>& variants,
                       int threads, int chunk, double& ref_ppl);

// A run of one n-gram repeated this many times back to back counts as degenerate.
constexpr int kDegenerateRun = 8;

struct ProbeOutcome {
  std::vector<int32_t> ids;
  std::string text;
  bool stopped = false;  // ended by itself (end of generation, or the end of a short answer's line)
  int run = 0;           // longest_repeat_run
  double ratio = 1;      // compression_ratio
  bool degenerate() const { return run >= kDegenerateRun; }
};
// Names of the probes, in order: count_words, count_lines, primary_colours, json_list.
std::vector<std::string> probe_names();
// Greedy run of one probe (chat prompt when the model has a recognised chat template).
ProbeOutcome run_probe(const model::Model& m, const tok::Tokenizer& tk, const std::string& name, const KvVariant& v,
                       int ctx, int threads, int max_tokens);

// A needle prompt: the haystack repeated to fill ctx with "The secret code of the <colour> door
// is NNNNN." at depth percent; index picks the colour and code.
struct NeedleCase {
  std::vector<int32_t> prompt;
  std::string code;
};
NeedleCase needle_case(const tok::Tokenizer& tk, const std::string& haystack, int ctx, int depth, int index);
// Greedy answer (8 tokens) under a variant; pass = the code appears in it.
std::vector<int32_t> needle_answer(const model::Model& m, const tok::Tokenizer& tk, const NeedleCase& c, const KvVariant& v,
                                   int ctx, int threads, std::string& answer);
extern const char* const kDefaultHaystack;

}  // namespace strata::cli
