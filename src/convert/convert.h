// Model conversion tools: requantize a GGUF (strata quantize) and write random-weight models of
// real models' shapes (strata synth). Both use the tensor plan of quant_plan.h.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "convert/quant_plan.h"

namespace strata {
class ThreadPool;
}

namespace strata::convert {

// Encodes a tensor of `rows` rows of ne0 elements into `type`; row_source(r, out) fills row r as
// floats. Rows are independent, so the result does not depend on the thread count.
// Rows go through quantize_row_best; importance: optional, one value per column, for the formats
// that use it.
std::vector<uint8_t> encode_rows(ThreadPool& pool, GgmlType type, int64_t ne0, int64_t rows,
                                 const std::function<void(int64_t, float*)>& row_source,
                                 const float* importance = nullptr);

// What a conversion wrote: tensors and bytes per format.
struct ConvertReport {
  std::map<std::string, std::pair<int, uint64_t>> by_type;  // format -> (tensors, bytes)
  uint64_t n_params = 0, n_bytes = 0;
  int with_importance = 0, without_importance = 0;  // importance-weighted tensors, and those the imatrix lacked
  void add(GgmlType type, int64_t n_elements, uint64_t bytes);
  void print(std::FILE* out) const;  // one line per format plus the total and bits per weight
};

struct Imatrix;

// strata quantize: every tensor of `in` re-encoded as the plan for `ft` says (copied unchanged
// where the format does not change); metadata copied, general.file_type set. With an importance
// matrix, the formats that use one (uses_importance) weight their search by it.
ConvertReport quantize_model(const std::string& in_path, const std::string& out_path,
                             const FileType& ft, int n_threads, std::FILE* log, const Imatrix* imatrix = nullptr);

// strata synth
struct SynthOptions {
  std::string arch;        // llama, qwen2, qwen3
  std::string preset;      // e.g. 0.5b; "tiny" for tests
  std::string type = "F16";
  std::string vocab_from;  // GGUF whose tokenizer.* metadata is copied
  std::string chat_template;  // replaces the copied tokenizer.chat_template when not empty
  uint64_t seed = 1;
  int layers = 0;          // > 0 overrides the preset's block count
  int n_threads = 0;
};
struct ArchPreset {
  std::string arch, preset, like;  // like: the real model whose shapes these are
  int n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
  float rope_base, rms_eps;
  int n_ctx_train;
  bool qkv_bias, qk_norm;
};
const std::vector<ArchPreset>& synth_presets();
ConvertReport synth_model(const SynthOptions& o, const std::string& out_path, std::FILE* log);

}  // namespace strata::convert
