// IEEE half and bfloat16 conversions (portable, exact; the SIMD files use F16C where present).
#pragma once
#include <cstdint>
#include <cstring>

namespace strata {

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);  // round to nearest even, saturating to inf like hardware

inline float bf16_to_fp32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t fp32_to_bf16(float f);  // round to nearest even, NaN kept quiet

// Table of all 65536 half values, built once: the scalar kernels use it on their hot paths.
const float* fp16_table();
inline float fp16_lut(uint16_t h) { return fp16_table()[h]; }

}  // namespace strata
