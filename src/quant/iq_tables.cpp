#include "quant/iq_tables.h"

#include <bit>

namespace strata::iq {

namespace {
template <int N>
uint64_t expand(uint16_t packed, int shift, int mask, const int8_t (&levels)[N]) {
  uint64_t v = 0;
  for (int j = 0; j < 16 / shift && j < 8; ++j) {
    const int8_t level = levels[(packed >> (j * shift)) & mask];
    v |= static_cast<uint64_t>(static_cast<uint8_t>(level)) << (8 * j);
  }
  return v;
}
}  // namespace

const Tables& tables() {
  static const Tables t = [] {
    Tables r{};
    const int8_t l1[3] = {-8, 0, 8};
    for (int e = 0; e < 256; ++e) r.iq2xxs[e] = expand(kIq2xxsGridPacked[e], 2, 3, kIq2Levels);
    for (int e = 0; e < 512; ++e) r.iq2xs[e] = expand(kIq2xsGridPacked[e], 2, 3, kIq2Levels);
    for (int e = 0; e < 1024; ++e) r.iq2s[e] = expand(kIq2sGridPacked[e], 2, 3, kIq2Levels);
    for (int e = 0; e < 256; ++e) r.iq3xxs[e] = static_cast<uint32_t>(expand(kIq3xxsGridPacked[e], 4, 7, kIq3xxsLevels));
    for (int e = 0; e < 512; ++e) r.iq3s[e] = static_cast<uint32_t>(expand(kIq3sGridPacked[e], 4, 7, kIq3sLevels));
    for (int e = 0; e < 2048; ++e) r.iq1s[e] = expand(kIq1sGridPacked[e], 2, 3, l1);
    const int8_t code_up[3] = {3, 11, 19}, code_down[3] = {1, 9, 17};  // 8 * grid + 10 + 1, - 1
    for (int e = 0; e < 2048; ++e) {
      r.iq1s_code[e] = expand(kIq1sGridPacked[e], 2, 3, code_up);
      r.iq1s_code[2048 + e] = expand(kIq1sGridPacked[e], 2, 3, code_down);
    }
    for (int i = 0; i < 128; ++i) r.ksigns[i] = static_cast<uint8_t>(i | ((std::popcount(static_cast<unsigned>(i)) & 1) << 7));
    return r;
  }();
  return t;
}

}  // namespace strata::iq
