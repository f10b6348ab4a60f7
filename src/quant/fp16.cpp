#include "quant/fp16.h"

#include <vector>

namespace strata {

float fp16_to_fp32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t man = h & 0x3FF;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { ++e; man <<= 1; } while ((man & 0x400) == 0);
      u = sign | ((127 - 15 - e) << 23) | ((man & 0x3FF) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7F800000 | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t fp32_to_fp16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000;
  uint32_t abs = u & 0x7FFFFFFF;
  if (abs > 0x7F800000) return static_cast<uint16_t>(sign | 0x7E00);  // NaN
  if (abs >= 0x477FF000) return static_cast<uint16_t>(sign | 0x7C00);  // rounds to >= 65520: inf
  if (abs < 0x38800000) {  // below the smallest normal half: subnormal or zero
    if (abs < 0x33000000) return static_cast<uint16_t>(sign);  // < 2^-25 rounds to 0
    uint32_t e = abs >> 23;
    uint32_t m = (abs & 0x7FFFFF) | 0x800000;
    uint32_t shift = 126 - e;  // value = m * 2^(e-150); a half subnormal counts units of 2^-24
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t e = (abs >> 23) - 127 + 15;
  uint32_t m = abs & 0x7FFFFF;
  uint32_t h = (e << 10) | (m >> 13);
  uint32_t rem = m & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;  // may carry into the exponent: correct
  return static_cast<uint16_t>(sign | h);
}

uint16_t fp32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

const float* fp16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t i = 0; i < 65536; ++i) t[i] = fp16_to_fp32(static_cast<uint16_t>(i));
    return t;
  }();
  return table.data();
}

}  // namespace strata
