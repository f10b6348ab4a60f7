#include "convert/quant_plan.h"

#include "common.h"

namespace strata::convert {

const std::vector<FileType>& file_types() {
  using M = FileType::Mix;
  static const std::vector<FileType> kTypes = {
      {"F32", GgmlType::F32, 0, M::Plain},      {"F16", GgmlType::F16, 1, M::Plain},
      {"BF16", GgmlType::BF16, 32, M::Plain},   {"Q4_0", GgmlType::Q4_0, 2, M::Plain},
      {"Q4_1", GgmlType::Q4_1, 3, M::Plain},    {"Q5_0", GgmlType::Q5_0, 8, M::Plain},
      {"Q5_1", GgmlType::Q5_1, 9, M::Plain},    {"Q8_0", GgmlType::Q8_0, 7, M::Plain},
      {"IQ4_NL", GgmlType::IQ4_NL, 25, M::Plain}, {"Q2_K", GgmlType::Q2_K, 10, M::Plain},
      {"Q3_K_S", GgmlType::Q3_K, 11, M::Plain}, {"Q3_K_M", GgmlType::Q3_K, 12, M::Q3M},
      {"Q3_K_L", GgmlType::Q3_K, 13, M::Q3L},   {"Q4_K_S", GgmlType::Q4_K, 14, M::KS},
      {"Q4_K_M", GgmlType::Q4_K, 15, M::KM},    {"Q5_K_S", GgmlType::Q5_K, 16, M::Plain},
      {"Q5_K_M", GgmlType::Q5_K, 17, M::KM},    {"Q6_K", GgmlType::Q6_K, 18, M::Plain},
      {"IQ4_XS", GgmlType::IQ4_XS, 30, M::Plain}, {"TQ1_0", GgmlType::TQ1_0, 36, M::Plain},
      {"TQ2_0", GgmlType::TQ2_0, 37, M::Plain},
      // Lattice i-quants (grid-search quantizer; synth draws random codes in them).
      {"IQ2_XXS", GgmlType::IQ2_XXS, 19, M::Plain}, {"IQ2_XS", GgmlType::IQ2_XS, 20, M::Plain},
      {"IQ2_S", GgmlType::IQ2_S, 28, M::Plain},   {"IQ3_XXS", GgmlType::IQ3_XXS, 23, M::Plain},
      {"IQ3_S", GgmlType::IQ3_S, 26, M::Plain},   {"IQ1_S", GgmlType::IQ1_S, 24, M::Plain},
      {"IQ1_M", GgmlType::IQ1_M, 31, M::Plain},
  };
  return kTypes;
}

std::string file_type_names() {
  std::string s;
  for (auto& t : file_types()) s += (s.empty() ? "" : ", ") + t.name;
  return s;
}

const FileType& file_type_by_name(const std::string& name) {
  for (auto& t : file_types())
    if (t.name == name) return t;
  throw Error("unknown type '" + name + "' (valid: " + file_type_names() + ")");
}

GgmlType fallback_type(GgmlType type, int64_t ne0) {
  auto fits = [&](GgmlType t) { return ne0 % type_info(t).block_size == 0; };
  if (fits(type)) return type;
  switch (type) {
    case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::IQ2_XXS: case GgmlType::IQ2_XS:
    case GgmlType::IQ2_S: case GgmlType::IQ3_XXS: case GgmlType::IQ3_S: case GgmlType::IQ1_S:
    case GgmlType::IQ1_M: case GgmlType::IQ4_XS: case GgmlType::TQ1_0: case GgmlType::TQ2_0:
      type = GgmlType::IQ4_NL;
      break;
    case GgmlType::Q4_K: type = GgmlType::Q5_0; break;
    case GgmlType::Q5_K: type = GgmlType::Q5_1; break;
    case GgmlType::Q6_K: type = GgmlType::Q8_0; break;
    default: break;
  }
  // Rows that fit no 32-element block stay in half precision.
  return fits(type) ? type : GgmlType::F16;
}

namespace {
// Layer index from "blk.N.", or -1.
int layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  size_t dot = name.find('.', 4);
  if (dot == std::string::npos) return -1;
  try {
    return std::stoi(name.substr(4, dot - 4));
  } catch (const std::exception&) {
    return -1;
  }
}
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
// The layers that get more bits in the _M mixes: the first and last eighth, and every third
// layer in between — the layers whose errors hurt perplexity most.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }
bool is_float(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }
}  // namespace

GgmlType choose_type(const FileType& ft, const TensorShape& t, int n_layer, bool output_tied) {
  // Norm weights and biases are tiny and sensitive: always F32.
  if (t.dims.size() < 2) return GgmlType::F32;
  GgmlType type = ft.base;
  const bool is_output = t.name == "output.weight" || (output_tied && t.name == "token_embd.weight");
  const int il = layer_of(t.name);
  if (is_output) {
    if (!is_float(ft.base) && ft.base != GgmlType::Q8_0) type = GgmlType::Q6_K;
  } else if (il >= 0 && ft.mix != FileType::Mix::Plain) {
    const bool v = ends_with(t.name, "attn_v.weight"), down = ends_with(t.name, "ffn_down.weight");
    const bool out = ends_with(t.name, "attn_output.weight"), qkv = ends_with(t.name, "attn_qkv.weight");
    switch (ft.mix) {
      case FileType::Mix::KM:
        if ((v || down) && use_more_bits(il, n_layer)) type = GgmlType::Q6_K;
        break;
      case FileType::Mix::KS:
        if ((v && il < 4) || (down && il < n_layer / 8)) type = GgmlType::Q5_K;
        break;
      case FileType::Mix::Q3M:  // Q3_K with Q4_K/Q5_K where errors cost most
        if (v) type = il < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
        else if (down) type = il < n_layer / 16 ? GgmlType::Q5_K : GgmlType::Q4_K;
        else if (out || qkv) type = GgmlType::Q4_K;
        break;
      case FileType::Mix::Q3L:
        if (v || down || out) type = GgmlType::Q5_K;
        else if (qkv) type = GgmlType::Q4_K;
        break;
      case FileType::Mix::Plain: break;
    }
  }
  return fallback_type(type, t.dims[0]);
}

}  // namespace strata::convert
