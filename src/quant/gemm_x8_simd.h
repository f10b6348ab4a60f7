// Kernels on the 8-row packed layouts (gemm_x8.h), compiled once per ISA: gemm_x8_avx2.cpp
// builds them for AVX2, gemm_x8_avx512.cpp for AVX-512 VNNI (STRATA_X8_VNNI below). Internal
// linkage on purpose, as in simd_avx2_blocks.h: each file gets its own copy with its own flags.
//
// Lane r of every vector is row r of the group: four codes of each row sit side by side, so a
// byte dot product against four broadcast activation bytes gives each row's partial dot product
// in its own lane. AVX2 has maddubs (pairs into 16 bits) then madd (pairs into 32 bits); VNNI's
// vpdpbusd does both steps and the accumulation in one instruction, without 16-bit partial sums.
// Integer sums are exact either way (the 16-bit partial sums are bounded below 32767 as noted per
// format), so both builds give the same integers, and the float steps are those of the scalar
// reference, in the same order: every ISA matches the scalar kernels bit for bit.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "quant/gemm_x8.h"
#include "quant/kernels.h"
#include "quant/simd_avx2_blocks.h"


#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define STRATA_X8_VNNI 1
#else
#define STRATA_X8_VNNI 0
#endif
#if defined(__AVX512VBMI__) && defined(__AVX512VL__)
#define STRATA_X8_VBMI 1
#else
#define STRATA_X8_VBMI 0
#endif
#if defined(__GFNI__) && defined(__AVX512VL__)
#define STRATA_X8_GFNI 1
#else
#define STRATA_X8_GFNI 0
#endif

namespace strata {
namespace {

constexpr bool kX8Vnni = STRATA_X8_VNNI;
// The one-token VNNI paths (unsigned32_groups, the K-quants, IQ2, IQ3, IQ4_XS) run where AMD hosts
// decode (one group per call, gemm_x8_avx512.cpp's amd_decode_streams) and fetch nothing ahead
// in software: on the Zen 4 host of the README, one thread streaming Matvec/Q4_K from memory
// read 21.1, 21.8, 20.7 GB/s with the 4 KiB-ahead prefetch and 31.0, 29.6, 25.2 without (the
// same kernel, alternated).
constexpr bool kPrefetchOneToken = !kX8Vnni;

#if STRATA_X8_VNNI
// acc + dpbusd(u, the 4 signed bytes at p in every lane), the broadcast folded into the dot step
// (EVEX embedded broadcast, {1to8}): one instruction where the intrinsics give two, since GCC 12
// folds no memory operand into vpdpbusd. On the Zen 4 host the one-token kernels' pace follows
// their instruction count, so this alone gave (Matvec in L2, MV_KIB=256, three alternated rounds,
// G values/s) Q6_K 60.8, 64.5, 64.1 -> 68.3, 68.3, 68.6; Q2_K 81.0, 80.5, 78.1 -> 89.0, 90.3,
// 89.8; IQ3_XXS 69.8, 70.4, 69.9 -> 82.0, 85.1, 83.5; IQ4_XS 69.4, 70.3, 70.0 -> 81.7, 79.2,
// 81.8 (more at each use).
inline __m256i dpbusd_bcast4(__m256i acc, __m256i u, const void* p) {
  __asm__("vpdpbusd %2%{1to8%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*static_cast<const int32_t*>(p)));
  return acc;
}
#endif
// A broadcast straight from memory (a load, no shuffle).
inline __m256i bcast_i32(const int32_t* p) { return _mm256_castps_si256(_mm256_broadcast_ss(reinterpret_cast<const float*>(p))); }
inline __m256 load_d8(const uint16_t* d) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d))); }
inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
// Per-row bytes as madd operands in the 16-bit lanes of row r: (p[r], p[r]) from eight bytes
// (row_bytes_paired), or (p[r], p[8 + r]) from two sub-blocks' sixteen (row_bytes_two). Broadcast,
// one shuffle, and with kSigned one shift: the byte goes to the high half and is shifted down
// with its sign.
template <bool kSigned, int kSecond>
constexpr std::array<int8_t, 32> row_byte_pick() {
  std::array<int8_t, 32> pick{};
  for (int e = 0; e < 16; ++e) {
    const auto src = static_cast<int8_t>(e / 2 + (e % 2 ? kSecond : 0));
    pick[2 * e] = kSigned ? int8_t{-1} : src;
    pick[2 * e + 1] = kSigned ? src : int8_t{-1};
  }
  return pick;
}
template <bool kSigned, int kSecond>
inline __m256i widen_row_bytes(__m256i v) {
  static constexpr std::array<int8_t, 32> kPick = row_byte_pick<kSigned, kSecond>();
  const __m256i w = _mm256_shuffle_epi8(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kPick.data())));
  if constexpr (kSigned) return _mm256_srai_epi16(w, 8);
  else return w;
}
template <bool kSigned>
inline __m256i row_bytes_paired(const void* p) {
  int64_t q;
  std::memcpy(&q, p, 8);
  return widen_row_bytes<kSigned, 0>(_mm256_set1_epi64x(q));
}
template <bool kSigned>
inline __m256i row_bytes_two(const void* p) {
  return widen_row_bytes<kSigned, 8>(_mm256_broadcastsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(p))));
}

// The same as row_bytes_paired<true> without a shuffle, for kernels whose shuffles are busy with
// their codes (IQ4_XS: Matvec/IQ4_XS 11.5-11.8 G values/s with the shuffle, 12.1-12.2 with this).
inline __m256i scale_pairs_i8(const int8_t* p) {
  const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(v, 16));
}

// Eight scales widened to 32-bit lanes, for a multiply of whole 32-bit sums (VNNI kernels).
inline __m256i scales_u8(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
inline __m256i scales_i8(const int8_t* p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }

// ---- 32-value formats on Q8_0 activations ----

// Unsigned codes of 4-value group g (0..7) of a Q4_0 / Q5_0 x8 block: group g pairs with
// activation bytes 4g..4g+3. Codes are made one group at a time and used at once by every
// activation row, which keeps the accumulators of four rows in registers.
inline __m256i nibble_group(const uint8_t* qs, int g) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i v = load256(qs + 32 * (g % 4));
  return g < 4 ? _mm256_and_si256(v, m4) : _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
}

// Groups 4..7 (the high nibbles) left in place: 16 times the code, for a chain of their own that
// is shifted back once (unsigned32_groups' one-token path).
inline __m256i nibble_group_in_place(const uint8_t* qs, int g) {
  return _mm256_and_si256(load256(qs + 32 * (g % 4)), _mm256_set1_epi8(static_cast<char>(g < 4 ? 0x0F : 0xF0)));
}

struct Q4_0x8 {
  using Block = BlockQ4_0x8;
  static constexpr int kShift = 3, kPerSum = 8;  // offset 8; 8 * 2*15*127 = 30480 fits 16 bits
  static __m256i code(const Block& b, int g) { return nibble_group(b.qs, g); }
  static __m256i code_in_place(const Block& b, int g) { return nibble_group_in_place(b.qs, g); }
};
// Bit s (0..7) of every byte moved to bit 4, the other bits cleared: a 16-bit shift suffices,
// since bit 4 of either byte of a 16-bit lane comes from its own byte for shifts up to 4 left or
// 3 right. The fifth bits of Q5_0, Q5_1 and Q5_K.
inline __m256i bit_to_4(__m256i v, int s) {
  return _mm256_and_si256(s <= 4 ? _mm256_slli_epi16(v, 4 - s) : _mm256_srli_epi16(v, s - 4), _mm256_set1_epi8(0x10));
}
// Five-bit codes of group g (Q5_0, Q5_1): bit g of each qh byte is the fifth bit.
template <typename Block>
inline __m256i five_bit_group(const Block& b, int g) {
  return _mm256_or_si256(nibble_group(b.qs, g), bit_to_4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)), g));
}
struct Q5_0x8 {
  using Block = BlockQ5_0x8;
  static constexpr bool kWordsFromMemory = true;
  static constexpr int kShift = 4, kPerSum = 4;  // offset 16; 4 * 2*31*127 = 31496 fits 16 bits
  static __m256i code(const Block& b, int g) { return five_bit_group(b, g); }
};

// Q4_1, Q5_1: the codes of Q4_0, Q5_0 without an offset; the rows' m times the activation
// block's code sum is a second multiply-add.
struct Q4_1x8 {
  using Block = BlockQ4_1x8;
  static constexpr bool kWordsFromMemory = true;
  static constexpr int kPerSum = 8;
  static __m256i code(const Block& b, int g) { return nibble_group(b.qs, g); }
  static __m256i code_in_place(const Block& b, int g) { return nibble_group_in_place(b.qs, g); }
};
struct Q5_1x8 {
  using Block = BlockQ5_1x8;
  static constexpr bool kWordsFromMemory = true;
  static constexpr int kPerSum = 4;
  static __m256i code(const Block& b, int g) { return five_bit_group(b, g); }
};

// These formats' one-token path takes its activation words from memory, each broadcast folded
// into its vpdpbusd (dpbusd_bcast4), not spread from two 16-byte loads by shuffles: the five-bit
// formats' fifth bits already keep the shift and shuffle ports busy. Matvec in L2 (MV_KIB=256),
// three alternated rounds, spread -> folded broadcasts: Q5_0 57.1, 57.1, 57.3 -> 61.5, 60.7,
// 61.5, Q5_1 52.4, 52.7, 52.9 -> 56.0, 55.9, 56.1, Q4_1 74.0, 74.0, 74.9 -> 76.1, 75.0, 76.0
// G values/s; Q4_0 the other way (76.2, 78.7, 77.7 -> 70.0, 71.5, 70.6).
template <typename F> constexpr bool kWordsFromMemory = requires { F::kWordsFromMemory; };

// G groups share each broadcast of activation bytes (gemm_x8.h, GemmGroupsFn).
template <typename F, int G, int NT>
void unsigned32_groups(int n, const uint8_t* w, size_t gs, const uint8_t* xq, size_t xs, const Q8BlockInfo* xsum,
                       size_t xss, float* out, size_t os) {
  const typename F::Block* b[G];
  STRATA_UNROLL for (int j = 0; j < G; ++j) b[j] = reinterpret_cast<const typename F::Block*>(w + gs * j);
  [[maybe_unused]] const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[G][NT];
  STRATA_UNROLL for (int j = 0; j < G; ++j) STRATA_UNROLL for (int t = 0; t < NT; ++t) acc[j][t] = _mm256_setzero_ps();
  for (int ib = 0; ib < n / 32; ++ib) {
    if (G * NT > 1 || kPrefetchOneToken) {
      STRATA_UNROLL for (int j = 0; j < G; ++j) prefetch_ahead(b[j] + ib);
    }
    const BlockQ8_0* y[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) y[t] = reinterpret_cast<const BlockQ8_0*>(xq + xs * t) + ib;
    __m256i s32[G][NT];
#if STRATA_X8_VNNI
    // One group and one token would be a single chain of 8 vpdpbusd: the odd groups take a
    // second chain then (an exact integer sum). Its activation words come from two 16-byte
    // loads, spread by in-lane shuffles, or from memory (kWordsFromMemory). Nibble formats split by
    // nibble instead: the high ones stay in place (16 times the code), and their chain is
    // shifted back once, exactly, where each of their code vectors took a shift.
    constexpr bool kSplit = G * NT == 1;
    constexpr bool kInPlace = kSplit && requires(const typename F::Block& blk) { F::code_in_place(blk, 0); };
    __m256i odd[G][NT];
    [[maybe_unused]] __m256i x16[2];
    if constexpr (kSplit && !kWordsFromMemory<F>) x16[0] = bcast16(y[0]->qs), x16[1] = bcast16(y[0]->qs + 16);
    STRATA_UNROLL for (int j = 0; j < G; ++j) STRATA_UNROLL for (int t = 0; t < NT; ++t) s32[j][t] = odd[j][t] = _mm256_setzero_si256();
    STRATA_UNROLL for (int gi = 0; gi < 8; ++gi) {
      const int g = kInPlace ? gi % 2 * 4 + gi / 2 : gi;  // in place: each byte's two nibbles in turn
      __m256i c[G];
      STRATA_UNROLL for (int j = 0; j < G; ++j) {
        if constexpr (kInPlace) c[j] = F::code_in_place(b[j][ib], g);
        else c[j] = F::code(b[j][ib], g);
      }
      if constexpr (kSplit) {
        __m256i& chain = (kInPlace ? g >= 4 : g % 2) ? odd[0][0] : s32[0][0];
        if constexpr (kWordsFromMemory<F>) {
          chain = dpbusd_bcast4(chain, c[0], y[0]->qs + 4 * g);
        } else {
          chain = _mm256_dpbusd_epi32(chain, c[0], spread_word(x16[g / 4], g % 4));
          STRATA_KEEP(chain);
        }
      } else {  // one broadcast feeds every group's chain
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          const __m256i x4 = bcast4(y[t]->qs + 4 * g);
          STRATA_UNROLL for (int j = 0; j < G; ++j) {
            s32[j][t] = _mm256_dpbusd_epi32(s32[j][t], c[j], x4);
            STRATA_KEEP(s32[j][t]);
          }
        }
      }
    }
    if constexpr (kSplit) s32[0][0] = _mm256_add_epi32(s32[0][0], kInPlace ? _mm256_srai_epi32(odd[0][0], 4) : odd[0][0]);
#else
    STRATA_UNROLL for (int g0 = 0; g0 < 8; g0 += F::kPerSum) {
      __m256i s16[G][NT];
      STRATA_UNROLL for (int g = g0; g < g0 + F::kPerSum; ++g) {
        __m256i c[G];
        STRATA_UNROLL for (int j = 0; j < G; ++j) c[j] = F::code(b[j][ib], g);
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          const __m256i x4 = bcast4(y[t]->qs + 4 * g);
          STRATA_UNROLL for (int j = 0; j < G; ++j) {
            const __m256i p = _mm256_maddubs_epi16(c[j], x4);
            s16[j][t] = g == g0 ? p : _mm256_add_epi16(s16[j][t], p);
            STRATA_KEEP(s16[j][t]);
          }
        }
      }
      STRATA_UNROLL for (int j = 0; j < G; ++j) STRATA_UNROLL for (int t = 0; t < NT; ++t) {
        const __m256i p = _mm256_madd_epi16(s16[j][t], ones);
        s32[j][t] = g0 == 0 ? p : _mm256_add_epi32(s32[j][t], p);
      }
    }
#endif
    STRATA_UNROLL for (int j = 0; j < G; ++j) {
      const __m256 dw = load_d8(b[j][ib].d);
      STRATA_UNROLL for (int t = 0; t < NT; ++t) {
        const Q8BlockInfo& yi = xsum[xss * t + ib];
        const __m256 dy = _mm256_broadcast_ss(&yi.d);
        if constexpr (requires { b[j][ib].m; }) {  // value = d * code + m
          acc[j][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dy), _mm256_cvtepi32_ps(s32[j][t]), acc[j][t]);
          acc[j][t] = _mm256_fmadd_ps(_mm256_mul_ps(load_d8(b[j][ib].m), dy), _mm256_cvtepi32_ps(bcast_i32(&yi.sum)), acc[j][t]);
        } else {  // value = d * (code - 2^kShift)
          const __m256i v = _mm256_sub_epi32(s32[j][t], _mm256_slli_epi32(bcast_i32(&yi.sum), F::kShift));
          acc[j][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dy), _mm256_cvtepi32_ps(v), acc[j][t]);
        }
      }
    }
  }
  STRATA_UNROLL for (int j = 0; j < G; ++j) STRATA_UNROLL for (int t = 0; t < NT; ++t)
    _mm256_storeu_ps(out + os * t + 8 * j, acc[j][t]);
}

template <typename F, int NT>
void gemm_unsigned32(int n, const uint8_t* w, const uint8_t* xq, size_t xs, const Q8BlockInfo* xsum, size_t xss,
                     float* out) {
  unsigned32_groups<F, 1, NT>(n, w, 0, xq, xs, xsum, xss, out, 8);
}

// Q8_0 and IQ4_NL: signed codes, so the sign goes onto the activations; a pair of products can
// reach 2*128*127, so each maddubs result is widened at once.
struct Q8_0x8 {
  using Block = BlockQ8_0x8;
  static __m256i code(const Block& b, int g) { return load256(reinterpret_cast<const uint8_t*>(b.qs) + 32 * g); }
};
struct IQ4_NLx8 {
  using Block = BlockIQ4_NLx8;
  static __m256i code(const Block& b, int g) {
    const __m128i t128 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
    return _mm256_shuffle_epi8(_mm256_set_m128i(t128, t128), nibble_group(b.qs, g));
  }
};
template <typename F, int NT>
void gemm_signed32(int n, const uint8_t* w, const uint8_t* xq, size_t xs, const Q8BlockInfo* xsum, size_t xss, float* out) {
  const auto* b = reinterpret_cast<const typename F::Block*>(w);
  [[maybe_unused]] const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int ib = 0; ib < n / 32; ++ib) {
    prefetch_ahead(b + ib);
    const BlockQ8_0* y[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) y[t] = reinterpret_cast<const BlockQ8_0*>(xq + xs * t) + ib;
    __m256i s32[NT];
    // VNNI with one token: the odd groups in a second vpdpbusd chain (an exact integer sum), where
    // one chain of 8 would wait on each other.
    [[maybe_unused]] constexpr bool kSplit = STRATA_X8_VNNI && NT == 1;
    [[maybe_unused]] __m256i odd = _mm256_setzero_si256();
#if STRATA_X8_VNNI
    STRATA_UNROLL for (int t = 0; t < NT; ++t) s32[t] = _mm256_setzero_si256();
#endif
    STRATA_UNROLL for (int g = 0; g < 8; ++g) {
      const __m256i c = F::code(b[ib], g);
      const __m256i a = _mm256_sign_epi8(c, c);
      STRATA_UNROLL for (int t = 0; t < NT; ++t) {
        const __m256i x = _mm256_sign_epi8(bcast4(y[t]->qs + 4 * g), c);
#if STRATA_X8_VNNI
        __m256i& chain = kSplit && g % 2 ? odd : s32[t];
        chain = _mm256_dpbusd_epi32(chain, a, x);
        STRATA_KEEP(chain);
#else
        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(a, x), ones);
        s32[t] = g == 0 ? p : _mm256_add_epi32(s32[t], p);
        STRATA_KEEP(s32[t]);
#endif
      }
    }
    if constexpr (kSplit) s32[0] = _mm256_add_epi32(s32[0], odd);
    const __m256 dw = load_d8(b[ib].d);
    STRATA_UNROLL for (int t = 0; t < NT; ++t)
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_broadcast_ss(&xsum[xss * t + ib].d)), _mm256_cvtepi32_ps(s32[t]), acc[t]);
  }
  STRATA_UNROLL for (int t = 0; t < NT; ++t) _mm256_storeu_ps(out + 8 * t, acc[t]);
}

// ---- K-quants on Q8_K activations ----

// Q4_K, Q5_K: a sub-block's maddubs results (each pair below 2*15*127 for Q4_K, 2*31*128 for
// Q5_K) sum exactly in 16 bits, eight (Q4_K) or four (Q5_K) at a time; madd then applies the
// row's 6-bit scale. Q5_K's fifth bits: bit s of a high-bit byte moved to bit 4 (bit_to_4).
// Codes of group g of sub-blocks 2j (lo) and 2j + 1 (hi) of a Q4_K / Q5_K x8 block.
// kLoadOnce: the code bytes stay in a register for both nibbles (the compiler would fold the
// load into both instructions, which costs a second load where loads are the bound).
template <typename Packed, bool kLoadOnce = false>
inline void q45_k_codes(const Packed& B, int j, int g, __m256i& lo, __m256i& hi) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256i v = load256(B.qs + j * 256 + g * 32);
  if constexpr (kLoadOnce) STRATA_KEEP(v);
  lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
  if constexpr (requires { B.qh; }) {
    const __m256i hb = load256(B.qh + g * 32);
    lo = _mm256_or_si256(lo, bit_to_4(hb, 2 * j));
    hi = _mm256_or_si256(hi, bit_to_4(hb, 2 * j + 1));
  }
}

template <typename Packed, int NT>
void gemm_q45_k(int n, const uint8_t* w, const uint8_t* xq, size_t xs, const Q8BlockInfo*, size_t, float* out) {
  constexpr bool kFive = requires(const Packed& p) { p.qh; };
  [[maybe_unused]] constexpr int kPerSum = kFive ? 4 : 8;
  const auto* b = reinterpret_cast<const Packed*>(w);
  __m256 acc[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int ib = 0; ib < n / 256; ++ib) {
    const Packed& B = b[ib];
    if (NT > 1 || kPrefetchOneToken) prefetch_ahead(b + ib);
    const BlockQ8_K* y[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(xq + xs * t) + ib;
    __m256i isum[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
#if STRATA_X8_VNNI
    if constexpr (NT == 1) {
      // One token (decode). Each code load serves both nibbles, and each activation word's
      // broadcast is folded into its vpdpbusd (dpbusd_bcast4): on this core the count of
      // instructions sets the pace (spreading four words from one 16-byte load by shuffles gave
      // Matvec/Q4_K in L2 78.0, 76.8, 78.7 G values/s, folded broadcasts 88.1, 89.3, 89.1;
      // Q5_K 53.9, 55.1, 55.2 -> 63.3, 64.8, 64.3). The code bytes are read in memory order
      // (sub-block pair outer), as they arrive when streamed. The integer sums are the same.
      __m256i s32[8];
      STRATA_UNROLL for (int j = 0; j < 4; ++j) {
        s32[2 * j] = s32[2 * j + 1] = _mm256_setzero_si256();
        STRATA_UNROLL for (int g = 0; g < 8; ++g) {
          __m256i lo, hi;
          if constexpr (kFive) {
            q45_k_codes<Packed, true>(B, j, g, lo, hi);
          } else {  // Q4_K's high nibbles stay in place: 16 times the code (their chain is shifted back below)
            __m256i v = load256(B.qs + j * 256 + g * 32);
            STRATA_KEEP(v);
            lo = _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
            hi = _mm256_and_si256(v, _mm256_set1_epi8(static_cast<char>(0xF0)));
          }
          s32[2 * j] = dpbusd_bcast4(s32[2 * j], lo, y[0]->qs + 64 * j + 4 * g);
          s32[2 * j + 1] = dpbusd_bcast4(s32[2 * j + 1], hi, y[0]->qs + 64 * j + 32 + 4 * g);
        }
      }
      STRATA_UNROLL for (int j = 0; j < 4; ++j) {
        const __m256i sl = scales_u8(B.sc[2 * j]), sh = scales_u8(B.sc[2 * j + 1]);
        // exact: every product of Q4_K's high chain is a multiple of 16 (one shift per chain, not per code vector)
        const __m256i high = kFive ? s32[2 * j + 1] : _mm256_srai_epi32(s32[2 * j + 1], 4);
        isum[0] = _mm256_add_epi32(isum[0], _mm256_add_epi32(_mm256_mullo_epi32(s32[2 * j], sl), _mm256_mullo_epi32(high, sh)));
      }
    } else
#endif
    STRATA_UNROLL for (int j = 0; j < 4; ++j) {
      // sub-blocks 2j (low nibbles) and 2j + 1 (high nibbles) from the same bytes
#if STRATA_X8_VNNI
      // whole sub-block sums in 32 bits, then one multiply by the row's scale
      __m256i lo32[NT], hi32[NT];
      STRATA_UNROLL for (int t = 0; t < NT; ++t) lo32[t] = hi32[t] = _mm256_setzero_si256();
      STRATA_UNROLL for (int g = 0; g < 8; ++g) {
        __m256i lo, hi;
        q45_k_codes(B, j, g, lo, hi);
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          lo32[t] = dpbusd_bcast4(lo32[t], lo, y[t]->qs + 64 * j + 4 * g);
          hi32[t] = dpbusd_bcast4(hi32[t], hi, y[t]->qs + 64 * j + 32 + 4 * g);
        }
      }
      const __m256i sl = scales_u8(B.sc[2 * j]), sh = scales_u8(B.sc[2 * j + 1]);
      STRATA_UNROLL for (int t = 0; t < NT; ++t) {
        isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_mullo_epi32(lo32[t], sl), _mm256_mullo_epi32(hi32[t], sh)));
        STRATA_KEEP(isum[t]);
      }
#else
      STRATA_UNROLL for (int g0 = 0; g0 < 8; g0 += kPerSum) {
        __m256i lo16[NT], hi16[NT];
        STRATA_UNROLL for (int g = g0; g < g0 + kPerSum; ++g) {
          __m256i lo, hi;
          q45_k_codes(B, j, g, lo, hi);
          STRATA_UNROLL for (int t = 0; t < NT; ++t) {
            const __m256i pl = _mm256_maddubs_epi16(lo, bcast4(y[t]->qs + 64 * j + 4 * g));
            const __m256i ph = _mm256_maddubs_epi16(hi, bcast4(y[t]->qs + 64 * j + 32 + 4 * g));
            lo16[t] = g > g0 ? _mm256_add_epi16(lo16[t], pl) : pl;
            hi16[t] = g > g0 ? _mm256_add_epi16(hi16[t], ph) : ph;
            STRATA_KEEP(lo16[t]);
            STRATA_KEEP(hi16[t]);
          }
        }
        // the scales are loaded here, not before the loop, where they would take two registers
        const __m256i sl = row_bytes_paired<false>(B.sc[2 * j]), sh = row_bytes_paired<false>(B.sc[2 * j + 1]);
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(lo16[t], sl), _mm256_madd_epi16(hi16[t], sh)));
          STRATA_KEEP(isum[t]);
        }
      }
#endif
    }
    __m256i mins[4];
    for (int p = 0; p < 4; ++p) mins[p] = row_bytes_two<false>(B.mn[2 * p]);
    const __m256 dw = load_d8(B.d), dm = load_d8(B.dmin);
    STRATA_UNROLL for (int t = 0; t < NT; ++t) {
      const __m256i bsp = bsum_pairs(y[t]->bsums);
      __m256i m32 = _mm256_setzero_si256();
      for (int p = 0; p < 4; ++p) m32 = _mm256_add_epi32(m32, _mm256_madd_epi16(mins[p], bsum_pair(bsp, p)));
      const __m256 dx = _mm256_set1_ps(y[t]->d);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(isum[t]), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_mul_ps(dm, dx), _mm256_cvtepi32_ps(m32), acc[t]);
    }
  }
  STRATA_UNROLL for (int t = 0; t < NT; ++t) _mm256_storeu_ps(out + 8 * t, acc[t]);
}

// Q2_K, Q3_K: 2-bit codes (Q3_K's with a third bit from the high mask), four values of a row per
// byte. One 32-byte load of group g gives the codes of four sub-blocks (bits 2j, j = 0..3), each
// paired with its own activation bytes. A 16-value sub-block is four groups: four maddubs results
// (each pair below 2*7*127) sum exactly in 16 bits, then madd applies the rows' sub-scales. The
// integer totals and float steps are those of the file-layout kernel (dotq), so a packed row gives
// the same bits as the same row in file layout.

// Codes of values 128h + 32j + 4(g%8) + i (g = 8h + g % 8) of a Q2_K / Q3_K x8 block: 0..3, and
// Q3_K's high bit 4h + j of its high-mask byte moved to bit 2 (0..7; value = code - 4).
// Bit `bit` of each high-mask byte moved to bit 2 (16-bit shifts: bit 2 of each byte comes from
// its own byte); the other bits are left for the caller's mask.
inline __m256i q3_high_at_bit2(__m256i m, int bit) { return bit <= 2 ? _mm256_slli_epi16(m, 2 - bit) : _mm256_srli_epi16(m, bit - 2); }
template <typename Packed>
inline __m256i q23_k_codes(const Packed& B, int h, int j, int g8) {
  const __m256i v = load256(B.qs + (8 * h + g8) * 32);
  const __m256i c = _mm256_and_si256(j ? _mm256_srli_epi16(v, 2 * j) : v, _mm256_set1_epi8(3));
  if constexpr (requires { B.hm; }) {
    return _mm256_or_si256(c, _mm256_and_si256(q3_high_at_bit2(load256(B.hm + g8 * 32), 4 * h + j), _mm256_set1_epi8(4)));
  } else {
    return c;
  }
}

template <typename Packed, int NT>
void gemm_q23_k(int n, const uint8_t* w, const uint8_t* xq, size_t xs, const Q8BlockInfo*, size_t, float* out) {
  constexpr bool kQ3 = requires(const Packed& p) { p.hm; };
  const auto* b = reinterpret_cast<const Packed*>(w);
  __m256 acc[NT], mins[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) acc[t] = mins[t] = _mm256_setzero_ps();
  for (int ib = 0; ib < n / 256; ++ib) {
    const Packed& B = b[ib];
    if (NT > 1 || kPrefetchOneToken) prefetch_ahead(b + ib);
    const BlockQ8_K* y[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(xq + xs * t) + ib;
    __m256i isum[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
#if STRATA_X8_VNNI
    // The sub-scale in the low half of each 32-bit lane, upper half zero (a vpdpwssd operand).
    auto sub_scale = [&](int s) {
      if constexpr (kQ3) return _mm256_and_si256(scales_i8(B.sc[s]), _mm256_set1_epi32(0xFFFF));
      else return _mm256_and_si256(scales_u8(B.sc[s]), _mm256_set1_epi32(15));
    };
#endif
    auto half = [&](int h) {  // values 128h..128h+127
      STRATA_UNROLL for (int j = 0; j < 4; ++j) {
        STRATA_UNROLL for (int q = 0; q < 2; ++q) {  // sub-block 8h + 2j + q: groups g8 = 4q..4q+3
          const int s = 8 * h + 2 * j + q;
#if STRATA_X8_VNNI
          // A sub-block's sum (at most 16 * 7 * 128) from vpdpbusd in 32 bits, then one vpdpwssd
          // against the sub-scale in the low half of each 32-bit lane (upper half zero): the
          // integer of the 16-bit sums and madd below, with one operation per vector fewer.
          __m256i s32[NT];
          STRATA_UNROLL for (int k = 0; k < 4; ++k) {
            const __m256i c = q23_k_codes(B, h, j, 4 * q + k);
            STRATA_UNROLL for (int t = 0; t < NT; ++t) {
              s32[t] = dpbusd_bcast4(k ? s32[t] : _mm256_setzero_si256(), c, y[t]->qs + 16 * s + 4 * k);
            }
          }
          const __m256i sc = sub_scale(s);
          STRATA_UNROLL for (int t = 0; t < NT; ++t) {
            isum[t] = _mm256_dpwssd_epi32(isum[t], s32[t], sc);
            STRATA_KEEP(isum[t]);
          }
#else
          __m256i s16[NT];
          STRATA_UNROLL for (int k = 0; k < 4; ++k) {
            const __m256i c = q23_k_codes(B, h, j, 4 * q + k);
            STRATA_UNROLL for (int t = 0; t < NT; ++t) {
              const __m256i p = _mm256_maddubs_epi16(c, bcast4(y[t]->qs + 16 * s + 4 * k));
              s16[t] = k ? _mm256_add_epi16(s16[t], p) : p;
              STRATA_KEEP(s16[t]);
            }
          }
          __m256i sc;
          if constexpr (kQ3) sc = row_bytes_paired<true>(B.sc[s]);
          else sc = _mm256_and_si256(row_bytes_paired<false>(B.sc[s]), _mm256_set1_epi16(15));
          STRATA_UNROLL for (int t = 0; t < NT; ++t) {
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16[t], sc));
            STRATA_KEEP(isum[t]);
          }
#endif
        }
      }
    };
#if STRATA_X8_VNNI
    // One token: each code vector (and Q3_K's high-mask vector) is loaded once for the four
    // sub-blocks whose codes it holds, where q23_k_codes loads it once per sub-block; Q3_K's high
    // bit goes in with one ternary-logic step. The 4 sub-blocks of a quarter run as 4 chains.
    if constexpr (NT == 1) {
      const __m256i m3 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(4);
      STRATA_UNROLL for (int h = 0; h < 2; ++h) STRATA_UNROLL for (int q = 0; q < 2; ++q) {
        __m256i s32[4];
        STRATA_UNROLL for (int j = 0; j < 4; ++j) s32[j] = _mm256_setzero_si256();
        STRATA_UNROLL for (int k = 0; k < 4; ++k) {
          const int g8 = 4 * q + k;
          __m256i v = load256(B.qs + (8 * h + g8) * 32);
          STRATA_KEEP(v);
          [[maybe_unused]] __m256i m;
          if constexpr (kQ3) {
            m = load256(B.hm + g8 * 32);
            STRATA_KEEP(m);
          }
          STRATA_UNROLL for (int j = 0; j < 4; ++j) {
            __m256i c;
            if constexpr (kQ3) {
              c = _mm256_and_si256(j ? _mm256_srli_epi16(v, 2 * j) : v, m3);
              c = _mm256_ternarylogic_epi32(q3_high_at_bit2(m, 4 * h + j), m4, c, 0xEA);  // (hb & 4) | c
            } else {
              c = _mm256_and_si256(v, _mm256_set1_epi8(static_cast<char>(3 << (2 * j))));  // 4^j times the code
            }
            s32[j] = dpbusd_bcast4(s32[j], c, y[0]->qs + 16 * (8 * h + 2 * j + q) + 4 * k);
          }
        }
        // Q2_K's codes stay in place (4^j q, at most 192): one shift per chain, exact as every
        // product is a multiple of 4^j, where each code vector took one.
        STRATA_UNROLL for (int j = 0; j < 4; ++j)
          isum[0] = _mm256_dpwssd_epi32(isum[0], kQ3 || !j ? s32[j] : _mm256_srai_epi32(s32[j], 2 * j), sub_scale(8 * h + 2 * j + q));
      }
    } else
#endif
    // Q3_K's halves unrolled, so its high-mask shift counts are constants (as a loop, GCC hoisted
    // the high-mask loads and spilled them; Matvec/Q3_K 18.5 -> 16.1 µs unrolled). Q2_K's prefill
    // ran faster as a loop (Matmul/Q2_K 8.6 -> 7.3 ms).
    if constexpr (kQ3) {
      half(0);
      half(1);
    } else {
      for (int h = 0; h < 2; ++h) half(h);
    }
    // The sub-scales (Q3_K, for the codes' offset of 4) or the mins (Q2_K) times the
    // activations' 16-value sums.
    __m256i pairs[8];
    STRATA_UNROLL for (int p = 0; p < 8; ++p) {
      if constexpr (kQ3) pairs[p] = row_bytes_two<true>(B.sc[2 * p]);
      else pairs[p] = _mm256_srli_epi16(row_bytes_two<false>(B.sc[2 * p]), 4);
    }
    const __m256 dw = load_d8(B.d);
    STRATA_UNROLL for (int t = 0; t < NT; ++t) {
      const int16_t* bs = y[t]->bsums;
      __m256i m32 = _mm256_setzero_si256();
      STRATA_UNROLL for (int p = 0; p < 8; ++p) m32 = _mm256_add_epi32(m32, _mm256_madd_epi16(pairs[p], bcast4(bs + 2 * p)));
      const __m256 dy = _mm256_set1_ps(y[t]->d);
      if constexpr (kQ3) {
        const __m256i total = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(m32, 2));
        acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dy), _mm256_cvtepi32_ps(total), acc[t]);
      } else {
        acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dy), _mm256_cvtepi32_ps(isum[t]), acc[t]);
        mins[t] = _mm256_add_ps(mins[t], _mm256_mul_ps(dy, _mm256_mul_ps(load_d8(B.dmin), _mm256_cvtepi32_ps(m32))));
      }
    }
  }
  STRATA_UNROLL for (int t = 0; t < NT; ++t) _mm256_storeu_ps(out + 8 * t, kQ3 ? acc[t] : _mm256_sub_ps(acc[t], mins[t]));
}

// TQ2_0: one factor per block, values code - 1. The codes (0..3) of 16 groups sum in 16 bits
// (16 * 2*3*127 = 12192) before one madd widens them; the offset is the activations' block sum.
template <int NT>
void gemm_tq2_0(int n, const uint8_t* w, const uint8_t* xq, size_t xs, const Q8BlockInfo*, size_t, float* out) {
  const auto* b = reinterpret_cast<const BlockTQ2_0x8*>(w);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int ib = 0; ib < n / 256; ++ib) {
    const BlockTQ2_0x8& B = b[ib];
    prefetch_ahead(b + ib);
    const BlockQ8_K* y[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(xq + xs * t) + ib;
    __m256i isum[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
#if STRATA_X8_VNNI
    // vpdpbusd sums each vector's products in 32 bits (no sub-scales), in four chains (one per
    // code plane j) added at the end: the same integers as the 16-bit sums and madds below. The
    // codes stay in place (4^j times the code, at most 192), so plane j's chain sums 4^j times
    // its products, and one exact shift per chain and block replaces a shift per code vector.
    __m256i s32[4][NT];
    for (int h = 0; h < 2; ++h) {
      STRATA_UNROLL for (int g8 = 0; g8 < 8; ++g8) {
        const __m256i v = load256(B.qs + (8 * h + g8) * 32);
        STRATA_UNROLL for (int j = 0; j < 4; ++j) {
          const __m256i c = _mm256_and_si256(v, _mm256_set1_epi8(static_cast<char>(3 << (2 * j))));
          STRATA_UNROLL for (int t = 0; t < NT; ++t) {
            s32[j][t] = dpbusd_bcast4(h || g8 ? s32[j][t] : _mm256_setzero_si256(), c, y[t]->qs + 128 * h + 32 * j + 4 * g8);
          }
        }
      }
    }
    STRATA_UNROLL for (int t = 0; t < NT; ++t)
      isum[t] = _mm256_add_epi32(_mm256_add_epi32(s32[0][t], _mm256_srai_epi32(s32[1][t], 2)),
                                 _mm256_add_epi32(_mm256_srai_epi32(s32[2][t], 4), _mm256_srai_epi32(s32[3][t], 6)));
#else
    for (int h = 0; h < 2; ++h) {
      STRATA_UNROLL for (int j0 = 0; j0 < 4; j0 += 2) {  // values 128h + 32j.., j = j0, j0 + 1
        __m256i s16[NT];
        STRATA_UNROLL for (int j = j0; j < j0 + 2; ++j) STRATA_UNROLL for (int g8 = 0; g8 < 8; ++g8) {
          const __m256i c = q23_k_codes(B, h, j, g8);
          STRATA_UNROLL for (int t = 0; t < NT; ++t) {
            const __m256i p = _mm256_maddubs_epi16(c, bcast4(y[t]->qs + 128 * h + 32 * j + 4 * g8));
            s16[t] = j == j0 && g8 == 0 ? p : _mm256_add_epi16(s16[t], p);
            STRATA_KEEP(s16[t]);
          }
        }
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16[t], ones));
          STRATA_KEEP(isum[t]);
        }
      }
    }
#endif
    const __m256 dw = load_d8(B.d);
    STRATA_UNROLL for (int t = 0; t < NT; ++t) {
      const __m256i s = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t]->bsums));
      const int32_t ysum = hsum_i32(_mm256_madd_epi16(s, ones));
      const __m256i total = _mm256_sub_epi32(isum[t], _mm256_set1_epi32(ysum));
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(y[t]->d)), _mm256_cvtepi32_ps(total), acc[t]);
    }
  }
  STRATA_UNROLL for (int t = 0; t < NT; ++t) _mm256_storeu_ps(out + 8 * t, acc[t]);
}

// A decoded block of a format without mins (every one but Q2_K and the K-quants with mins).
inline void clear_mins(DecodedX8Block& D) {
  _mm256_storeu_ps(D.dmin, _mm256_setzero_ps());
  std::memset(D.mn, 0, sizeof D.mn);
}

// A packed Q2_K / Q3_K / TQ2_0 group as DecodedX8Block (prefill with more than 4 activation rows
// goes through gemm_decoded8 or the token bands, which give the same bits): values are the
// kernel's codes (Q3_K's minus 4, TQ2_0's minus 1, whose sub-scales are all 1), value 4G + i =
// 128h + 32j + 4*g8 + i with G = 32h + 8j + g8.
template <typename Packed>
void decode_packed8_q23(int n, const uint8_t* w, uint8_t* out) {
  constexpr bool kQ3 = requires(const Packed& p) { p.hm; };
  constexpr bool kTernary = !requires(const Packed& p) { p.sc; };
  const auto* b = reinterpret_cast<const Packed*>(w);
  auto* db = reinterpret_cast<DecodedX8Block*>(out);
  for (int ib = 0; ib < n / 256; ++ib) {
    const Packed& B = b[ib];
    DecodedX8Block& D = db[ib];
    _mm256_storeu_ps(D.d, load_d8(B.d));
    for (int s = 0; s < 16; ++s) {
      __m256i sc;
      if constexpr (kTernary) sc = _mm256_set1_epi32(0x00010001);
      else if constexpr (kQ3) sc = row_bytes_paired<true>(B.sc[s]);
      else sc = _mm256_and_si256(row_bytes_paired<false>(B.sc[s]), _mm256_set1_epi16(15));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(D.sc[s]), sc);
    }
    STRATA_UNROLL for (int h = 0; h < 2; ++h) STRATA_UNROLL for (int j = 0; j < 4; ++j) for (int g8 = 0; g8 < 8; ++g8) {
      __m256i v = q23_k_codes(B, h, j, g8);
      if constexpr (kQ3 || kTernary) v = _mm256_sub_epi8(v, _mm256_set1_epi8(kQ3 ? 4 : 1));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(D.v[32 * h + 8 * j + g8]), v);
    }
    if constexpr (kQ3 || kTernary) {
      clear_mins(D);
    } else {
      _mm256_storeu_ps(D.dmin, load_d8(B.dmin));
      for (int p = 0; p < 8; ++p)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(D.mn[p]), _mm256_srli_epi16(row_bytes_two<false>(B.sc[2 * p]), 4));
    }
  }
}

// The IQ2 formats (XXS, XS, S) in their grown layout: a value's level (0..2) sits in Q2_K's code
// place, its sign in Q3_K's high bit. Per 32-byte vector of codes: one shuffle gives the unsigned
// levels (8, 25, 43) from a table that holds them both at entries 0..3 and at 0, 4, 8, 12, so the
// codes in bits 0-1 and 2-3 of each byte index it after one and, and those in bits 4-7 after one
// shift by 4 for both; the sign bit, kept in place by an and, goes past 127 when set through an
// unsigned saturating add of 127 (the sign source vpsignb reads), and onto the broadcast
// activations. (Shifting each code and sign bit into place took 1.75 shifts per vector, which Zen 1
// runs on one pipe: Matvec/IQ2_XS with STRATA_REPACK_IQ=1 MV_KIB=512 MV_COLS=1024, min of 5, five
// alternated rounds, 0.153-0.158 -> 0.149-0.153 ms; IQ2_XXS 0.169-0.175 -> 0.165-0.173.) Two maddubs results (each pair below 2*43*128) sum exactly in 16 bits before
// madd applies the rows' sub-scales 2s + 1. The integer totals and float steps are those of the
// file-layout kernel.
inline constexpr std::array<int8_t, 16> kIq2LevelsByPair = [] {
  std::array<int8_t, 16> t{};
  for (int i = 0; i < 16; ++i) t[i] = i < 4 ? kIq2LevelValues[i] : i % 4 == 0 ? kIq2LevelValues[i / 4] : int8_t{0};
  return t;
}();
// The levels of the 2-bit codes at bits 0-1 (at2 = false) or 2-3 (at2) of each byte of idx. With
// VBMI one vpermb over a 32-entry table whose entries depend on those two bits only (vpermb reads
// bits 0-4, so the others need not be cleared); else vpshufb over kIq2LevelsByPair after a vpand.
// Matvec in L2 (MV_KIB=512 STRATA_REPACK_IQ=1, medians of 5, three alternated rounds): IQ2_XXS
// 61.4, 61.2, 61.4 -> 69.3, 67.4, 65.9, IQ2_XS 58.7, 59.3, 59.3 -> 63.2, 65.0, 65.2, IQ2_S 58.6,
// 59.0, 59.2 -> 65.2, 65.4, 64.9 G values/s.
template <int kShift>
inline constexpr std::array<int8_t, 32> kIq2LevelsAt = [] {
  std::array<int8_t, 32> t{};
  for (int i = 0; i < 32; ++i) t[i] = kIq2LevelValues[(i >> kShift) & 3];
  return t;
}();
struct Iq2LevelLookup {
#if STRATA_X8_VBMI
  const __m256i even = load256(reinterpret_cast<const uint8_t*>(kIq2LevelsAt<0>.data()));
  const __m256i odd = load256(reinterpret_cast<const uint8_t*>(kIq2LevelsAt<2>.data()));
  __m256i operator()(__m256i idx, bool at2) const { return _mm256_permutexvar_epi8(idx, at2 ? odd : even); }
#else
  const __m256i levels = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq2LevelsByPair.data())));
  const __m256i m03 = _mm256_set1_epi8(0x03), m0c = _mm256_set1_epi8(0x0C);
  __m256i operator()(__m256i idx, bool at2) const { return _mm256_shuffle_epi8(levels, _mm256_and_si256(idx, at2 ? m0c : m03)); }
#endif
};
template <typename Packed, int NT>  // BlockIQ2Levelsx8, BlockIQ2XXSLevelsx8
void gemm_iq2_levels(int n, const uint8_t* w, const uint8_t* xq, size_t xs, const Q8BlockInfo*, size_t, float* out) {
  const auto* b = reinterpret_cast<const Packed*>(w);
  const Iq2LevelLookup level;
  __m256 acc[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int ib = 0; ib < n / 256; ++ib) {
    const Packed& B = b[ib];
    if (NT > 1 || kPrefetchOneToken) prefetch_ahead(b + ib);
    const BlockQ8_K* y[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(xq + xs * t) + ib;
    __m256i isum[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
#if STRATA_X8_VNNI
    // As iq2_levels_pair_512 on one group: the sign bit as a mask under which the activations are
    // negated, vpdpbusd summing in 32 bits, one vpmulld per sub-scale row; exact integer totals,
    // so the same bits as the 16-bit sums below, in about a quarter fewer operations.
    constexpr int kQs = iq2_scale_row<Packed>(1) == iq2_scale_row<Packed>(0) ? 2 : 1;  // 16-value sub-blocks per scale row
    if constexpr (NT == 1) {
      // One token: each code and sign vector is loaded once for its four sub-blocks (j); the 8
      // sub-blocks of a half run as 8 chains. The activation words are broadcast from memory:
      // the level lookups keep the shuffle ports busy, so gemm_q45_k's in-lane spreading of one
      // 16-byte load would queue behind them (Matvec/IQ2_XXS, STRATA_REPACK_IQ=1 MV_COLS=1024,
      // one thread from memory, three alternated rounds: 12.4, 12.6, 13.0 GB/s spread, 14.0,
      // 14.5, 14.1 broadcast; IQ2_XS 13.0, 12.5, 13.7 against 13.5, 14.6, 14.2).
      STRATA_UNROLL for (int h = 0; h < 2; ++h) {
        __m256i c[4][2];
        STRATA_UNROLL for (int j = 0; j < 4; ++j) STRATA_UNROLL for (int q = 0; q < 2; ++q) c[j][q] = _mm256_setzero_si256();
        STRATA_UNROLL for (int g8 = 0; g8 < 8; ++g8) {
          const int q = g8 / 4, k = g8 % 4;
          __m256i v = load256(B.qs + (8 * h + g8) * 32), m = load256(B.hm + g8 * 32);
          STRATA_KEEP(v);
          STRATA_KEEP(m);
          const __m256i v4 = _mm256_srli_epi16(v, 4);
          STRATA_UNROLL for (int j = 0; j < 4; ++j) {
            const __m256i a = level(j >= 2 ? v4 : v, j % 2);
            const __mmask32 neg = _mm256_test_epi8_mask(m, _mm256_set1_epi8(static_cast<char>(1 << (4 * h + j))));
            const __m256i x = bcast4(y[0]->qs + 16 * (8 * h + 2 * j + q) + 4 * k);
            c[j][q] = _mm256_dpbusd_epi32(c[j][q], a, _mm256_mask_sub_epi8(x, neg, _mm256_setzero_si256(), x));
            STRATA_KEEP(c[j][q]);
          }
        }
        STRATA_UNROLL for (int j = 0; j < 4; ++j) STRATA_UNROLL for (int q0 = 0; q0 < 2; q0 += kQs) {
          const __m256i sum = kQs == 2 ? _mm256_add_epi32(c[j][0], c[j][1]) : c[j][q0];
          isum[0] = _mm256_add_epi32(isum[0], _mm256_mullo_epi32(sum, scales_i8(B.sc[iq2_scale_row<Packed>(8 * h + 2 * j + q0)])));
        }
      }
    } else
    STRATA_UNROLL for (int h = 0; h < 2; ++h) STRATA_UNROLL for (int j = 0; j < 4; ++j) {
      const __m256i sign_bit = _mm256_set1_epi8(static_cast<char>(1 << (4 * h + j)));
      STRATA_UNROLL for (int q0 = 0; q0 < 2; q0 += kQs) {
        __m256i s32[NT], odd[NT];  // one token: odd k in a second chain (an exact integer sum)
        STRATA_UNROLL for (int t = 0; t < NT; ++t) s32[t] = odd[t] = _mm256_setzero_si256();
        STRATA_UNROLL for (int q = q0; q < q0 + kQs; ++q) {
          const int s = 8 * h + 2 * j + q;  // sub-block: groups g8 = 4q..4q+3
          STRATA_UNROLL for (int k = 0; k < 4; ++k) {
            const int g8 = 4 * q + k;
            const __m256i v = load256(B.qs + (8 * h + g8) * 32);
            const __m256i a = level(j >= 2 ? _mm256_srli_epi16(v, 4) : v, j % 2);
            const __mmask32 neg = _mm256_test_epi8_mask(load256(B.hm + g8 * 32), sign_bit);
            STRATA_UNROLL for (int t = 0; t < NT; ++t) {
              const __m256i x = bcast4(y[t]->qs + 16 * s + 4 * k);
              const __m256i sx = _mm256_mask_sub_epi8(x, neg, _mm256_setzero_si256(), x);
              __m256i& chain = NT == 1 && k % 2 ? odd[t] : s32[t];
              chain = _mm256_dpbusd_epi32(chain, a, sx);
              STRATA_KEEP(chain);
            }
          }
        }
        if constexpr (NT == 1) s32[0] = _mm256_add_epi32(s32[0], odd[0]);
        const int row = iq2_scale_row<Packed>(8 * h + 2 * j + q0);
        const __m256i sc = scales_i8(B.sc[row]);
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(s32[t], sc));
          STRATA_KEEP(isum[t]);
        }
      }
    }
#else
    const __m256i p127 = _mm256_set1_epi8(127);
    STRATA_UNROLL for (int h = 0; h < 2; ++h) STRATA_UNROLL for (int j = 0; j < 4; ++j) {
      const int bit = 4 * h + j;  // the sign's bit in the high-mask bytes
      const __m256i sign_bit = _mm256_set1_epi8(static_cast<int8_t>(1 << bit));
      STRATA_UNROLL for (int q = 0; q < 2; ++q) {  // sub-block 8h + 2j + q: groups g8 = 4q..4q+3
        const int s = 8 * h + 2 * j + q;
        const __m256i sc = row_bytes_paired<true>(B.sc[iq2_scale_row<Packed>(s)]);
        STRATA_UNROLL for (int k2 = 0; k2 < 4; k2 += 2) {
          __m256i s16[NT];
          STRATA_UNROLL for (int k = k2; k < k2 + 2; ++k) {
            const int g8 = 4 * q + k;
            const __m256i v = load256(B.qs + (8 * h + g8) * 32);
            // 16-bit shift: bits 0-3 of each byte come from its own bits 4-7
            const __m256i a = level(j >= 2 ? _mm256_srli_epi16(v, 4) : v, j % 2);
            const __m256i sg = _mm256_adds_epu8(_mm256_and_si256(load256(B.hm + g8 * 32), sign_bit), p127);
            STRATA_UNROLL for (int t = 0; t < NT; ++t) {
              const __m256i p = _mm256_maddubs_epi16(a, _mm256_sign_epi8(bcast4(y[t]->qs + 16 * s + 4 * k), sg));
              s16[t] = k > k2 ? _mm256_add_epi16(s16[t], p) : p;
              STRATA_KEEP(s16[t]);
            }
          }
          STRATA_UNROLL for (int t = 0; t < NT; ++t) {
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16[t], sc));
            STRATA_KEEP(isum[t]);
          }
        }
      }
    }
#endif
    const __m256 dw = _mm256_mul_ps(load_d8(B.d), _mm256_set1_ps(0.125f));
    STRATA_UNROLL for (int t = 0; t < NT; ++t)
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(y[t]->d)), _mm256_cvtepi32_ps(isum[t]), acc[t]);
  }
  STRATA_UNROLL for (int t = 0; t < NT; ++t) _mm256_storeu_ps(out + 8 * t, acc[t]);
}

// Packed IQ2 (and, below, IQ1 and IQ3) groups as DecodedX8Block (prefill with more than 4
// activation rows), the block the file-layout decoder (decode_rows8) makes from the same rows.
template <typename Packed>
void decode_packed8_iq2(int n, const uint8_t* w, uint8_t* out) {
  const auto* b = reinterpret_cast<const Packed*>(w);
  auto* db = reinterpret_cast<DecodedX8Block*>(out);
  const __m128i l128 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq2LevelValues.data()));
  const __m256i values = _mm256_set_m128i(l128, l128);
  for (int ib = 0; ib < n / 256; ++ib) {
    const Packed& B = b[ib];
    DecodedX8Block& D = db[ib];
    _mm256_storeu_ps(D.d, _mm256_mul_ps(load_d8(B.d), _mm256_set1_ps(0.125f)));
    for (int s = 0; s < 16; ++s)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(D.sc[s]), row_bytes_paired<true>(B.sc[iq2_scale_row<Packed>(s)]));
    STRATA_UNROLL for (int h = 0; h < 2; ++h) STRATA_UNROLL for (int j = 0; j < 4; ++j) for (int g8 = 0; g8 < 8; ++g8)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(D.v[32 * h + 8 * j + g8]), _mm256_shuffle_epi8(values, q23_k_codes(B, h, j, g8)));
    clear_mins(D);
  }
}

// IQ1_S and IQ1_M in their grown layout (BlockIQ1Codesx8): per 32-byte vector of codes, g + 1
// moved to bits 3-4 by one shift and one and, and the delta's bit, as 0 or 2, or-ed in: the
// unsigned codes u = 8 (g + 1) + delta + 1 (0..18) go straight into maddubs, with no sign step.
// The delta bits of the four 8-value groups a sub-block pair spans sit in one byte of each row's
// plus word; one shuffle copies that byte to the row's four lanes, then an and and one 16-bit
// shift (the bit stays in its byte) give each group's 0 or 2. A sub-block's four maddubs results
// (each pair at most 2*18*128) sum exactly in 16 bits before madd applies its sub-scale; the offset
// of 9 comes off after the block through the sub-scaled 16-value activation sums. The integer
// totals and float steps are those of the file-layout kernel (values 8g + delta, d / 8).
// The delta bytes of sub-block pair 4h + j (byte 2h + j / 2 of each row's plus word, copied to the
// row's four lanes), and the unsigned codes u = 8 (g + 1) + delta + 1 of vector g8 of codes bits 2j.
inline __m256i iq1_deltas(__m256i plus, int h, int j) {
  const __m256i row_byte0 = _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12,  //
                                             0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12);
  return _mm256_shuffle_epi8(plus, _mm256_add_epi8(row_byte0, _mm256_set1_epi8(static_cast<char>(2 * h + j / 2))));
}
// The codes of v (vector g8 of a half) for sub-block pair j, with the delta bit of group 8h + bit
// (bit = 4 (j % 2) + g8 / 2). 16-bit shifts: each byte's bits 3-4 and 1 come from its own bits.
inline __m256i iq1_unsigned(__m256i v, __m256i deltas, int j, int bit) {
  const int sh = 3 - 2 * j;
  const __m256i shifted = sh > 0 ? _mm256_slli_epi16(v, sh) : _mm256_srli_epi16(v, -sh);
  const __m256i db = _mm256_and_si256(deltas, _mm256_set1_epi8(static_cast<char>(1 << bit)));
  const __m256i d2 = bit == 0 ? _mm256_add_epi8(db, db) : bit == 1 ? db : _mm256_srli_epi16(db, bit - 1);
#if STRATA_X8_VNNI
  return _mm256_ternarylogic_epi32(shifted, _mm256_set1_epi8(0x18), d2, 0xEA);  // (shifted & 0x18) | d2
#else
  return _mm256_or_si256(_mm256_and_si256(shifted, _mm256_set1_epi8(0x18)), d2);
#endif
}
inline __m256i iq1_codes(const BlockIQ1Codesx8& B, __m256i deltas, int h, int j, int g8) {
  return iq1_unsigned(load256(B.qs + (8 * h + g8) * 32), deltas, j, 4 * (j % 2) + g8 / 2);
}
#if STRATA_X8_VNNI
// k times the 16 sums of 16 activation codes of y, as int32 at out (32-byte aligned): the one-token
// paths' chain offsets, which they then take as broadcast loads.
inline void scaled_bsums(const BlockQ8_K& y, int32_t k, int32_t* out) {
  const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums)), kv = _mm256_set1_epi32(k);
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), _mm256_mullo_epi32(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(bs)), kv));
  _mm256_store_si256(reinterpret_cast<__m256i*>(out + 8), _mm256_mullo_epi32(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(bs, 1)), kv));
}
// The one-token paths' end of a block: the eight sub-scaled chains' sum times d / 8 and the
// activations' factor, into acc.
inline __m256 iq1_accumulate(__m256i (&iq)[4][2], const BlockIQ1Codesx8& B, const BlockQ8_K& y, __m256 acc) {
  STRATA_UNROLL for (int j = 0; j < 4; ++j) iq[j][0] = _mm256_add_epi32(iq[j][0], iq[j][1]);
  const __m256i total = _mm256_add_epi32(_mm256_add_epi32(iq[0][0], iq[1][0]), _mm256_add_epi32(iq[2][0], iq[3][0]));
  const __m256 dw = _mm256_mul_ps(load_d8(B.d), _mm256_set1_ps(0.125f));
  return _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(y.d)), _mm256_cvtepi32_ps(total), acc);
}
#endif
// kDelta32: the rows are IQ1_S's, whose delta is shared by 32 values (a sub-block pair); the
// one-token VNNI path then leaves it out of the codes (below).
template <int NT, bool kDelta32 = false>
void gemm_iq1_codes(int n, const uint8_t* w, const uint8_t* xq, size_t xs, const Q8BlockInfo*, size_t, float* out) {
  const auto* b = reinterpret_cast<const BlockIQ1Codesx8*>(w);
  const __m256i m0f = _mm256_set1_epi16(0x0F);
  __m256 acc[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int ib = 0; ib < n / 256; ++ib) {
    const BlockIQ1Codesx8& B = b[ib];
    if (NT > 1 || kPrefetchOneToken) prefetch_ahead(b + ib);
    const BlockQ8_K* y[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(xq + xs * t) + ib;
    __m256i isum[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
    const __m256i plus = load256(reinterpret_cast<const uint8_t*>(B.plus));
#if STRATA_X8_VNNI
    if constexpr (NT == 1 && kDelta32) {
      // One token, IQ1_S: the codes g + 1 stay where they lie (bits 2j, 2j + 1: one and, no shift),
      // so sub-block pair j's chains sum 4^j (g + 1) x; one shift per chain makes that 8 (g + 1) x
      // exactly (4^j is a multiple of 8 from j = 2 on), and the pair's delta comes in with the
      // offset: (delta - 8) times the 16-value activation sum, -7 or -9 times it by the pair's
      // delta bit (a mask of the 8 rows). That leaves sum (8g + delta) x within 16 bits for the
      // sub-scale's vpdpwssd: the integer total of the path below.
      alignas(32) int32_t off9[16], off7[16];
      scaled_bsums(*y[0], -9, off9);
      scaled_bsums(*y[0], -7, off7);
      __asm__ volatile("" ::: "memory");  // the offsets as broadcast loads (as below)
      __m256i iq[4][2];
      STRATA_UNROLL for (int j = 0; j < 4; ++j) iq[j][0] = iq[j][1] = _mm256_setzero_si256();
      STRATA_UNROLL for (int h = 0; h < 2; ++h) {
        __m256i v[8];
        STRATA_UNROLL for (int g8 = 0; g8 < 8; ++g8) {
          v[g8] = load256(B.qs + (8 * h + g8) * 32);
          STRATA_KEEP(v[g8]);
        }
        __m256i c[4][2];
        STRATA_UNROLL for (int j = 0; j < 4; ++j) c[j][0] = c[j][1] = _mm256_setzero_si256();
        STRATA_UNROLL for (int k = 0; k < 4; ++k) STRATA_UNROLL for (int q = 0; q < 2; ++q) STRATA_UNROLL for (int j = 0; j < 4; ++j) {
          const int s = 8 * h + 2 * j + q, g8 = 4 * q + k;
          const __m256i u = _mm256_and_si256(v[g8], _mm256_set1_epi8(static_cast<char>(3 << (2 * j))));
          c[j][q] = dpbusd_bcast4(c[j][q], u, y[0]->qs + 16 * s + 4 * k);
        }
        STRATA_UNROLL for (int j = 0; j < 4; ++j) {
          // the pair's delta bit: bit 4j of byte 2h of each row's plus word
          const __mmask8 plus_rows = _mm256_test_epi32_mask(plus, _mm256_set1_epi32(1 << (16 * h + 4 * j)));
          // IQ1_S's two sub-blocks of a pair have one scale: the low nibble serves both
          const __m256i sc = _mm256_and_si256(scales_u8(B.sc[4 * h + j]), _mm256_set1_epi32(0x0F));
          STRATA_UNROLL for (int q = 0; q < 2; ++q) {
            const int s = 8 * h + 2 * j + q;
            const __m256i start = _mm256_mask_blend_epi32(plus_rows, bcast4(off9 + s), bcast4(off7 + s));
            const __m256i x8 = j == 0 ? _mm256_slli_epi32(c[j][q], 3) : j == 1 ? _mm256_slli_epi32(c[j][q], 1)
                                                                          : _mm256_srai_epi32(c[j][q], j == 2 ? 1 : 3);
            iq[j][q] = _mm256_dpwssd_epi32(iq[j][q], _mm256_add_epi32(x8, start), sc);
            STRATA_KEEP(iq[j][q]);
          }
        }
      }
      acc[0] = iq1_accumulate(iq, B, *y[0], acc[0]);
      continue;
    }
    if constexpr (NT == 1) {
      // One token (iq1_codes_pair_512's steps on one group): each sub-block's vpdpbusd chain
      // starts from -9 times its 16-value activation sum, so it ends at the sum of (8g + delta) x,
      // within 16 bits (16 * 9 * 128), and one vpdpwssd applies the sub-scale (low halves; the
      // high halves' sign bits meet zeros). The delta's 0 or 2 goes in with the codes' and (one
      // vpternlogd), each code vector is loaded once for its four sub-block pairs j, and the 8
      // sub-blocks of a half run as 8 interleaved chains. The same integer total as below.
      alignas(32) int32_t off[16];
      scaled_bsums(*y[0], -9, off);
      // The chains then start from broadcast loads: without this barrier GCC keeps the offsets in
      // registers and broadcasts them with shuffles, on the ports the codes' shifts need.
      __asm__ volatile("" ::: "memory");
      // One vpdpwssd chain per sub-block pair and parity, so their latency stays off the path (two
      // chains: Matvec/IQ1_S, MV_KIB=256, 65.9-66.8 -> 64.1-65.0 G values/s, three alternated rounds).
      __m256i iq[4][2];
      STRATA_UNROLL for (int j = 0; j < 4; ++j) iq[j][0] = iq[j][1] = _mm256_setzero_si256();
      STRATA_UNROLL for (int h = 0; h < 2; ++h) {
        __m256i v[8];
        STRATA_UNROLL for (int g8 = 0; g8 < 8; ++g8) {
          v[g8] = load256(B.qs + (8 * h + g8) * 32);
          STRATA_KEEP(v[g8]);
        }
        __m256i deltas[4], scb[4], c[4][2];
        STRATA_UNROLL for (int j = 0; j < 4; ++j) {
          deltas[j] = iq1_deltas(plus, h, j);
          scb[j] = scales_u8(B.sc[4 * h + j]);
          STRATA_UNROLL for (int q = 0; q < 2; ++q) c[j][q] = bcast4(off + 8 * h + 2 * j + q);
        }
        STRATA_UNROLL for (int k = 0; k < 4; ++k) STRATA_UNROLL for (int q = 0; q < 2; ++q) STRATA_UNROLL for (int j = 0; j < 4; ++j) {
          const int s = 8 * h + 2 * j + q, g8 = 4 * q + k;
          c[j][q] = dpbusd_bcast4(c[j][q], iq1_unsigned(v[g8], deltas[j], j, 4 * (j % 2) + g8 / 2), y[0]->qs + 16 * s + 4 * k);
        }
        STRATA_UNROLL for (int j = 0; j < 4; ++j) STRATA_UNROLL for (int q = 0; q < 2; ++q) {
          iq[j][q] = _mm256_dpwssd_epi32(iq[j][q], c[j][q], q ? _mm256_srli_epi32(scb[j], 4) : _mm256_and_si256(scb[j], _mm256_set1_epi32(0x0F)));
          STRATA_KEEP(iq[j][q]);
        }
      }
      acc[0] = iq1_accumulate(iq, B, *y[0], acc[0]);
      continue;
    }
#endif
    STRATA_UNROLL for (int h = 0; h < 2; ++h) STRATA_UNROLL for (int j = 0; j < 4; ++j) {
      // Values 128h + 32j + 4 g8 + i (vector g8 of codes bits 2j): 8-value group 16h + 4j + g8 / 2,
      // whose delta is bit 4 (j % 2) + g8 / 2 of byte 2h + j / 2 of the row's plus word.
      const __m256i deltas = iq1_deltas(plus, h, j);
      const __m256i scb = row_bytes_paired<false>(B.sc[4 * h + j]);
      STRATA_UNROLL for (int q = 0; q < 2; ++q) {  // sub-block 8h + 2j + q: groups g8 = 4q..4q+3
        const int s = 8 * h + 2 * j + q;
        const __m256i sc = q ? _mm256_srli_epi16(scb, 4) : _mm256_and_si256(scb, m0f);
        __m256i s16[NT];
        STRATA_UNROLL for (int k = 0; k < 4; ++k) {
          const __m256i u = iq1_codes(B, deltas, h, j, 4 * q + k);
          STRATA_UNROLL for (int t = 0; t < NT; ++t) {
            const __m256i p = _mm256_maddubs_epi16(u, bcast4(y[t]->qs + 16 * s + 4 * k));
            s16[t] = k ? _mm256_add_epi16(s16[t], p) : p;
            STRATA_KEEP(s16[t]);
          }
        }
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16[t], sc));
          STRATA_KEEP(isum[t]);
        }
      }
    }
    // The offset: 9 times the sub-scales (pairs 2p, 2p + 1 from the nibbles) times the 16-value sums.
    __m256i pairs[8];
    STRATA_UNROLL for (int p = 0; p < 8; ++p) {
      const __m256i scb = row_bytes_paired<false>(B.sc[p]);
      pairs[p] = _mm256_blend_epi16(_mm256_and_si256(scb, m0f), _mm256_srli_epi16(scb, 4), 0xAA);
    }
    const __m256 dw = _mm256_mul_ps(load_d8(B.d), _mm256_set1_ps(0.125f));
    STRATA_UNROLL for (int t = 0; t < NT; ++t) {
      const int16_t* bs = y[t]->bsums;
      __m256i off = _mm256_setzero_si256();
      STRATA_UNROLL for (int p = 0; p < 8; ++p)
        off = _mm256_add_epi32(off, _mm256_madd_epi16(pairs[p], bcast4(bs + 2 * p)));
      const __m256i total = _mm256_sub_epi32(isum[t], _mm256_add_epi32(_mm256_slli_epi32(off, 3), off));
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(y[t]->d)), _mm256_cvtepi32_ps(total), acc[t]);
    }
  }
  STRATA_UNROLL for (int t = 0; t < NT; ++t) _mm256_storeu_ps(out + 8 * t, acc[t]);
}

inline void decode_packed8_iq1(int n, const uint8_t* w, uint8_t* out) {
  const auto* b = reinterpret_cast<const BlockIQ1Codesx8*>(w);
  auto* db = reinterpret_cast<DecodedX8Block*>(out);
  const __m256i m0f = _mm256_set1_epi16(0x0F), nine = _mm256_set1_epi8(9);
  for (int ib = 0; ib < n / 256; ++ib) {
    const BlockIQ1Codesx8& B = b[ib];
    DecodedX8Block& D = db[ib];
    _mm256_storeu_ps(D.d, _mm256_mul_ps(load_d8(B.d), _mm256_set1_ps(0.125f)));
    for (int p = 0; p < 8; ++p) {
      const __m256i scb = row_bytes_paired<false>(B.sc[p]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(D.sc[2 * p]), _mm256_and_si256(scb, m0f));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(D.sc[2 * p + 1]), _mm256_srli_epi16(scb, 4));
    }
    const __m256i plus = load256(reinterpret_cast<const uint8_t*>(B.plus));
    STRATA_UNROLL for (int h = 0; h < 2; ++h) STRATA_UNROLL for (int j = 0; j < 4; ++j) {
      const __m256i deltas = iq1_deltas(plus, h, j);
      STRATA_UNROLL for (int g8 = 0; g8 < 8; ++g8)  // 8 (g + 1) + (delta + 1) - 9 = 8g + delta
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(D.v[32 * h + 8 * j + g8]), _mm256_sub_epi8(iq1_codes(B, deltas, h, j, g8), nine));
    }
    clear_mins(D);
  }
}

// Codes of group h + 16m of a Q6_K x8 block: the low 6 bits of q plane m at h (m < 3), or the
// top bit pairs of the three planes at h put together (m = 3; 16-bit shifts after the and, so no
// bit crosses into the next byte). Three ands and one code of three shifts, three ands and two ors
// per four groups, where nibble and top-bit planes took 17 operations, five of them shifts.
inline __m256i q6_k_codes(const BlockQ6_Kx8& B, int h, int m) {
  const uint8_t* q = B.q + 3 * h * 32;
  if (m < 3) return _mm256_and_si256(load256(q + 32 * m), _mm256_set1_epi8(0x3F));
  const __m256i top = _mm256_set1_epi8(static_cast<char>(0xC0));
  const __m256i p0 = _mm256_srli_epi16(_mm256_and_si256(load256(q), top), 6);
  const __m256i p1 = _mm256_srli_epi16(_mm256_and_si256(load256(q + 32), top), 4);
  const __m256i p2 = _mm256_srli_epi16(_mm256_and_si256(load256(q + 64), top), 2);
  return _mm256_or_si256(_mm256_or_si256(p0, p1), p2);
}

// Q6_K: codes up to 63, so two maddubs results (2 * 2*63*127 = 32004) sum exactly in 16 bits
// before the row's 8-bit group scale is applied.
template <int NT>
void gemm_q6_k(int n, const uint8_t* w, const uint8_t* xq, size_t xs, const Q8BlockInfo*, size_t, float* out) {
  const auto* b = reinterpret_cast<const BlockQ6_Kx8*>(w);
  __m256 acc[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int ib = 0; ib < n / 256; ++ib) {
    const BlockQ6_Kx8& B = b[ib];
    if (NT > 1 || kPrefetchOneToken) prefetch_ahead(b + ib);
    const BlockQ8_K* y[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(xq + xs * t) + ib;
    __m256i isum[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
#if STRATA_X8_VNNI
    if constexpr (NT == 1) {
      // One token (decode): each group's three planes are loaded once for all four of its codes
      // (q6_k_codes loads them again for the fourth), the top bit pairs go together in two
      // ternary-logic steps, and the codes are read in memory order (group h outer). The four
      // scales' chains run side by side; the integer sums are the same.
      const __m256i m6 = _mm256_set1_epi8(0x3F);
      for (int q = 0; q < 4; ++q) {  // groups 4q..4q+3 (+16m) share scale q + 4m
        __m256i s32[4];
        STRATA_UNROLL for (int m = 0; m < 4; ++m) s32[m] = _mm256_setzero_si256();
        STRATA_UNROLL for (int h = 4 * q; h < 4 * q + 4; ++h) {
          const uint8_t* qp = B.q + 3 * h * 32;
          __m256i p0 = load256(qp), p1 = load256(qp + 32), p2 = load256(qp + 64);
          STRATA_KEEP(p0);
          STRATA_KEEP(p1);
          STRATA_KEEP(p2);
          __m256i c[4];
          c[0] = _mm256_and_si256(p0, m6), c[1] = _mm256_and_si256(p1, m6), c[2] = _mm256_and_si256(p2, m6);
#if STRATA_X8_GFNI
          // Each plane's top bit pair moved to its place in the code by one affine step (output bit
          // i takes input bit j where byte 7 - i of the matrix is 1 << j; the other bits are 0),
          // then the three or-ed in one ternary-logic step (0xFE): four steps where shifts took six
          // (Matvec/Q6_K in L2, three alternated rounds: 58.8, 61.6, 63.1 -> 61.0, 64.1, 63.1).
          c[3] = _mm256_ternarylogic_epi32(
              _mm256_gf2p8affine_epi64_epi8(p0, _mm256_set1_epi64x(0x4080000000000000), 0),
              _mm256_gf2p8affine_epi64_epi8(p1, _mm256_set1_epi64x(0x0000408000000000), 0),
              _mm256_gf2p8affine_epi64_epi8(p2, _mm256_set1_epi64x(0x0000000040800000), 0), 0xFE);
#else
          // (a & mask) | b is ternary-logic function 0xEA of (a, mask, b)
          const __m256i top01 = _mm256_ternarylogic_epi32(_mm256_srli_epi16(p1, 4), _mm256_set1_epi8(0x0C),
                                                          _mm256_and_si256(_mm256_srli_epi16(p0, 6), _mm256_set1_epi8(0x03)), 0xEA);
          c[3] = _mm256_ternarylogic_epi32(_mm256_srli_epi16(p2, 2), _mm256_set1_epi8(0x30), top01, 0xEA);
#endif
          STRATA_UNROLL for (int m = 0; m < 4; ++m) {
            s32[m] = dpbusd_bcast4(s32[m], c[m], y[0]->qs + 4 * (h + 16 * m));
          }
        }
        STRATA_UNROLL for (int m = 0; m < 4; ++m) isum[0] = _mm256_add_epi32(isum[0], _mm256_mullo_epi32(s32[m], scales_i8(B.sc[q + 4 * m])));
      }
    } else
    // the four groups of one scale summed in 32 bits, then one multiply by the row's scale
    for (int q = 0; q < 4; ++q) {  // groups 4q..4q+3 (+16m) share scale q + 4m
      STRATA_UNROLL for (int m = 0; m < 4; ++m) {
        __m256i s32[NT];
        STRATA_UNROLL for (int t = 0; t < NT; ++t) s32[t] = _mm256_setzero_si256();
        STRATA_UNROLL for (int h = 4 * q; h < 4 * q + 4; ++h) {
          const __m256i c = q6_k_codes(B, h, m);
          const int G = h + 16 * m;
          STRATA_UNROLL for (int t = 0; t < NT; ++t) {
            s32[t] = dpbusd_bcast4(s32[t], c, y[t]->qs + 4 * G);
          }
        }
        const __m256i sc = scales_i8(B.sc[q + 4 * m]);
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(s32[t], sc));
          STRATA_KEEP(isum[t]);
        }
      }
    }
#else
    // One group's code register at a time, m outermost: the form that kept every code of a
    // block's four groups live took more registers than AVX2 has and spilled to the stack.
    STRATA_UNROLL for (int q = 0; q < 4; ++q) {  // groups 4q..4q+3 (+16m) share scale q + 4m
      STRATA_UNROLL for (int m = 0; m < 4; ++m) {
        const __m256i scv = row_bytes_paired<true>(B.sc[q + 4 * m]);
        STRATA_UNROLL for (int h = 4 * q; h < 4 * q + 4; h += 2) {
          __m256i c[2];  // groups h + 16m and h + 1 + 16m
          STRATA_UNROLL for (int k = 0; k < 2; ++k) c[k] = q6_k_codes(B, h + k, m);
          const int G = h + 16 * m;
          STRATA_UNROLL for (int t = 0; t < NT; ++t) {
            const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(c[0], bcast4(y[t]->qs + 4 * G)),
                                                 _mm256_maddubs_epi16(c[1], bcast4(y[t]->qs + 4 * G + 4)));
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16, scv));
            STRATA_KEEP(isum[t]);
          }
        }
      }
    }
#endif
    const __m256 dw = load_d8(B.d);
    STRATA_UNROLL for (int t = 0; t < NT; ++t) {
      const int16_t* bs = y[t]->bsums;
      __m256i off = _mm256_setzero_si256();
      for (int p = 0; p < 8; ++p)
        off = _mm256_add_epi32(off, _mm256_madd_epi16(row_bytes_two<true>(B.sc[2 * p]), bcast4(bs + 2 * p)));
      const __m256i total = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(off, 5));
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(y[t]->d)), _mm256_cvtepi32_ps(total), acc[t]);
    }
  }
  STRATA_UNROLL for (int t = 0; t < NT; ++t) _mm256_storeu_ps(out + 8 * t, acc[t]);
}

// IQ4_XS: the nibbles index the 16 IQ4_NL levels (signed, up to 127 in magnitude), so the sign
// goes onto the activations and each maddubs result (pairs below 2*127*128) is scaled by the
// row's sub-block scale through madd at once. The grown layouts of IQ3_XXS and IQ3_S have the same
// places with their own 16 values (levels and signs) and block factors (d / 4, d); their prefill
// decodes through IQ3_XXSValues / IQ3_SValues below, their decode kernel is gemm_iq3_offset.
constexpr int max_magnitude(const std::array<int8_t, 16>& v) {
  int m = 0;
  for (int8_t x : v) m = std::max(m, x < 0 ? -x : static_cast<int>(x));
  return m;
}
// Entry i of a 16-byte table (repeated in both lanes) for the low nibble i of each byte of idx;
// the other bits of idx are ignored. With VBMI (the bitalg table's build) one vpermb: it reads
// 5 bits of each index byte, and the 32-byte table is the 16 entries twice, so bit 4 picks
// between equal copies; vpshufb needs the high bits cleared first (a vpand per lookup).
// Matvec in L2 (MV_KIB=256 STRATA_REPACK_IQ=1, three alternated rounds): IQ3_XXS 61.0, 61.9,
// 61.5 -> 68.7, 69.0, 69.7, IQ3_S 61.7, 63.0, 62.5 -> 69.3, 69.4, 70.7, IQ4_XS 61.7, 61.7, 61.4
// -> 68.8, 69.1, 70.4 G values/s.
inline __m256i nibble_lookup(__m256i table, __m256i idx) {
#if STRATA_X8_VBMI
  return _mm256_permutexvar_epi8(idx, table);
#else
  return _mm256_shuffle_epi8(table, _mm256_and_si256(idx, _mm256_set1_epi8(0x0F)));
#endif
}
struct IQ4_XSValues {
  using Packed = BlockIQ4_XSx8;
  static const int8_t* values() { return kIq4nlValues; }
};
struct IQ3_XXSValues {
  using Packed = BlockIQ3Levelsx8;
  static const int8_t* values() { return kIq3xxsCodeValues.data(); }
  static constexpr float kD = 0.25f;
};
struct IQ3_SValues {
  using Packed = BlockIQ3Levelsx8;
  static const int8_t* values() { return kIq3sCodeValues.data(); }
};
template <typename L, int NT>
void gemm_nibble_values(int n, const uint8_t* w, const uint8_t* xq, size_t xs, const Q8BlockInfo*, size_t, float* out) {
  const auto* b = reinterpret_cast<const typename L::Packed*>(w);
  const __m128i t128 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(L::values()));
  const __m256i levels = _mm256_set_m128i(t128, t128);
  __m256 acc[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int ib = 0; ib < n / 256; ++ib) {
    const auto& B = b[ib];
    if (NT > 1 || kPrefetchOneToken) prefetch_ahead(b + ib);
    const BlockQ8_K* y[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(xq + xs * t) + ib;
    __m256i isum[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
#if STRATA_X8_VNNI
    // a sub-block's sums in 32 bits, then one multiply by the row's scale
    if constexpr (NT == 1) {
      // One token: the levels plus 128 (the signed levels xor 0x80) as unsigned codes, where
      // the form below takes each level's magnitude and signs the activations (four operations
      // fewer per 32 codes); each code vector loaded once, each activation word's broadcast
      // folded into its vpdpbusd (dpbusd_bcast4). The offset comes off after the block: 128 times
      // the sub-scaled 32-value activation sums (paired as gemm_q45_k's mins take them). The same
      // integer total.
      const __m256i ulevels = _mm256_xor_si256(levels, _mm256_set1_epi8(static_cast<char>(0x80)));
      for (int sub = 0; sub < 8; ++sub) {
        __m256i lo = _mm256_setzero_si256(), hi = lo;
        STRATA_UNROLL for (int g = 0; g < 4; ++g) {
          __m256i v = load256(B.qs + sub * 128 + g * 32);
          STRATA_KEEP(v);
          const __m256i u0 = nibble_lookup(ulevels, v);                         // values 4g..
          const __m256i u1 = nibble_lookup(ulevels, _mm256_srli_epi16(v, 4));  // 16+4g..
          lo = dpbusd_bcast4(lo, u0, y[0]->qs + 32 * sub + 4 * g);
          hi = dpbusd_bcast4(hi, u1, y[0]->qs + 32 * sub + 16 + 4 * g);
        }
        isum[0] = _mm256_add_epi32(isum[0], _mm256_mullo_epi32(_mm256_add_epi32(lo, hi), scales_i8(B.sc[sub])));
      }
      const __m256i bsp = bsum_pairs(y[0]->bsums);
      __m256i off = _mm256_setzero_si256();
      STRATA_UNROLL for (int p = 0; p < 4; ++p) off = _mm256_add_epi32(off, _mm256_madd_epi16(row_bytes_two<true>(B.sc[2 * p]), bsum_pair(bsp, p)));
      isum[0] = _mm256_sub_epi32(isum[0], _mm256_slli_epi32(off, 7));
    } else
    for (int sub = 0; sub < 8; ++sub) {
      __m256i s32[NT];
      STRATA_UNROLL for (int t = 0; t < NT; ++t) s32[t] = _mm256_setzero_si256();
      STRATA_UNROLL for (int g = 0; g < 4; ++g) {
        const __m256i v = load256(B.qs + sub * 128 + g * 32);
        // vpshufb here, not nibble_lookup: with several tokens vpermb measured slower (Matvec/IQ4_XS,
        // MV_TOKENS=4 MV_KIB=256, three alternated rounds: 82.5, 82.5, 81.9 -> 81.0, 80.8, 81.0 G values/s)
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        const __m256i c0 = _mm256_shuffle_epi8(levels, _mm256_and_si256(v, m4));                         // values 4g..
        const __m256i c1 = _mm256_shuffle_epi8(levels, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));  // 16+4g..
        const __m256i a0 = _mm256_sign_epi8(c0, c0), a1 = _mm256_sign_epi8(c1, c1);
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          const int8_t* x = y[t]->qs + 32 * sub + 4 * g;
          s32[t] = _mm256_dpbusd_epi32(s32[t], a0, _mm256_sign_epi8(bcast4(x), c0));
          s32[t] = _mm256_dpbusd_epi32(s32[t], a1, _mm256_sign_epi8(bcast4(x + 16), c1));
          STRATA_KEEP(s32[t]);
        }
      }
      const __m256i sc = scales_i8(B.sc[sub]);
      STRATA_UNROLL for (int t = 0; t < NT; ++t) {
        isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(s32[t], sc));
        STRATA_KEEP(isum[t]);
      }
    }
#else
    for (int sub = 0; sub < 8; ++sub) {
      const __m256i scv = scale_pairs_i8(B.sc[sub]);
      STRATA_UNROLL for (int g = 0; g < 4; ++g) {
        const __m256i v = load256(B.qs + sub * 128 + g * 32);
        const __m256i c0 = nibble_lookup(levels, v);                         // values 4g..
        const __m256i c1 = nibble_lookup(levels, _mm256_srli_epi16(v, 4));  // 16+4g..
        const __m256i a0 = _mm256_sign_epi8(c0, c0), a1 = _mm256_sign_epi8(c1, c1);
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          const int8_t* x = y[t]->qs + 32 * sub + 4 * g;
          const __m256i p0 = _mm256_maddubs_epi16(a0, _mm256_sign_epi8(bcast4(x), c0));
          const __m256i p1 = _mm256_maddubs_epi16(a1, _mm256_sign_epi8(bcast4(x + 16), c1));
          isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(p0, scv), _mm256_madd_epi16(p1, scv)));
          STRATA_KEEP(isum[t]);
        }
      }
    }
#endif
    __m256 dw = load_d8(B.d);
    if constexpr (requires { L::kD; }) dw = _mm256_mul_ps(dw, _mm256_set1_ps(L::kD));  // the file kernel's block factor
    STRATA_UNROLL for (int t = 0; t < NT; ++t)
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(y[t]->d)), _mm256_cvtepi32_ps(isum[t]), acc[t]);
  }
  STRATA_UNROLL for (int t = 0; t < NT; ++t) _mm256_storeu_ps(out + 8 * t, acc[t]);
}

// IQ3_XXS and IQ3_S grown, without VNNI: the table gives each nibble's value divided by kDiv plus
// kOffset, all positive (IQ3_XXS: its values are even, v / 2 + 32 in 1..63; IQ3_S: v + 16 in
// 1..31), so the codes go straight into maddubs as its unsigned operand with no sign steps (the
// signed kernel above takes two per 32 values). kPerSum maddubs results sum exactly in 16 bits
// before madd applies the sub-scale; the offset comes off after the block through the sub-scaled
// 32-value activation sums, and kDiv times the result is the file-layout kernel's integer total.
template <const std::array<int8_t, 16>& kValues, int kDiv, int kOffset>
constexpr std::array<int8_t, 16> offset_codes() {
  std::array<int8_t, 16> t{};
  for (int c = 0; c < 16; ++c) {
    if (kValues[c] % kDiv != 0 || kValues[c] / kDiv + kOffset < 0) throw "values not divisible or below the offset";
    t[c] = static_cast<int8_t>(kValues[c] / kDiv + kOffset);
  }
  return t;
}
// D, the values' factor, is 1 / DInv (a power of two: exact); an integer, since a float template
// argument is C++20 that not every compiler takes (Clang 14 does not).
template <const std::array<int8_t, 16>& kValues, int Div, int Offset, int DInv>
struct Iq3OffsetCodes {
  using Packed = BlockIQ3Levelsx8;
  static constexpr std::array<int8_t, 16> kCodes = offset_codes<kValues, Div, Offset>();
  static constexpr int kDiv = Div, kOffset = Offset;
  static constexpr float kD = 1.f / DInv;
  static constexpr int kPerSum = 32767 / (2 * max_magnitude(kCodes) * 128);
  static_assert(kPerSum == 2 || kPerSum == 4);
};
using IQ3_XXSOffset = Iq3OffsetCodes<kIq3xxsCodeValues, 2, 32, 4>;
using IQ3_SOffset = Iq3OffsetCodes<kIq3sCodeValues, 1, 16, 1>;
template <typename L, int NT>
void gemm_iq3_offset(int n, const uint8_t* w, const uint8_t* xq, size_t xs, const Q8BlockInfo*, size_t, float* out) {
  const auto* b = reinterpret_cast<const BlockIQ3Levelsx8*>(w);
  const __m128i t128 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(L::kCodes.data()));
  const __m256i codes = _mm256_set_m128i(t128, t128);
  __m256 acc[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int ib = 0; ib < n / 256; ++ib) {
    const BlockIQ3Levelsx8& B = b[ib];
    if (NT > 1 || kPrefetchOneToken) prefetch_ahead(b + ib);
    const BlockQ8_K* y[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(xq + xs * t) + ib;
    __m256i isum[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
#if STRATA_X8_VNNI
    // vpdpbusd sums a sub-block's products in 32 bits (two chains, the low and the high nibbles),
    // then one vpmulld by the sub-scale: the integer of the 16-bit sums and madds below. With one
    // token, each code vector is loaded once for both nibbles. Activation broadcasts are folded
    // into the vpdpbusd (dpbusd_bcast4).
    for (int sub = 0; sub < 8; ++sub) {
      const __m256i sc = scales_i8(B.sc[sub]);
      __m256i lo[NT], hi[NT];
      STRATA_UNROLL for (int g = 0; g < 4; ++g) {
        __m256i v = load256(B.qs + sub * 128 + g * 32);
        if constexpr (NT == 1) STRATA_KEEP(v);
        const __m256i u0 = nibble_lookup(codes, v);                         // values 4g..
        const __m256i u1 = nibble_lookup(codes, _mm256_srli_epi16(v, 4));  // 16+4g..
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          const int8_t* x = y[t]->qs + 32 * sub + 4 * g;
          lo[t] = dpbusd_bcast4(g ? lo[t] : _mm256_setzero_si256(), u0, x);
          hi[t] = dpbusd_bcast4(g ? hi[t] : _mm256_setzero_si256(), u1, x + 16);
        }
      }
      STRATA_UNROLL for (int t = 0; t < NT; ++t) {
        isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(_mm256_add_epi32(lo[t], hi[t]), sc));
        STRATA_KEEP(isum[t]);
      }
    }
#else
    constexpr int kG = L::kPerSum / 2;  // 32-byte vectors (two maddubs each) per 16-bit sum
    for (int sub = 0; sub < 8; ++sub) {
      const __m256i scv = row_bytes_paired<true>(B.sc[sub]);
      STRATA_UNROLL for (int g0 = 0; g0 < 4; g0 += kG) {
        __m256i s16[NT];
        STRATA_UNROLL for (int g = g0; g < g0 + kG; ++g) {
          const __m256i v = load256(B.qs + sub * 128 + g * 32);
          const __m256i u0 = nibble_lookup(codes, v);                         // values 4g..
          const __m256i u1 = nibble_lookup(codes, _mm256_srli_epi16(v, 4));  // 16+4g..
          STRATA_UNROLL for (int t = 0; t < NT; ++t) {
            const int8_t* x = y[t]->qs + 32 * sub + 4 * g;
            const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(u0, bcast4(x)), _mm256_maddubs_epi16(u1, bcast4(x + 16)));
            s16[t] = g > g0 ? _mm256_add_epi16(s16[t], p) : p;
            STRATA_KEEP(s16[t]);
          }
        }
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16[t], scv));
          STRATA_KEEP(isum[t]);
        }
      }
    }
#endif
    __m256i pairs[4];
    STRATA_UNROLL for (int p = 0; p < 4; ++p) pairs[p] = row_bytes_two<true>(B.sc[2 * p]);
    const __m256 dw = _mm256_mul_ps(load_d8(B.d), _mm256_set1_ps(L::kD));
    STRATA_UNROLL for (int t = 0; t < NT; ++t) {
      const __m256i bsp = bsum_pairs(y[t]->bsums);
      __m256i off = _mm256_setzero_si256();
      STRATA_UNROLL for (int p = 0; p < 4; ++p) off = _mm256_add_epi32(off, _mm256_madd_epi16(pairs[p], bsum_pair(bsp, p)));
      __m256i total = _mm256_sub_epi32(isum[t], _mm256_mullo_epi32(off, _mm256_set1_epi32(L::kOffset)));
      if constexpr (L::kDiv == 2) total = _mm256_add_epi32(total, total);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(y[t]->d)), _mm256_cvtepi32_ps(total), acc[t]);
    }
  }
  STRATA_UNROLL for (int t = 0; t < NT; ++t) _mm256_storeu_ps(out + 8 * t, acc[t]);
}

// IQ3_XXS, IQ3_S, and IQ4_XS (L: their values, layout and block factor).
template <typename L>
void decode_packed8_nibble_values(int n, const uint8_t* w, uint8_t* out) {
  const auto* b = reinterpret_cast<const typename L::Packed*>(w);
  auto* db = reinterpret_cast<DecodedX8Block*>(out);
  const __m128i l128 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(L::values()));
  const __m256i values = _mm256_set_m128i(l128, l128);
  for (int ib = 0; ib < n / 256; ++ib) {
    const auto& B = b[ib];
    DecodedX8Block& D = db[ib];
    __m256 dw = load_d8(B.d);
    if constexpr (requires { L::kD; }) dw = _mm256_mul_ps(dw, _mm256_set1_ps(L::kD));
    _mm256_storeu_ps(D.d, dw);
    for (int sub = 0; sub < 8; ++sub) {
      const __m256i sc = row_bytes_paired<true>(B.sc[sub]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(D.sc[2 * sub]), sc);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(D.sc[2 * sub + 1]), sc);
      for (int g = 0; g < 4; ++g) {  // values 32sub + 4g.. (low nibbles) and 32sub + 16 + 4g.. (high)
        const __m256i v = load256(B.qs + sub * 128 + g * 32);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(D.v[8 * sub + g]), nibble_lookup(values, v));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(D.v[8 * sub + 4 + g]),
                            nibble_lookup(values, _mm256_srli_epi16(v, 4)));
      }
    }
    clear_mins(D);
  }
}

// Packed Q5_K (or Q4_K, the same without fifth bits) as DecodedX8Block: values are the codes
// (0..31), each 32-value scale and min twice (as 16-value sub-blocks). gemm_decoded_bands takes
// them with the K-quant min step (acc - dmin * dy * mins per block), which is gemm_q45_k's.
template <typename Packed>
void decode_packed8_q45_k(int n, const uint8_t* w, uint8_t* out) {
  const auto* b = reinterpret_cast<const Packed*>(w);
  auto* db = reinterpret_cast<DecodedX8Block*>(out);
  for (int ib = 0; ib < n / 256; ++ib) {
    const Packed& B = b[ib];
    DecodedX8Block& D = db[ib];
    _mm256_storeu_ps(D.d, load_d8(B.d));
    _mm256_storeu_ps(D.dmin, load_d8(B.dmin));
    for (int sub = 0; sub < 8; ++sub) {
      const __m256i sc = row_bytes_paired<false>(B.sc[sub]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(D.sc[2 * sub]), sc);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(D.sc[2 * sub + 1]), sc);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(D.mn[sub]), row_bytes_paired<false>(B.mn[sub]));
    }
    for (int j = 0; j < 4; ++j)
      for (int g = 0; g < 8; ++g) {  // values 64j + 4g.. (sub-block 2j) and 64j + 32 + 4g.. (2j + 1)
        __m256i lo, hi;
        q45_k_codes(B, j, g, lo, hi);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(D.v[16 * j + g]), lo);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(D.v[16 * j + 8 + g]), hi);
      }
  }
}

// Packed Q6_K as DecodedX8Block: values are the codes minus 32 (the offset gemm_q6_k takes out
// through the code sums: the same integer total).
inline void decode_packed8_q6_k(int n, const uint8_t* w, uint8_t* out) {
  const auto* b = reinterpret_cast<const BlockQ6_Kx8*>(w);
  auto* db = reinterpret_cast<DecodedX8Block*>(out);
  const __m256i k32 = _mm256_set1_epi8(32);
  for (int ib = 0; ib < n / 256; ++ib) {
    const BlockQ6_Kx8& B = b[ib];
    DecodedX8Block& D = db[ib];
    _mm256_storeu_ps(D.d, load_d8(B.d));
    for (int s = 0; s < 16; ++s) _mm256_storeu_si256(reinterpret_cast<__m256i*>(D.sc[s]), row_bytes_paired<true>(B.sc[s]));
    for (int h = 0; h < 16; ++h)
      for (int m = 0; m < 4; ++m)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(D.v[h + 16 * m]), _mm256_sub_epi8(q6_k_codes(B, h, m), k32));
    clear_mins(D);
  }
}

// ---- F16, BF16 on f32 activations: one chain per output, G groups share each broadcast ----
struct WidenF16 {
  static __m256 load(const uint16_t* p) { return load_cvtph(p); }
};
struct WidenBF16 {
  static __m256 load(const uint16_t* p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
};

// The groups of a call are gs (packed_call_stride: 16) bytes apart in their block, column k of
// each at kHalfColumnHalves * k.
template <class W, int G, int NT>
void half_groups(int n, const uint8_t* w, size_t gs, const uint8_t* xq, size_t xs, const Q8BlockInfo*, size_t,
                 float* out, size_t os) {
  const uint16_t* v[G];
  STRATA_UNROLL for (int g = 0; g < G; ++g) v[g] = reinterpret_cast<const uint16_t*>(w + gs * g);
  const float* x[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) x[t] = reinterpret_cast<const float*>(xq + xs * t);
  __m256 acc[G][NT];
  STRATA_UNROLL for (int g = 0; g < G; ++g) STRATA_UNROLL for (int t = 0; t < NT; ++t) acc[g][t] = _mm256_setzero_ps();
  for (int k = 0; k < n; ++k) {
    __m256 wv[G];
    STRATA_UNROLL for (int g = 0; g < G; ++g) wv[g] = W::load(v[g] + kHalfColumnHalves * k);
    STRATA_UNROLL for (int t = 0; t < NT; ++t) {
      const __m256 b = _mm256_broadcast_ss(x[t] + k);
      STRATA_UNROLL for (int g = 0; g < G; ++g) acc[g][t] = _mm256_fmadd_ps(wv[g], b, acc[g][t]);
    }
  }
  STRATA_UNROLL for (int g = 0; g < G; ++g) STRATA_UNROLL for (int t = 0; t < NT; ++t)
    _mm256_storeu_ps(out + os * t + 8 * g, acc[g][t]);
}

template <class W, int NT>
void gemm_half(int n, const uint8_t* w, const uint8_t* xq, size_t xs, const Q8BlockInfo* xi, size_t xis, float* out) {
  half_groups<W, 1, NT>(n, w, 0, xq, xs, xi, xis, out, 8);
}

// ---- F16, BF16 prefill on many tokens (GemmHalfWideFn) ----
// The groups' weights in the chunk of columns are widened to f32 once into a buffer that stays
// in L1, then every token passes through it, NT at a time: per column, NV weight
// vectors and NT broadcasts feed NV * NT multiply-adds with no conversion in the loop
// (half_groups converts for every 4 tokens, and its conversions share the multiply-add ports).
// Each output's fma chain runs over the columns in order, carried in y from chunk to chunk, so
// the bits are gemm_x8's. L is the lane set: L::V holds L::kRows rows (one group for AVX2, two
// for AVX-512), load/store_rows move the first n of them.
//
// Lines [line, end) of the next groups' chunk, line l at base + 64 l (one column of the block
// each): fetched into L2 one at a time while a tile computes.
struct HalfWidePrefetch {
  const char* base;
  int line, end;
  void one() {
    if (line >= end) return;
    _mm_prefetch(base + 64 * line, _MM_HINT_T1);
    ++line;
  }
};

// kWiden: the chunk's first tile takes its weight vectors from the packed groups themselves
// (src[g]: group g's halves from the chunk's first column on; zeros past the call's groups, so
// that a register's second group needs no test), widens them on the way and stores
// them to `wide` for the tiles after it, so the conversions and the reads from memory overlap
// the multiply-adds (a loop of its own that widened the chunk first had 7 % of an F16 prompt's
// samples, most of it waiting on the reads).
template <class L, class W, int NV, int NT, bool kWiden>
void half_wide_tile(int kc, float* wide, const uint16_t* const* src, const float* x, size_t xs, float* y, size_t ys,
                    bool first, int tail, HalfWidePrefetch& pf) {
  using V = typename L::V;
  V acc[NV][NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) STRATA_UNROLL for (int p = 0; p < NV; ++p)
    acc[p][t] = first ? L::zero() : L::load_rows(y + ys * t + L::kRows * p, p == NV - 1 ? tail : L::kRows);
  const float* xt[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) xt[t] = x + xs * t;
  const auto column = [&](int k) {
    V wv[NV];
    STRATA_UNROLL for (int p = 0; p < NV; ++p) {
      float* at = wide + (k * NV + p) * L::kRows;
      if constexpr (kWiden) {
        wv[p] = L::template widen<W>(src, p, k);
        L::store(at, wv[p]);
      } else {
        wv[p] = L::load(at);
      }
    }
    STRATA_UNROLL for (int t = 0; t < NT; ++t) {
      const V b = L::bcast(xt[t] + k);
      STRATA_UNROLL for (int p = 0; p < NV; ++p) acc[p][t] = L::fma(wv[p], b, acc[p][t]);
    }
  };
  int k = 0;
  for (; k + 4 <= kc; k += 4) {  // unrolled by 4 columns: the loop's own uops share the ports
    pf.one();
    STRATA_UNROLL for (int u = 0; u < 4; ++u) column(k + u);
  }
  for (; k < kc; ++k) column(k);
  STRATA_UNROLL for (int t = 0; t < NT; ++t) STRATA_UNROLL for (int p = 0; p < NV; ++p)
    L::store_rows(y + ys * t + L::kRows * p, acc[p][t], p == NV - 1 ? tail : L::kRows);
}

// Up to 2 * L::kRows / 8 groups per call.
template <class L, class W, int NT>
void gemm_half_wide(int k0, int kc, const uint8_t* w, size_t gs, int ngroups, const uint8_t* next, const float* x,
                    size_t xs, int ntok, float* y, size_t ys) {
  using Tile = void (*)(int, float*, const uint16_t* const*, const float*, size_t, float*, size_t, bool, int,
                        HalfWidePrefetch&);
  static constexpr auto kTiles = []<int... I>(std::integer_sequence<int, I...>) {
    return std::array<std::array<std::array<Tile, NT>, 2>, 2>{
        {{{{half_wide_tile<L, W, 1, I + 1, false>...}, {half_wide_tile<L, W, 2, I + 1, false>...}}},
         {{{half_wide_tile<L, W, 1, I + 1, true>...}, {half_wide_tile<L, W, 2, I + 1, true>...}}}}};
  }(std::make_integer_sequence<int, NT>{});
  alignas(64) float wide[kHalfWideChunk * 2 * L::kRows];
  const int rows = 8 * ngroups, nv = (rows + L::kRows - 1) / L::kRows;
  const int tail = rows - (nv - 1) * L::kRows;
  static constexpr uint16_t kZeroHalves[kHalfColumnHalves * kHalfWideChunk] = {};  // 0 as F16 and as BF16
  const uint16_t* src[2 * L::kRows / 8];
  for (int g = 0; g < 2 * L::kRows / 8; ++g)
    src[g] = g < ngroups ? reinterpret_cast<const uint16_t*>(w + gs * g) + kHalfColumnHalves * k0 : kZeroHalves;
  // The next block's chunk (next) is fetched into L2 during the tiles, a line every 4 columns:
  // the chunk is a stretch of its own, which the hardware prefetcher does not run ahead into, and
  // a burst of prefetches stalled on the line fill buffers the tiles need.
  HalfWidePrefetch pf{next ? reinterpret_cast<const char*>(next) + 2 * kHalfColumnHalves * k0 : nullptr, 0,
                      next ? kc : 0};
  for (int t = 0; t < ntok; t += NT)
    kTiles[t == 0][nv - 1][std::min(NT, ntok - t) - 1](kc, wide, src, x + xs * t + k0, xs, y + ys * t, ys, k0 == 0, tail,
                                                       pf);
  while (pf.line < pf.end) pf.one();
}

struct LanesAvx2 {
  using V = __m256;
  static constexpr int kRows = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_load_ps(p); }
  static void store(float* p, V v) { _mm256_store_ps(p, v); }
  // Register p of column k: group p.
  template <class W>
  static V widen(const uint16_t* const* src, int p, int k) { return W::load(src[p] + kHalfColumnHalves * k); }
  static V bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V load_rows(const float* p, int) { return _mm256_loadu_ps(p); }
  static void store_rows(float* p, V v, int) { _mm256_storeu_ps(p, v); }
};

// A GemmGroupsFn over K<G, NT>::f for G up to MaxG.
template <template <int, int> class K, int MaxG>
struct GroupsDispatch {
  static_assert(MaxG <= kMaxGroupsPerCall && kPackMaxTokens == 4);
  using Fn = void (*)(int, const uint8_t*, size_t, const uint8_t*, size_t, const Q8BlockInfo*, size_t, float*, size_t);
  template <int G>
  static constexpr std::array<Fn, 4> row() {
    if constexpr (G <= MaxG) return {K<G, 1>::f, K<G, 2>::f, K<G, 3>::f, K<G, 4>::f};
    else return {};
  }
  static void run(int n, const uint8_t* w, size_t gs, int ngroups, const uint8_t* xq, size_t xs, const Q8BlockInfo* xi,
                  size_t xis, int ntok, float* out, size_t os) {
    static constexpr std::array<std::array<Fn, 4>, kMaxGroupsPerCall> kFns = {row<1>(), row<2>(), row<3>(), row<4>()};
    kFns[ngroups - 1][ntok - 1](n, w, gs, xq, xs, xi, xis, out, os);
  }
};

template <template <int> class K>
struct Dispatch {
  static void run(int n, const uint8_t* w, const uint8_t* xq, size_t xs, const Q8BlockInfo* xsum, size_t xss, int ntok,
                  float* out) {
    switch (ntok) {
      case 1: K<1>::f(n, w, xq, xs, xsum, xss, out); break;
      case 2: K<2>::f(n, w, xq, xs, xsum, xss, out); break;
      case 3: K<3>::f(n, w, xq, xs, xsum, xss, out); break;
      default: K<4>::f(n, w, xq, xs, xsum, xss, out); break;
    }
  }
};
template <int NT> struct KQ8_0 { static constexpr auto f = gemm_signed32<Q8_0x8, NT>; };
template <int NT> struct KIQ4_NL { static constexpr auto f = gemm_signed32<IQ4_NLx8, NT>; };
template <int NT> struct KQ4_1 { static constexpr auto f = gemm_unsigned32<Q4_1x8, NT>; };
template <int NT> struct KQ5_1 { static constexpr auto f = gemm_unsigned32<Q5_1x8, NT>; };
template <int NT> struct KQ4_0 { static constexpr auto f = gemm_unsigned32<Q4_0x8, NT>; };
template <int G, int NT> struct GQ4_0 { static constexpr auto f = unsigned32_groups<Q4_0x8, G, NT>; };
template <int G, int NT> struct GQ5_0 { static constexpr auto f = unsigned32_groups<Q5_0x8, G, NT>; };
// AVX2 F16/BF16 groups: a block's 4 groups in one call for 1 or 2 tokens (4 or 8 accumulators:
// two groups left one token's 2 chains waiting on the fma latency, 14.3 against three groups'
// 18.7 G values/s in cache), two calls of 2 groups for 3 or 4 (16 accumulators would not fit
// in the 16 registers). Only those kernels are instantiated.
template <template <int, int> class K>
struct HalfGroupsAvx2 {
  static_assert(kPackMaxTokens == 4);
  using Fn = typename GroupsDispatch<K, 4>::Fn;
  static void run(int n, const uint8_t* w, size_t gs, int ngroups, const uint8_t* xq, size_t xs, const Q8BlockInfo* xi,
                  size_t xis, int ntok, float* out, size_t os) {
    static constexpr Fn kFewTokens[4][2] = {
        {K<1, 1>::f, K<1, 2>::f}, {K<2, 1>::f, K<2, 2>::f}, {K<3, 1>::f, K<3, 2>::f}, {K<4, 1>::f, K<4, 2>::f}};
    static constexpr Fn kMoreTokens[2][2] = {{K<1, 3>::f, K<1, 4>::f}, {K<2, 3>::f, K<2, 4>::f}};
    if (ntok <= 2) return kFewTokens[ngroups - 1][ntok - 1](n, w, gs, xq, xs, xi, xis, out, os);
    for (int g = 0; g < ngroups; g += 2)
      kMoreTokens[std::min(2, ngroups - g) - 1][ntok - 3](n, w + gs * g, gs, xq, xs, xi, xis, out + 8 * g, os);
  }
};
template <int NT> struct KF16 { static constexpr auto f = gemm_half<WidenF16, NT>; };
template <int NT> struct KBF16 { static constexpr auto f = gemm_half<WidenBF16, NT>; };
template <int G, int NT> struct GF16 { static constexpr auto f = half_groups<WidenF16, G, NT>; };
template <int G, int NT> struct GBF16 { static constexpr auto f = half_groups<WidenBF16, G, NT>; };
template <int NT> struct KQ5_0 { static constexpr auto f = gemm_unsigned32<Q5_0x8, NT>; };
template <int NT> struct KQ2_K { static constexpr auto f = gemm_q23_k<BlockQ2_Kx8, NT>; };
template <int NT> struct KQ3_K { static constexpr auto f = gemm_q23_k<BlockQ3_Kx8, NT>; };
template <int NT> struct KTQ2_0 { static constexpr auto f = gemm_tq2_0<NT>; };
template <int NT> struct KQ4_K { static constexpr auto f = gemm_q45_k<BlockQ4_Kx8, NT>; };
template <int NT> struct KQ5_K { static constexpr auto f = gemm_q45_k<BlockQ5_Kx8, NT>; };
template <int NT> struct KQ6_K { static constexpr auto f = gemm_q6_k<NT>; };
template <int NT> struct KIQ4_XS { static constexpr auto f = gemm_nibble_values<IQ4_XSValues, NT>; };
template <int NT> struct KIQ2 { static constexpr auto f = gemm_iq2_levels<BlockIQ2Levelsx8, NT>; };
template <int NT> struct KIQ2_XXS { static constexpr auto f = gemm_iq2_levels<BlockIQ2XXSLevelsx8, NT>; };
template <int NT> struct KIQ1 { static constexpr auto f = gemm_iq1_codes<NT>; };
template <int NT> struct KIQ3_XXSOffset { static constexpr auto f = gemm_iq3_offset<IQ3_XXSOffset, NT>; };
template <int NT> struct KIQ3_SOffset { static constexpr auto f = gemm_iq3_offset<IQ3_SOffset, NT>; };

}  // namespace
}  // namespace strata
