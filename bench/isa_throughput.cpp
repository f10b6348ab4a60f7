// Instruction throughput on this CPU (AVX2): eight independent chains of one operation, or of the
// short sequences the int8 kernels are built from, so items/s is operations (or sequences) per
// second. They show which execution ports bound a kernel: e.g. whether vpsignb competes with the
// multiplies (it does on Zen 3), which sets the ceiling of the signed Q8_0 product, or that a
// 256-bit shift costs as much as a maddubs (Zen 1), so code building avoids shifts.
#include "isa_throughput.h"

#include <immintrin.h>

#include <cstdint>

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
// The steps that build codes from packed bits: shifts, shuffles and masks.
constexpr auto kShift = [](__m256i x, __m256i) { return _mm256_srli_epi16(x, 2); };
constexpr auto kShuffle = [](__m256i x, __m256i y) { return _mm256_shuffle_epi8(y, x); };
constexpr auto kAnd = [](__m256i x, __m256i y) { return _mm256_and_si256(x, y); };
// maddubs then madd in one chain: whether the two share a pipe (their times add up if they do).
constexpr auto kMaddubsMadd = [](__m256i x, __m256i y) { return _mm256_madd_epi16(_mm256_maddubs_epi16(y, x), y); };
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

// f16 cells as the attention kernels read them (attn_scores_f16, attn_values_f16), from a buffer
// that stays in L1: eight conversions of 8 values a step (items: conversions), and a step of two
// query rows against four 8-value vectors, each converted once and feeding a multiply and a
// separate add per row (items: multiply-add pairs, eight a step).
alignas(64) uint16_t g_cells[2048];
void f16_conversions(long steps) {
  __m256 a[8];
  for (long n = 0; n < steps; ++n) {
    const uint16_t* p = g_cells + (n & 31) * 64;
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) a[i] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8 * i)));
    __asm__ volatile("" : "+x"(a[0]), "+x"(a[1]), "+x"(a[2]), "+x"(a[3]), "+x"(a[4]), "+x"(a[5]), "+x"(a[6]), "+x"(a[7]));
  }
}
void attention_step(long steps) {
  __m256 a[8];
  for (auto& x : a) x = _mm256_setzero_ps();
  __m256 q0 = _mm256_set1_ps(0.5f), q1 = _mm256_set1_ps(0.25f);
  __asm__ volatile("" : "+x"(q0), "+x"(q1));
  for (long n = 0; n < steps; ++n) {
    const uint16_t* p = g_cells + (n & 63) * 32;
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256 k = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8 * c)));
      a[2 * c] = _mm256_add_ps(a[2 * c], _mm256_mul_ps(q0, k));
      a[2 * c + 1] = _mm256_add_ps(a[2 * c + 1], _mm256_mul_ps(q1, k));
    }
    __asm__ volatile("" : "+x"(a[0]), "+x"(a[1]), "+x"(a[2]), "+x"(a[3]), "+x"(a[4]), "+x"(a[5]), "+x"(a[6]), "+x"(a[7]));
  }
}

const IsaChain kChains[] = {
    {"Isa/vpmaddubsw", chains<decltype(kMaddubs)>},
    {"Isa/vpmaddwd", chains<decltype(kMaddwd)>},
    {"Isa/vpsignb", chains<decltype(kSign)>},
    {"Isa/vpsrlw", chains<decltype(kShift)>},
    {"Isa/vpshufb", chains<decltype(kShuffle)>},
    {"Isa/vpand", chains<decltype(kAnd)>},
    {"Isa/vpmaddubsw_vpmaddwd", chains<decltype(kMaddubsMadd)>},
    {"Isa/vfmadd231ps", chains<decltype(kFma)>},
    {"Isa/signed_chunk", chains<decltype(kSignedChunk)>},
    {"Isa/unsigned_chunk", chains<decltype(kUnsignedChunk)>},
    {"Isa/vcvtph2ps_f16_cells", f16_conversions},
    {"Isa/attention_step", attention_step},
};

}  // namespace

const IsaChain* isa_chains(int* n) {
  *n = static_cast<int>(sizeof kChains / sizeof kChains[0]);
  return kChains;
}

}  // namespace strata
