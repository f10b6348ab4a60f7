#include "kv/formats.h"

#include <cmath>
#include <cstring>

#include "common.h"
#include "quant/fp16.h"
#include "quant/kernels.h"
#include "quant/quant.h"

namespace strata::kv {

FormatSpec format_spec(Format f) {
  switch (f) {
    case Format::F32: return {Codec::F32, Codec::F32, false, false};
    case Format::F16: return {Codec::F16, Codec::F16, false, false};
    case Format::INT8: return {Codec::Q8, Codec::Q8, false, false};
    case Format::Q4_0: return {Codec::Q4, Codec::Q4, true, true};
    case Format::K8V4: return {Codec::Q8, Codec::Q4, false, true};
  }
  return {Codec::F16, Codec::F16, false, false};
}

const char* format_name(Format f) {
  switch (f) {
    case Format::F32: return "f32";
    case Format::F16: return "f16";
    case Format::INT8: return "int8";
    case Format::Q4_0: return "q4_0";
    case Format::K8V4: return "k8v4";
  }
  return "?";
}

Format parse_format(const std::string& s) {
  for (Format f : {Format::F32, Format::F16, Format::INT8, Format::Q4_0, Format::K8V4})
    if (s == format_name(f)) return f;
  throw Error("unknown KV format '" + s + "' (accepted: f16, f32, int8, q4_0, k8v4)");
}

std::string format_unsupported_reason(Format f, int dk, int dv) {
  FormatSpec s = format_spec(f);
  auto check = [&](Codec c, bool rot, int d, const char* what) -> std::string {
    if ((c == Codec::Q8 || c == Codec::Q4) && d % 32 != 0)
      return std::string("KV format ") + format_name(f) + " needs " + what + " head_dim to be a multiple of 32 (this model has " +
             std::to_string(d) + ")";
    if (rot && (d & (d - 1)) != 0)
      return std::string("KV format ") + format_name(f) + " rotates " + what + " with a Walsh-Hadamard transform, which needs a power-of-two head_dim (this model has " +
             std::to_string(d) + ")";
    return "";
  };
  std::string r = check(s.k, s.rotate_k, dk, "K");
  return r.empty() ? check(s.v, s.rotate_v, dv, "V") : r;
}

size_t codec_bytes(Codec c, int n) {
  switch (c) {
    case Codec::F32: return static_cast<size_t>(n) * 4;
    case Codec::F16: return static_cast<size_t>(n) * 2;
    case Codec::Q8: return row_bytes(GgmlType::Q8_0, n);
    case Codec::Q4: return row_bytes(GgmlType::Q4_0, n);
  }
  return 0;
}

static GgmlType codec_type(Codec c) {
  switch (c) {
    case Codec::F32: return GgmlType::F32;
    case Codec::F16: return GgmlType::F16;
    case Codec::Q8: return GgmlType::Q8_0;
    case Codec::Q4: return GgmlType::Q4_0;
  }
  return GgmlType::F32;
}

// The table's quantizer where it has one (the same bytes as quantize_row, tests/test_kernels).
void encode(Codec c, const float* x, uint8_t* dst, int n) {
  const GgmlType t = codec_type(c);
  if (const QuantizeFn q = kernels().quantize_act[static_cast<int>(t)]) q(x, dst, n);
  else quantize_row(t, x, dst, n);
}

void decode(Codec c, const uint8_t* src, float* x, int n) { decoder(c)(src, x, n); }

Decoder decoder(Codec c) { return kernels().dequant_for(codec_type(c)); }

void hadamard(float* x, int n) {
  for (int len = 1; len < n; len <<= 1)
    for (int i = 0; i < n; i += len << 1)
      for (int j = i; j < i + len; ++j) {
        float a = x[j], b = x[j + len];
        x[j] = a + b;
        x[j + len] = a - b;
      }
  const float s = 1.f / std::sqrt(static_cast<float>(n));
  for (int i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace strata::kv
