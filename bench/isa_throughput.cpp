// Instruction throughput on this CPU (AVX2): eight independent chains of one operation, or of the
// short sequences the int8 kernels are built from, so items/s is operations (or sequences) per
// second. They show which execution ports bound a kernel: e.g. whether vpsignb competes with the
// multiplies (it does on Zen 3), which sets the ceiling of the signed Q8_0 product.
#include "isa_throughput.h"

#include <immintrin.h>

namespace strata {

namespace {

// Op: a captureless lambda's type, so that each loop has the operation inlined.
template <typename Op>
void chains(long steps) {
  __m256i a[8];
  for (int i = 0; i < 8; ++i) a[i] = _mm256_set1_epi8(static_cast<char>(i + 1));
  const __m256i b = _mm256_set1_epi8(3);
  for (long n = 0; n < steps; ++n) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) a[i] = Op{}(a[i], b);
    // Keep the chains in registers and their results live.
    __asm__ volatile("" : "+x"(a[0]), "+x"(a[1]), "+x"(a[2]), "+x"(a[3]), "+x"(a[4]), "+x"(a[5]), "+x"(a[6]), "+x"(a[7]));
  }
}

constexpr auto kMaddubs = [](__m256i x, __m256i y) { return _mm256_maddubs_epi16(x, y); };
constexpr auto kMaddwd = [](__m256i x, __m256i y) { return _mm256_madd_epi16(x, y); };
constexpr auto kSign = [](__m256i x, __m256i y) { return _mm256_sign_epi8(x, y); };
constexpr auto kFma = [](__m256i x, __m256i y) {
  const __m256 fy = _mm256_castsi256_ps(y);
  return _mm256_castps_si256(_mm256_fmadd_ps(_mm256_castsi256_ps(x), fy, fy));
};
// The 32 products of a signed (Q8_0) weight chunk: sign, maddubs, widening madd, add.
constexpr auto kSignedChunk = [](__m256i x, __m256i y) {
  return _mm256_add_epi32(x, _mm256_madd_epi16(_mm256_maddubs_epi16(y, _mm256_sign_epi8(y, x)), y));
};
// The same for unsigned 4-bit codes (Q4_0), summed in 16 bits: maddubs and add.
constexpr auto kUnsignedChunk = [](__m256i x, __m256i y) { return _mm256_add_epi16(x, _mm256_maddubs_epi16(y, x)); };

const IsaChain kChains[] = {
    {"Isa/vpmaddubsw", chains<decltype(kMaddubs)>},
    {"Isa/vpmaddwd", chains<decltype(kMaddwd)>},
    {"Isa/vpsignb", chains<decltype(kSign)>},
    {"Isa/vfmadd231ps", chains<decltype(kFma)>},
    {"Isa/signed_chunk", chains<decltype(kSignedChunk)>},
    {"Isa/unsigned_chunk", chains<decltype(kUnsignedChunk)>},
};

}  // namespace

const IsaChain* isa_chains(int* n) {
  *n = static_cast<int>(sizeof kChains / sizeof kChains[0]);
  return kChains;
}

}  // namespace strata
