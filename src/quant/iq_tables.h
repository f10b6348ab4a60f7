// Lookup tables of the i-quant formats: the lattice grids (data in iq_grids.cpp) expanded to
// bytes, and the sign tables, which are derived.
#pragma once
#include <cstdint>

namespace strata::iq {

extern const uint16_t kIq2xxsGridPacked[256];
extern const uint16_t kIq2xsGridPacked[512];
extern const uint16_t kIq2sGridPacked[1024];
extern const uint16_t kIq3xxsGridPacked[256];
extern const uint16_t kIq3sGridPacked[512];
extern const uint16_t kIq1sGridPacked[2048];

// The grid levels: a packed grid entry's 2-bit (IQ2) or 3-bit (IQ3) codes index these.
inline constexpr int8_t kIq2Levels[3] = {8, 25, 43};
inline constexpr int8_t kIq3xxsLevels[8] = {4, 12, 20, 28, 36, 44, 52, 62};
inline constexpr int8_t kIq3sLevels[8] = {1, 3, 5, 7, 9, 11, 13, 15};

struct Tables {
  // Grid entries as little-endian bytes: value j of entry e is byte j.
  uint64_t iq2xxs[256], iq2xs[512], iq2s[1024];  // 8 unsigned values of {8, 25, 43}
  uint32_t iq3xxs[256], iq3s[512];               // 4 unsigned values
  uint64_t iq1s[2048];                           // 8 signed values of {-8, 0, 8}: 8 times the grid,
                                                 // the integer scale of IQ1 codes (8 * grid +- 1)
  // IQ1 codes as unsigned bytes, 8 * grid + delta + 10: entry e has delta = +1, entry 2048 + e
  // delta = -1 (the AVX-512 kernels put delta's sign in bit 11 of the index).
  uint64_t iq1s_code[4096];
  // The 7 stored sign bits of a group of 8 plus an 8th that makes the count of minus signs even.
  uint8_t ksigns[128];
};
const Tables& tables();

}  // namespace strata::iq
