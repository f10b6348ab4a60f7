// KV cell formats. A cell of one layer holds, per KV head, one K vector and one V vector of
// head_dim values, each encoded with a codec:
//   f32, f16: plain;  q8: blocks of 32 int8 codes with one fp16 scale (absmax/127, codes ±127);
//   q4: ggml Q4_0 blocks (32 values, fp16 scale d = max/-8, 4-bit codes).
// Rotated codecs store H·x, with H the orthonormal Walsh–Hadamard transform over head_dim: the
// rotation spreads outliers across the block before 4-bit rounding. Q is rotated the same way
// (scores unchanged) and the attention output is rotated back.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace strata::kv {

enum class Format { F32, F16, INT8, Q4_0, K8V4 };
enum class Codec { F32, F16, Q8, Q4 };

struct FormatSpec {
  Codec k, v;
  bool rotate_k, rotate_v;
};

FormatSpec format_spec(Format f);
const char* format_name(Format f);
Format parse_format(const std::string& s);  // throws with the accepted names
// Empty when the format can hold heads of these sizes, else a message saying why not.
std::string format_unsupported_reason(Format f, int head_dim_k, int head_dim_v);

size_t codec_bytes(Codec c, int n);  // bytes of one encoded vector of n values
void encode(Codec c, const float* x, uint8_t* dst, int n);
void decode(Codec c, const uint8_t* src, float* x, int n);
// decode's kernel for a codec, to look up once for many vectors: decoder(c)(src, x, n).
using Decoder = void (*)(const void* src, float* x, int64_t n);
Decoder decoder(Codec c);

// In-place orthonormal Walsh–Hadamard transform (n a power of two); its own inverse.
void hadamard(float* x, int n);

}  // namespace strata::kv
