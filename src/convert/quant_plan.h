// Which block format each tensor gets when a model is quantized (strata quantize, strata synth).
// A "file type" is what users ask for (Q4_K_M); the plan maps every tensor to a GgmlType.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "quant/formats.h"

namespace strata::convert {

struct FileType {
  std::string name;         // as users type it: "Q4_K_M"
  GgmlType base;            // the format most 2-D tensors get
  uint32_t gguf_file_type;  // value of general.file_type (llama.cpp's numbering)
  // KS, KM: Q4_K_S/Q5_K_S, Q4_K_M/Q5_K_M rules; Q3M, Q3L: Q3_K_M and Q3_K_L's (quant_plan.cpp).
  enum class Mix { Plain, KS, KM, Q3M, Q3L } mix = Mix::Plain;
};

// Every file type `quantize` and `synth` accept, in the order `--help` lists them.
const std::vector<FileType>& file_types();
const FileType& file_type_by_name(const std::string& name);  // throws listing the valid names
std::string file_type_names();                               // "F32, F16, ..."

struct TensorShape {
  std::string name;            // GGUF tensor name, e.g. "blk.3.ffn_down.weight"
  std::vector<int64_t> dims;   // ne[0] first
};

// The format one tensor gets. n_layer is the model's block count; output_tied says the model has
// no output.weight, so token_embd.weight also serves as the output projection.
GgmlType choose_type(const FileType& ft, const TensorShape& t, int n_layer, bool output_tied);

// When `type` cannot hold rows of ne0 elements (block size does not divide it), the format used
// instead, following the usual fallbacks (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, ...).
GgmlType fallback_type(GgmlType type, int64_t ne0);

}  // namespace strata::convert
