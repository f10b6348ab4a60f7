// AVX2 pieces shared by the AVX2 and AVX-512 kernel files: block-code unpacking for the 32-value
// formats, the 256-value formats' sign and scale helpers, and the decode prefetch. Internal linkage on purpose: each file compiles its own copy with its own ISA flags.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/formats.h"

// Full unrolling before scalar replacement keeps per-token accumulator arrays in registers
// (otherwise GCC keeps a stack copy and stores it on every iteration), and turns per-chunk
// shuffle patterns into constants. (Not under AddressSanitizer: instrumenting the unrolled bodies
// made the packed-kernel file take minutes to compile; the arithmetic is the same either way.)
#if defined(__SANITIZE_ADDRESS__)
#define STRATA_UNROLL
#else
#define STRATA_UNROLL _Pragma("GCC unroll 16")
#endif
// Pins a running sum to a register at this point: without it GCC reassociates the unrolled sums
// into trees whose many live products spill to the stack.
#if defined(__AVX512F__)
#define STRATA_KEEP(v) __asm__("" : "+v"(v))  // any of the 32 vector registers
#else
#define STRATA_KEEP(v) __asm__("" : "+x"(v))
#endif

namespace strata {
namespace {

// Rows r[0..8) of 8 floats -> their columns, in place: r[k] = element k of every row.
inline void transpose8x8_ps(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20), r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20), r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20), r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20), r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}
// The same for 32-bit integers.
inline void transpose8x8_epi32(__m256i r[8]) {
  __m256 f[8];
  for (int k = 0; k < 8; ++k) f[k] = _mm256_castsi256_ps(r[k]);
  transpose8x8_ps(f);
  for (int k = 0; k < 8; ++k) r[k] = _mm256_castps_si256(f[k]);
}

// Sum of the 8 lanes: halves, then pairs, then the last two.
inline float hsum(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// Sum of the eight i32 lanes.
inline int hsum_i32(__m256i v) {
  __m128i t = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
  return _mm_cvtsi128_si32(t);
}

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }  // F16C
// Eight fp16 values widened, the load kept apart from the conversion: GCC folds it into
// vcvtph2ps, which Zen 1 runs once per 3 cycles from memory and once per 2 from a register (a
// scratch loop of eight independent conversions); elsewhere the two forms are the same µops.
inline __m256 load_cvtph(const uint16_t* p) {
  __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  __asm__("" : "+x"(h));
  return _mm256_cvtph_ps(h);
}

// Software prefetch of the block kAhead bytes past b, a line at a time (with the next block's
// prefetch, the lines of consecutive blocks are all covered). The packed kernels go 4 KiB ahead
// (at least two blocks): their blocks are read as several interleaved streams, which the
// hardware prefetcher follows poorly (Q6_K matvec ran at half speed without any), and a decode
// step's compute must overlap its loads. Two blocks ahead -> 4 KiB, Matvec/Q4_0 (64 MiB, one
// thread), best of 3, ms: 896 columns 6.4 -> 5.1, 4864 columns 3.9 -> 3.3; in a Q4_0 model's
// generation the Q4_0 kernel's CPU samples fell 15-18 %. The file-layout kernels of the 256-value
// formats go 16 blocks ahead (kCodesPrefetch, below).
template <typename Block, size_t kAhead = (2 * sizeof(Block) > 4096 ? 2 * sizeof(Block) : 4096)>
inline void prefetch_ahead(const Block* b) {
  const char* p = reinterpret_cast<const char*>(b) + kAhead;
  for (size_t off = 0; off < sizeof(Block); off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
}
// The decode kernels of the i-quants, IQ1, Q2_K, Q3_K and TQ in the file layout read weights well
// below the memory's speed, yet waited on it without a prefetch 16 blocks ahead. bench -n 32,
// alternated runs, tg median tok/s, none -> 16 blocks: AVX-512 q3-IQ2_XS 28.3 -> 37.2 (8 blocks
// 33.1, 32 blocks 32.5); STRATA_ISA=avx2 q3-IQ2_XS 21.0 -> 25.4, q3-IQ1_M 19.0 -> 24.2 (Q2_K,
// Q3_K_M, near the memory's speed already: within the noise).
template <typename Block>
inline void prefetch_codes_ahead(const Block* b) {
  prefetch_ahead<Block, 16 * sizeof(Block)>(b);
}

inline void nibbles(const uint8_t* qs, __m128i& lo, __m128i& hi) {
  __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(0x0F);
  lo = _mm_and_si128(q, m);
  hi = _mm_and_si128(_mm_srli_epi16(q, 4), m);
}

inline __m128i bits_to_0x10(uint32_t bits) {
  const __m128i shuf = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const __m128i sel = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
  __m128i v = _mm_shuffle_epi8(_mm_cvtsi32_si128(static_cast<int>(bits & 0xFFFF)), shuf);
  v = _mm_cmpeq_epi8(_mm_and_si128(v, sel), sel);
  return _mm_and_si128(v, _mm_set1_epi8(0x10));
}

inline __m256i nibbles32(const uint8_t* qs) {
  __m128i lo, hi;
  nibbles(qs, lo, hi);
  return _mm256_set_m128i(hi, lo);
}
// IQ2_XXS, IQ2_XS and IQ3_XXS store 7 sign bits per group; the 8th makes the count of minus
// signs even (iq::Tables::ksigns). Bytes of 7 bits in -> the same bytes with their parity bit.
inline __m256i with_parity(__m256i s7) {
  // the parity of each nibble value, already at bit 7
  const __m256i parity4 = _mm256_setr_epi8(0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0,
                                           0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i p = _mm256_xor_si256(_mm256_shuffle_epi8(parity4, _mm256_and_si256(s7, m4)),
                                     _mm256_shuffle_epi8(parity4, _mm256_and_si256(_mm256_srli_epi16(s7, 4), m4)));
  return _mm256_or_si256(s7, p);
}
// Eight 32-bit words, each with four 7-bit sign fields at bits 0, 7, 14 and 21 (IQ2_XXS, IQ3_XXS)
// -> their 32 sign bytes in order. Fields 2 and 3 move to bits 16-29 (a 16-bit blend), then
// fields 1 and 3 up one bit into bytes 1 and 3: six operations, not ten.
inline __m256i sign_fields4(__m256i w) {
  const __m256i t = _mm256_blend_epi16(w, _mm256_slli_epi32(w, 2), 0xAA);
  const __m256i f = _mm256_or_si256(_mm256_and_si256(t, _mm256_set1_epi16(0x007F)),
                                    _mm256_and_si256(_mm256_slli_epi16(t, 1), _mm256_set1_epi16(0x7F00)));
  return with_parity(f);
}
inline __m256i odd_scale(__m256i s) { return _mm256_add_epi16(_mm256_slli_epi16(s, 1), _mm256_set1_epi16(1)); }  // 2s + 1
// 2s + 1 for eight s in 32-bit lanes.
inline __m256i odd32(__m256i s) { return _mm256_or_si256(_mm256_slli_epi32(s, 1), _mm256_set1_epi32(1)); }
// Eight 16-bit values (one per 32-bit lane) in both halves of their lane.
inline __m256i pairs16(__m256i v) { return _mm256_or_si256(v, _mm256_slli_epi32(v, 16)); }
// IQ1_M's sixteen sub-scales in 16-bit lanes, each at bits 9-11 (other bits: the word's rest).
// Sub-scale g is bits 3k..3k+2 (k = g % 4) of scale word g / 4: lane g takes word g / 4 and
// multiplies it by 2^(9 - 3k).
inline __m256i iq1m_scales_at_bit9(const BlockIQ1_M& b) {
  uint64_t w;
  std::memcpy(&w, b.scales, 8);
  const __m256i words = _mm256_shuffle_epi8(_mm256_set1_epi64x(static_cast<long long>(w)),
                                            _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3,
                                                             4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7));
  return _mm256_mullo_epi16(words, _mm256_setr_epi16(512, 64, 8, 1, 512, 64, 8, 1, 512, 64, 8, 1, 512, 64, 8, 1));
}
// IQ1_M's sixteen sub-scales as 2s + 1 in 16-bit lanes.
inline __m256i iq1m_odd_scales(const BlockIQ1_M& b) {
  return odd_scale(_mm256_srli_epi16(_mm256_and_si256(iq1m_scales_at_bit9(b), _mm256_set1_epi16(0x0E00)), 9));
}
// Sixteen 4-bit sub-scales in 8 bytes, low nibble first.
inline __m256i nibbles16(const uint8_t* p8) {
  uint64_t v;
  std::memcpy(&v, p8, 8);
  const __m128i b = _mm_cvtsi64_si128(static_cast<long long>(v));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(_mm_and_si128(b, m), _mm_and_si128(_mm_srli_epi16(b, 4), m)));
}
inline __m256i load32(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
// Four bytes in every 32-bit lane, one broadcast load: four activation bytes (the 8-row packed
// kernels' operand), or two adjacent 16-bit sums (madd against per-row pairs).
inline __m256i bcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
// Sixteen activation bytes in both 128-bit lanes: spread_word(v, k) is then bcast4(p + 4k), an
// in-lane shuffle where bcast4 is a load.
inline __m256i bcast16(const int8_t* p) { return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
// Word k (0..3) of each 128-bit lane in all four of its places, bcast4(p + 4k) from bcast16(p).
// A switch, since the shuffle takes an immediate and k is a loop index: the unrolled kernels
// fold it to one shuffle; a build that does not unroll (the sanitizer build's -O1) branches.
inline __m256i spread_word(__m256i v, int k) {
  switch (k) {
    case 0: return _mm256_shuffle_epi32(v, 0x00);
    case 1: return _mm256_shuffle_epi32(v, 0x55);
    case 2: return _mm256_shuffle_epi32(v, 0xAA);
    default: return _mm256_shuffle_epi32(v, 0xFF);
  }
}
// A Q8_K block's 16 sums of 16 codes as the madd operands of its four 64-value quarters: 32-bit
// lane p (0, 1) and 4 + p (2, 3) of bsum_pairs holds (bs[4p] + bs[4p+1], bs[4p+2] + bs[4p+3]) as
// two 16-bit values (each sum is at most 2 * 16 * 128 in magnitude, so the saturating pack keeps
// it whole). Four vector steps where scalar code would add each pair.
inline __m256i bsum_pairs(const int16_t* bs) {
  const __m256i s = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bs)), _mm256_set1_epi16(1));
  return _mm256_packs_epi32(s, s);
}
inline __m256i bsum_pair(__m256i pairs, int p) { return _mm256_permutevar8x32_epi32(pairs, _mm256_set1_epi32((p & 1) + 4 * (p >> 1))); }

inline __m256i high_bits32(const uint8_t* qh4) {
  uint32_t qh;
  std::memcpy(&qh, qh4, 4);
  return _mm256_set_m128i(bits_to_0x10(qh >> 16), bits_to_0x10(qh));
}

// Signed codes of one 32-value block, as bytes.
struct UnpackQ8_0 {
  static __m256i codes(const BlockQ8_0& b) { return load32(b.qs); }
};
struct UnpackQ4_0 {
  static __m256i codes(const BlockQ4_0& b) { return _mm256_sub_epi8(nibbles32(b.qs), _mm256_set1_epi8(8)); }
};
struct UnpackQ5_0 {
  static __m256i codes(const BlockQ5_0& b) {
    return _mm256_sub_epi8(_mm256_or_si256(nibbles32(b.qs), high_bits32(b.qh)), _mm256_set1_epi8(16));
  }
};
struct UnpackIQ4_NL {
  static __m256i codes(const BlockIQ4_NL& b) {
    const __m128i t128 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
    return _mm256_shuffle_epi8(_mm256_set_m128i(t128, t128), nibbles32(b.qs));
  }
};

}  // namespace
}  // namespace strata
