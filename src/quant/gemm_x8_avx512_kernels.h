// The 8-row packed kernels (gemm_x8_simd.h) for AVX-512 VNNI: the integer formats' byte dot
// products go through vpdpbusd (256-bit, AVX512VL). The F16 and BF16 kernels, and the group
// counts, stay those of the AVX2 table this one is copied from. Built twice, everything in an
// unnamed namespace: gemm_x8_avx512.cpp for the AVX-512 table, gemm_x8_avx512_vbmi.cpp with VBMI
// as well for the bitalg table (nibble_lookup's vpermb).
#pragma once
#include "quant/gemm_x8_simd.h"

namespace strata {
namespace {

// acc + dpbusd(u, the 4 signed bytes at p in every lane), the broadcast folded in ({1to16}),
// as dpbusd_bcast4 for 256 bits. Matmul (128 tokens, one thread, three alternated rounds, G
// multiply-adds/s) Q4_K 151.9, 155.6, 157.6 -> 164.5, 162.4, 160.9; Q4_0 152.5, 159.5, 156.9 ->
// 165.2, 162.5, 162.8; the other formats within 5 % (Q8_0 149.7, 160.6, 153.6 -> 162.3, 160.9,
// 153.5).
inline __m512i dpbusd_bcast16(__m512i acc, __m512i u, const void* p) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*static_cast<const int32_t*>(p)));
  return acc;
}

// Two packed groups in one 512-bit register: group 2p in the low 8 lanes, 2p + 1 in the high 8,
// so their outputs, adjacent in `out`, leave with one store. Each lane computes what the 256-bit
// kernels compute for its row, in the same order, so the bits are the same.
inline __m512i join256(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
inline __m256i join128(const void* lo, const void* hi) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(lo))),
                                 _mm_loadu_si128(static_cast<const __m128i*>(hi)), 1);
}
inline __m512 load_d16(const uint16_t* d0, const uint16_t* d1) { return _mm512_cvtph_ps(join128(d0, d1)); }

// ---- F16, BF16: G groups = G / 2 registers of two groups, plus one 256-bit group if G is odd ----
// The groups of a call are adjacent in their block (gemm_x8.h), so a register's two groups are one
// 32-byte load: load(p) widens the 16 halves from p on.
struct WidenF16x16 {
  static __m512 load(const uint16_t* p) { return _mm512_cvtph_ps(load256(reinterpret_cast<const uint8_t*>(p))); }
  static __m256 load8(const uint16_t* a) { return WidenF16::load(a); }
};
struct WidenBF16x16 {
  static __m512 load(const uint16_t* p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(load256(reinterpret_cast<const uint8_t*>(p))), 16));
  }
  static __m256 load8(const uint16_t* a) { return WidenBF16::load(a); }
};

// Two groups per register for gemm_half_wide; an odd last group in the low half.
struct LanesAvx512 {
  using V = __m512;
  static constexpr int kRows = 16;
  static __mmask16 first(int n) { return static_cast<__mmask16>((1u << n) - 1); }
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_load_ps(p); }
  static void store(float* p, V v) { _mm512_store_ps(p, v); }
  // Register p of column k: groups 2p and 2p + 1.
  template <class W>
  static V widen(const uint16_t* const* src, int p, int k) {
    const __m256 lo = W::load(src[2 * p] + kHalfColumnHalves * k), hi = W::load(src[2 * p + 1] + kHalfColumnHalves * k);
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
  }
  static V bcast(const float* p) { return _mm512_set1_ps(*p); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V load_rows(const float* p, int n) { return _mm512_maskz_loadu_ps(first(n), p); }
  static void store_rows(float* p, V v, int n) { _mm512_mask_storeu_ps(p, first(n), v); }
};

// Software prefetch distances of the AVX-512 group kernels (see prefetch_pair_ahead).
constexpr size_t kPairPrefetchGroupsMax = 16384, kPairPrefetchInGroup = 2048;

// F16/BF16 decode: the block's stream is fetched 2 KiB ahead, a line every column (a line of
// each group every 4 columns before the block layout; none before that: bench -p 0 -n 32 on
// q2-F16 27.7-28.0 -> 29.2-29.6 tok/s, three alternated rounds). kPrefetch false: none, for AMD
// hosts (amd_decode_streams). Group g of the call at w + 16 g (packed_call_stride).
template <class W, int G, int NT, bool kPrefetch = true>
void half_groups_512(int n, const uint8_t* w, size_t, const uint8_t* xq, size_t xs, const Q8BlockInfo*, size_t,
                     float* out, size_t os) {
  constexpr int P = G / 2, R = G % 2, PA = P > 0 ? P : 1;
  const uint16_t* v = reinterpret_cast<const uint16_t*>(w);
  const float* x[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) x[t] = reinterpret_cast<const float*>(xq + xs * t);
  __m512 acc[PA][NT];
  __m256 acc1[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) {
    STRATA_UNROLL for (int p = 0; p < P; ++p) acc[p][t] = _mm512_setzero_ps();
    acc1[t] = _mm256_setzero_ps();
  }
  for (int k = 0; k < n; ++k) {
    const uint16_t* col = v + kHalfColumnHalves * k;
    if (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(col) + kPairPrefetchInGroup, _MM_HINT_T0);
    __m512 wv[PA];
    STRATA_UNROLL for (int p = 0; p < P; ++p) wv[p] = W::load(col + 16 * p);
    __m256 w1 = _mm256_setzero_ps();
    if constexpr (R) w1 = W::load8(col + 8 * (G - 1));
    STRATA_UNROLL for (int t = 0; t < NT; ++t) {
      const __m512 b = _mm512_set1_ps(x[t][k]);
      STRATA_UNROLL for (int p = 0; p < P; ++p) acc[p][t] = _mm512_fmadd_ps(wv[p], b, acc[p][t]);
      if constexpr (R) acc1[t] = _mm256_fmadd_ps(w1, _mm512_castps512_ps256(b), acc1[t]);
    }
  }
  STRATA_UNROLL for (int t = 0; t < NT; ++t) {
    STRATA_UNROLL for (int p = 0; p < P; ++p) _mm512_storeu_ps(out + os * t + 16 * p, acc[p][t]);
    if constexpr (R) _mm256_storeu_ps(out + os * t + 8 * (G - 1), acc1[t]);
  }
}

// The pair kernels' prefetch, for block b of the call's first group (the second is gs bytes on).
// The caller's next call takes the two groups after these, so where they are short (the
// q2/q3 shapes' 896- and 1024-wide rows: 4-8 KiB per group), the lines fetched are the same
// block of those two groups: each call's loads stay on four streams 2 gs apart, which the L1
// fill buffers keep up with. Longer groups prefetch 2 KiB ahead in their own stream: 4 KiB
// ahead, as the other kernels go, kept more lines in flight to memory than the fill buffers
// hold on the AVX-512 host measured (the README's "Weights repacked at load").
// The 256-value blocks (11-28 lines per group) are fetched in kParts slices, one per step of the
// kernel's loop over the block (part 0..kParts-1), not in one burst at the block's start: a burst
// of 22-56 prefetches waits on the fill buffers and holds the block's compute behind it. Zen 4,
// one thread, Matvec/Q4_K from memory (MV_KIB=262144 MV_COLS=1024, best of 3, two rounds):
// 9.34, 9.35 -> 12.03, 12.15 GB/s with 4 slices (8, 16 and 32 no better). (AMD hosts now decode
// one group per call, amd_decode_streams; there the pairs run prompts.)
template <class Block, int kParts = 1>
inline void prefetch_pair_ahead(const Block* b, size_t gs, int part = 0) {
  constexpr size_t kLines = (sizeof(Block) + 63) / 64, kPer = (kLines + kParts - 1) / kParts;
  const char* p = reinterpret_cast<const char*>(b);
  const size_t ahead = 2 * gs <= kPairPrefetchGroupsMax ? 2 * gs : kPairPrefetchInGroup;
  for (size_t l = kPer * part; l < kPer * (part + 1) && l < kLines; ++l) {
    _mm_prefetch(p + ahead + 64 * l, _MM_HINT_T0);
    _mm_prefetch(p + gs + ahead + 64 * l, _MM_HINT_T0);
  }
}

// ---- Q4_0, Q5_0: two groups per call in one register ----
// Unsigned codes of 4-value group g (0..7) of two Q4_0 / Q5_0 x8 blocks (nibble_group's layout).
inline __m512i nibble_group2(const uint8_t* qa, const uint8_t* qb, int g) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i v = join256(load256(qa + 32 * (g % 4)), load256(qb + 32 * (g % 4)));
  return g < 4 ? _mm512_and_si512(v, m4) : _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
}
struct Q4_0x16 {
  using Block = BlockQ4_0x8;
  static constexpr int kShift = 3;
  static __m512i code(const Block& a, const Block& b, int g) { return nibble_group2(a.qs, b.qs, g); }
};
struct Q5_0x16 {
  using Block = BlockQ5_0x8;
  static constexpr int kShift = 4;
  static __m512i code(const Block& a, const Block& b, int g) {
    const __m512i h = join256(load256(a.qh), load256(b.qh));
    // bit g of each qh byte to bit 4, as bit_to_4 does
    const __m512i h4 = g <= 4 ? _mm512_slli_epi16(h, 4 - g) : _mm512_srli_epi16(h, g - 4);
    return _mm512_or_si512(nibble_group2(a.qs, b.qs, g), _mm512_and_si512(h4, _mm512_set1_epi8(0x10)));
  }
};
// Q4_1: Q4_0's codes, its offsets m a second fma per block. (Q5_1 measured no faster in pairs,
// Matvec/Q5_1 medians of five alternated rounds 33.5 -> 33.1 G values/s, so it keeps one group per call.)
struct Q4_1x16 {
  using Block = BlockQ4_1x8;
  static __m512i code(const Block& a, const Block& b, int g) { return nibble_group2(a.qs, b.qs, g); }
};
// IQ4_NL: its levels (IQ4_XS shares them) plus 128, 1..241, as unsigned codes, so it takes this
// kernel's path, 128 times each block's activation sum off the block's sum: the integer the
// signed kernel (gemm_signed32) forms, so the same bits, without a magnitude, a sign mask and a
// negation of the activations per vector and token. (kIq4nlValues is constant-initialized, so
// this dynamic initializer reads it filled.)
inline const std::array<uint8_t, 16> kIq4LevelsPlus128 = [] {
  std::array<uint8_t, 16> t{};
  for (int c = 0; c < 16; ++c) t[c] = static_cast<uint8_t>(kIq4nlValues[c] + 128);
  return t;
}();
struct IQ4_NLx16 {
  using Block = BlockIQ4_NLx8;
  static constexpr int kShift = 7;
  static __m512i code(const Block& a, const Block& b, int g) {
    const __m512i levels = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4LevelsPlus128.data())));
    return _mm512_shuffle_epi8(levels, nibble_group2(a.qs, b.qs, g));
  }
};

template <typename F, int NT>
void unsigned32_pair_512(int n, const uint8_t* w, size_t gs, const uint8_t* xq, size_t xs, const Q8BlockInfo* xsum,
                         size_t xss, float* out, size_t os) {
  const auto* b0 = reinterpret_cast<const typename F::Block*>(w);
  const auto* b1 = reinterpret_cast<const typename F::Block*>(w + gs);
  __m512 acc[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int ib = 0; ib < n / 32; ++ib) {
    prefetch_pair_ahead(b0 + ib, gs);
    const BlockQ8_0* y[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) y[t] = reinterpret_cast<const BlockQ8_0*>(xq + xs * t) + ib;
    __m512i s32[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) s32[t] = _mm512_setzero_si512();
    STRATA_UNROLL for (int g = 0; g < 8; ++g) {
      const __m512i c = F::code(b0[ib], b1[ib], g);
      STRATA_UNROLL for (int t = 0; t < NT; ++t) {
        s32[t] = dpbusd_bcast16(s32[t], c, y[t]->qs + 4 * g);
      }
    }
    const __m512 dw = load_d16(b0[ib].d, b1[ib].d);
    STRATA_UNROLL for (int t = 0; t < NT; ++t) {
      const Q8BlockInfo& yi = xsum[xss * t + ib];
      const __m512 dy = _mm512_set1_ps(yi.d);
      if constexpr (requires { b0[ib].m; }) {  // value = d * code + m: unsigned32_groups' two fmas
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dy), _mm512_cvtepi32_ps(s32[t]), acc[t]);
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(load_d16(b0[ib].m, b1[ib].m), dy), _mm512_cvtepi32_ps(_mm512_set1_epi32(yi.sum)), acc[t]);
      } else {  // value = d * (code - 2^kShift)
        const __m512i v = _mm512_sub_epi32(s32[t], _mm512_slli_epi32(_mm512_set1_epi32(yi.sum), F::kShift));
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dy), _mm512_cvtepi32_ps(v), acc[t]);
      }
    }
  }
  STRATA_UNROLL for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out + os * t, acc[t]);
}

// ---- Q8_0: two groups per call in one register ----
// AVX-512 has no byte sign instruction, so the signed codes go in plus 128 (0..255, one xor) as
// unsigned codes through the Q4_0 pair kernel's path, which takes 128 times each block's
// activation sum back off: the integer gemm_signed32 forms, so the same bits.
struct Q8_0x16 {
  using Block = BlockQ8_0x8;
  static constexpr int kShift = 7;
  static __m512i code(const Block& a, const Block& b, int g) {
    const __m512i v = join256(load256(reinterpret_cast<const uint8_t*>(a.qs) + 32 * g), load256(reinterpret_cast<const uint8_t*>(b.qs) + 32 * g));
    return _mm512_xor_si512(v, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
};

// The same codes plus 128 for one group in a 256-bit register (unsigned32_groups).
struct Q8_0Plus128x8 {
  using Block = BlockQ8_0x8;
  static constexpr int kShift = 7;
  static __m256i code(const Block& b, int g) {
    return _mm256_xor_si256(load256(reinterpret_cast<const uint8_t*>(b.qs) + 32 * g), _mm256_set1_epi8(static_cast<char>(0x80)));
  }
};
struct IQ4_NLPlus128x8 {
  using Block = BlockIQ4_NLx8;
  static constexpr int kShift = 7;
  static __m256i code(const Block& b, int g) {
    const __m256i levels = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4LevelsPlus128.data())));
    return _mm256_shuffle_epi8(levels, nibble_group(b.qs, g));
  }
};

// G = 1 is the 256-bit unsigned kernel on F1 (the codes plus 128: one xor where gemm_signed32
// takes a magnitude and signs the activations); G = 2 the unsigned pair on F. Both form
// gemm_signed32's integers. One thread, Matvec/Q8_0 from memory (MV_COLS=1024), alternated with
// the signed kernel: 29.9, 28.1, 21.5 -> 35.4, 28.4, 31.6 GB/s.
template <typename F, typename F1, int G, int NT>
void signed32_groups_512(int n, const uint8_t* w, size_t gs, const uint8_t* xq, size_t xs, const Q8BlockInfo* xsum,
                         size_t xss, float* out, size_t os) {
  static_assert(F::kShift == 7 && F1::kShift == 7);
  if constexpr (G == 1) unsigned32_groups<F1, 1, NT>(n, w, gs, xq, xs, xsum, xss, out, os);
  else unsigned32_pair_512<F, NT>(n, w, gs, xq, xs, xsum, xss, out, os);
}

// ---- Q4_K, Q5_K: two groups per call in one register (the 256-bit VNNI kernel's steps) ----
inline __m512i bytes16_u32(const uint8_t* a, const uint8_t* b) {  // a[0..7], b[0..7] widened to 32 bits
  return _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a)),
                                                 _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b))));
}
inline __m512i bit_to_4_512(__m512i v, int s) {
  return _mm512_and_si512(s <= 4 ? _mm512_slli_epi16(v, 4 - s) : _mm512_srli_epi16(v, s - 4), _mm512_set1_epi8(0x10));
}

template <typename Packed, int NT>
void q45_k_pair_512(int n, const uint8_t* w, size_t gs, const uint8_t* xq, size_t xs, float* out, size_t os) {
  constexpr bool kFive = requires(const Packed& p) { p.qh; };
  const auto* b0 = reinterpret_cast<const Packed*>(w);
  const auto* b1 = reinterpret_cast<const Packed*>(w + gs);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512 acc[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int ib = 0; ib < n / 256; ++ib) {
    const Packed& B0 = b0[ib];
    const Packed& B1 = b1[ib];
    const BlockQ8_K* y[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(xq + xs * t) + ib;
    __m512i isum[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
    STRATA_UNROLL for (int j = 0; j < 4; ++j) {
      prefetch_pair_ahead<Packed, 4>(b0 + ib, gs, j);
      __m512i lo32[NT], hi32[NT];
      STRATA_UNROLL for (int t = 0; t < NT; ++t) lo32[t] = hi32[t] = _mm512_setzero_si512();
      STRATA_UNROLL for (int g = 0; g < 8; ++g) {
        const __m512i v = join256(load256(B0.qs + j * 256 + g * 32), load256(B1.qs + j * 256 + g * 32));
        __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        if constexpr (kFive) {
          const __m512i hb = join256(load256(B0.qh + g * 32), load256(B1.qh + g * 32));
          lo = _mm512_or_si512(lo, bit_to_4_512(hb, 2 * j));
          hi = _mm512_or_si512(hi, bit_to_4_512(hb, 2 * j + 1));
        }
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          lo32[t] = dpbusd_bcast16(lo32[t], lo, y[t]->qs + 64 * j + 4 * g);
          hi32[t] = dpbusd_bcast16(hi32[t], hi, y[t]->qs + 64 * j + 32 + 4 * g);
        }
      }
      const __m512i sl = bytes16_u32(B0.sc[2 * j], B1.sc[2 * j]), sh = bytes16_u32(B0.sc[2 * j + 1], B1.sc[2 * j + 1]);
      STRATA_UNROLL for (int t = 0; t < NT; ++t) {
        isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(lo32[t], sl), _mm512_mullo_epi32(hi32[t], sh)));
        STRATA_KEEP(isum[t]);
      }
    }
    __m512i mins[4];  // lane r: (min of sub-block 2p, min of sub-block 2p + 1) as 16-bit values
    for (int p = 0; p < 4; ++p)
      mins[p] = _mm512_or_si512(bytes16_u32(B0.mn[2 * p], B1.mn[2 * p]),
                                _mm512_slli_epi32(bytes16_u32(B0.mn[2 * p + 1], B1.mn[2 * p + 1]), 16));
    const __m512 dw = load_d16(B0.d, B1.d), dm = load_d16(B0.dmin, B1.dmin);
    STRATA_UNROLL for (int t = 0; t < NT; ++t) {
      const int16_t* bs = y[t]->bsums;
      __m512i m32 = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p) {
        const int lo = bs[4 * p] + bs[4 * p + 1], hi = bs[4 * p + 2] + bs[4 * p + 3];
        const __m512i pair = _mm512_set1_epi32(static_cast<int32_t>((static_cast<uint32_t>(lo) & 0xFFFFu) | (static_cast<uint32_t>(hi) << 16)));
        m32 = _mm512_add_epi32(m32, _mm512_madd_epi16(mins[p], pair));
      }
      const __m512 dx = _mm512_set1_ps(y[t]->d);
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dx), _mm512_cvtepi32_ps(isum[t]), acc[t]);
      acc[t] = _mm512_fnmadd_ps(_mm512_mul_ps(dm, dx), _mm512_cvtepi32_ps(m32), acc[t]);
    }
  }
  STRATA_UNROLL for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out + os * t, acc[t]);
}

template <typename Packed, int G, int NT>
void q45_k_groups_512(int n, const uint8_t* w, size_t gs, const uint8_t* xq, size_t xs, const Q8BlockInfo* xi,
                      size_t xis, float* out, size_t os) {
  if constexpr (G == 1) {
    float one[8 * NT];
    gemm_q45_k<Packed, NT>(n, w, xq, xs, xi, xis, one);
    for (int t = 0; t < NT; ++t) std::memcpy(out + os * t, one + 8 * t, 8 * sizeof(float));
  } else {
    q45_k_pair_512<Packed, NT>(n, w, gs, xq, xs, out, os);
  }
}

// ---- Q6_K, IQ4_XS: two groups per call in one register (the 256-bit VNNI kernels' steps) ----
inline __m512i bytes16_i32(const int8_t* a, const int8_t* b) {  // a[0..7], b[0..7] sign-extended to 32 bits
  return _mm512_cvtepi8_epi32(_mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a)),
                                                 _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b))));
}
inline __m512i bcast_pair512(int lo, int hi) {
  return _mm512_set1_epi32(static_cast<int32_t>((static_cast<uint32_t>(lo) & 0xFFFFu) | (static_cast<uint32_t>(hi) << 16)));
}

// q6_k_codes of two groups in one register.
inline __m512i q6_k_codes2(const BlockQ6_Kx8& a, const BlockQ6_Kx8& b, int h, int m) {
  auto plane = [&](int p) { return join256(load256(a.q + (3 * h + p) * 32), load256(b.q + (3 * h + p) * 32)); };
  if (m < 3) return _mm512_and_si512(plane(m), _mm512_set1_epi8(0x3F));
  const __m512i top = _mm512_set1_epi8(static_cast<char>(0xC0));
  const __m512i p0 = _mm512_srli_epi16(_mm512_and_si512(plane(0), top), 6);
  const __m512i p1 = _mm512_srli_epi16(_mm512_and_si512(plane(1), top), 4);
  const __m512i p2 = _mm512_srli_epi16(_mm512_and_si512(plane(2), top), 2);
  return _mm512_ternarylogic_epi64(p0, p1, p2, 0xFE);  // p0 | p1 | p2
}

template <int NT>
void q6_k_pair_512(int n, const uint8_t* w, size_t gs, const uint8_t* xq, size_t xs, float* out, size_t os) {
  const auto* b0 = reinterpret_cast<const BlockQ6_Kx8*>(w);
  const auto* b1 = reinterpret_cast<const BlockQ6_Kx8*>(w + gs);
  __m512 acc[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int ib = 0; ib < n / 256; ++ib) {
    const BlockQ6_Kx8& B0 = b0[ib];
    const BlockQ6_Kx8& B1 = b1[ib];
    const BlockQ8_K* y[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(xq + xs * t) + ib;
    __m512i isum[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
    for (int q = 0; q < 4; ++q) {  // groups 4q..4q+3 (+16m) share scale q + 4m
      prefetch_pair_ahead<BlockQ6_Kx8, 4>(b0 + ib, gs, q);
      STRATA_UNROLL for (int m = 0; m < 4; ++m) {
        __m512i s32[NT];
        STRATA_UNROLL for (int t = 0; t < NT; ++t) s32[t] = _mm512_setzero_si512();
        STRATA_UNROLL for (int h = 4 * q; h < 4 * q + 4; ++h) {
          const __m512i c = q6_k_codes2(B0, B1, h, m);
          const int G = h + 16 * m;
          STRATA_UNROLL for (int t = 0; t < NT; ++t) {
            s32[t] = dpbusd_bcast16(s32[t], c, y[t]->qs + 4 * G);
          }
        }
        const __m512i sc = bytes16_i32(B0.sc[q + 4 * m], B1.sc[q + 4 * m]);
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s32[t], sc));
          STRATA_KEEP(isum[t]);
        }
      }
    }
    const __m512 dw = load_d16(B0.d, B1.d);
    STRATA_UNROLL for (int t = 0; t < NT; ++t) {
      const int16_t* bs = y[t]->bsums;
      __m512i off = _mm512_setzero_si512();
      for (int p = 0; p < 8; ++p) {
        const __m512i lo = _mm512_and_si512(bytes16_i32(B0.sc[2 * p], B1.sc[2 * p]), _mm512_set1_epi32(0xFFFF));
        const __m512i pair = _mm512_or_si512(lo, _mm512_slli_epi32(bytes16_i32(B0.sc[2 * p + 1], B1.sc[2 * p + 1]), 16));
        off = _mm512_add_epi32(off, _mm512_madd_epi16(pair, bcast_pair512(bs[2 * p], bs[2 * p + 1])));
      }
      const __m512i total = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(off, 5));
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(y[t]->d)), _mm512_cvtepi32_ps(total), acc[t]);
    }
  }
  STRATA_UNROLL for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out + os * t, acc[t]);
}

// ---- Q2_K, Q3_K, TQ2_0: two groups per call in one register ----
// gemm_q23_k's codes, two groups at once, into vpdpbusd, four per 16-value sub-block. A
// sub-block's sum fits 16 bits (16 * 7 * 128), so one vpdpwssd against the rows' sub-scales
// (16 bits, the upper half of each lane zero) applies them where the 256-bit kernel needs a
// madd and an add; Q3_K's offset of 4 comes off each sub-block's sum first, and Q2_K's mins go
// through a second vpdpwssd against the activations' 16-value sums. TQ2_0 has no sub-scales: its
// sums go straight into the block's total, which loses the activations' block sum (values code
// - 1). The integer totals are gemm_q23_k's and gemm_tq2_0's, so the bits are too.
template <typename Packed>
inline __m512i q23_k_codes2(const Packed& a, const Packed& b, int h, int j, int g8) {
  const int o = (8 * h + g8) * 32;
  const __m512i v = join256(load256(a.qs + o), load256(b.qs + o));
  const __m512i c = _mm512_and_si512(j ? _mm512_srli_epi16(v, 2 * j) : v, _mm512_set1_epi8(3));
  if constexpr (requires { a.hm; }) {
    const __m512i m = join256(load256(a.hm + g8 * 32), load256(b.hm + g8 * 32));
    const int bit = 4 * h + j;  // to bit 2, as in q23_k_codes
    const __m512i hb = bit <= 2 ? _mm512_slli_epi16(m, 2 - bit) : _mm512_srli_epi16(m, bit - 2);
    return _mm512_ternarylogic_epi64(c, hb, _mm512_set1_epi8(4), 0xF8);  // c | (hb & 4)
  } else {
    return c;
  }
}

template <typename Packed, int NT>
void q23_k_pair_512(int n, const uint8_t* w, size_t gs, const uint8_t* xq, size_t xs, float* out, size_t os) {
  constexpr bool kQ3 = requires(const Packed& p) { p.hm; };
  constexpr bool kTernary = !requires(const Packed& p) { p.sc; };
  const auto* b0 = reinterpret_cast<const Packed*>(w);
  const auto* b1 = reinterpret_cast<const Packed*>(w + gs);
  const __m512i low16 = _mm512_set1_epi32(0xFFFF), m0f = _mm512_set1_epi32(0x0F);
  __m512 acc[NT], mins[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) acc[t] = mins[t] = _mm512_setzero_ps();
  for (int ib = 0; ib < n / 256; ++ib) {
    const Packed& B0 = b0[ib];
    const Packed& B1 = b1[ib];
    prefetch_pair_ahead(b0 + ib, gs);
    const BlockQ8_K* y[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(xq + xs * t) + ib;
    __m512i isum[NT], m32[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) isum[t] = m32[t] = _mm512_setzero_si512();
    STRATA_UNROLL for (int h = 0; h < 2; ++h) STRATA_UNROLL for (int j = 0; j < 4; ++j) STRATA_UNROLL for (int q = 0; q < 2; ++q) {
      const int s = 8 * h + 2 * j + q;  // sub-block: groups g8 = 4q..4q+3
      __m512i s32[NT];
      STRATA_UNROLL for (int t = 0; t < NT; ++t) s32[t] = _mm512_setzero_si512();
      STRATA_UNROLL for (int k = 0; k < 4; ++k) {
        const __m512i c = q23_k_codes2(B0, B1, h, j, 4 * q + k);
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          s32[t] = dpbusd_bcast16(s32[t], c, y[t]->qs + 16 * s + 4 * k);
        }
      }
      if constexpr (kTernary) {
        STRATA_UNROLL for (int t = 0; t < NT; ++t) isum[t] = _mm512_add_epi32(isum[t], s32[t]);
      } else if constexpr (kQ3) {
        const __m512i sc = _mm512_and_si512(bytes16_i32(B0.sc[s], B1.sc[s]), low16);
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          const __m512i centred = _mm512_sub_epi32(s32[t], _mm512_set1_epi32(4 * y[t]->bsums[s]));
          isum[t] = _mm512_dpwssd_epi32(isum[t], centred, sc);
          STRATA_KEEP(isum[t]);
        }
      } else {
        const __m512i v = bytes16_u32(B0.sc[s], B1.sc[s]);
        const __m512i sc = _mm512_and_si512(v, m0f), mn = _mm512_srli_epi32(v, 4);
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          isum[t] = _mm512_dpwssd_epi32(isum[t], s32[t], sc);
          m32[t] = _mm512_dpwssd_epi32(m32[t], mn, _mm512_set1_epi32(static_cast<uint16_t>(y[t]->bsums[s])));
          STRATA_KEEP(isum[t]);
          STRATA_KEEP(m32[t]);
        }
      }
    }
    const __m512 dw = load_d16(B0.d, B1.d);
    STRATA_UNROLL for (int t = 0; t < NT; ++t) {
      const __m512 dy = _mm512_set1_ps(y[t]->d);
      if constexpr (kTernary) {  // values code - 1: the activations' block sum comes off
        int32_t ysum = 0;
        for (int s = 0; s < 16; ++s) ysum += y[t]->bsums[s];
        isum[t] = _mm512_sub_epi32(isum[t], _mm512_set1_epi32(ysum));
      }
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dy), _mm512_cvtepi32_ps(isum[t]), acc[t]);
      if constexpr (!kQ3 && !kTernary)
        mins[t] = _mm512_add_ps(mins[t], _mm512_mul_ps(dy, _mm512_mul_ps(load_d16(B0.dmin, B1.dmin), _mm512_cvtepi32_ps(m32[t]))));
    }
  }
  STRATA_UNROLL for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out + os * t, kQ3 || kTernary ? acc[t] : _mm512_sub_ps(acc[t], mins[t]));
}

// IQ4_XS and the grown IQ3 layouts (L: IQ4_XSOffset, IQ3_XXSOffset, IQ3_SOffset) share the
// nibble places. Their levels go in as unsigned offset codes (IQ4_XS's plus 128), straight into
// vpdpbusd, and each 32-value sub-block's sum loses its offset (kOffset times the activations'
// 32-value sum) before its vpmulld, where the 256-bit kernels take it off after the block
// (gemm_iq3_offset) or multiply signed levels (gemm_nibble_values): the same integer total, so
// the same bits. For IQ4_XS that replaces taking each level's magnitude and sign and negating the
// activations under the signs, per vector and token.
struct IQ4_XSOffset {
  using Packed = BlockIQ4_XSx8;
  static constexpr int kOffset = 128;
  static inline const std::array<uint8_t, 16>& kCodes = kIq4LevelsPlus128;
};
template <typename L, int NT>
void nibble_values_pair_512(int n, const uint8_t* w, size_t gs, const uint8_t* xq, size_t xs, float* out, size_t os) {
  using Packed = typename L::Packed;
  const auto* b0 = reinterpret_cast<const Packed*>(w);
  const auto* b1 = reinterpret_cast<const Packed*>(w + gs);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i levels = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(L::kCodes.data())));
  __m512 acc[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int ib = 0; ib < n / 256; ++ib) {
    const Packed& B0 = b0[ib];
    const Packed& B1 = b1[ib];
    const BlockQ8_K* y[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(xq + xs * t) + ib;
    __m512i isum[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
    for (int sub = 0; sub < 8; ++sub) {
      prefetch_pair_ahead<Packed, 8>(b0 + ib, gs, sub);
      __m512i s32[NT];
      STRATA_UNROLL for (int t = 0; t < NT; ++t) s32[t] = _mm512_setzero_si512();
      STRATA_UNROLL for (int g = 0; g < 4; ++g) {
        const int o = sub * 128 + g * 32;
        const __m512i v = join256(load256(B0.qs + o), load256(B1.qs + o));
        const __m512i c0 = _mm512_shuffle_epi8(levels, _mm512_and_si512(v, m4));                         // values 4g..
        const __m512i c1 = _mm512_shuffle_epi8(levels, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));  // 16+4g..
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          const int8_t* x = y[t]->qs + 32 * sub + 4 * g;
          s32[t] = dpbusd_bcast16(dpbusd_bcast16(s32[t], c0, x), c1, x + 16);
        }
      }
      const __m512i sc = bytes16_i32(B0.sc[sub], B1.sc[sub]);
      STRATA_UNROLL for (int t = 0; t < NT; ++t) {
        const __m512i sum = _mm512_sub_epi32(s32[t], _mm512_set1_epi32(L::kOffset * (y[t]->bsums[2 * sub] + y[t]->bsums[2 * sub + 1])));
        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(sum, sc));
        STRATA_KEEP(isum[t]);
      }
    }
    __m512 dw = load_d16(B0.d, B1.d);
    if constexpr (requires { L::kD; }) dw = _mm512_mul_ps(dw, _mm512_set1_ps(L::kD));
    STRATA_UNROLL for (int t = 0; t < NT; ++t) {
      __m512i total = isum[t];
      if constexpr (requires { L::kDiv; })
        if (L::kDiv == 2) total = _mm512_add_epi32(total, total);
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(y[t]->d)), _mm512_cvtepi32_ps(total), acc[t]);
    }
  }
  STRATA_UNROLL for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out + os * t, acc[t]);
}

// ---- IQ2_XXS, IQ2_XS, IQ2_S grown (BlockIQ2XXSLevelsx8, BlockIQ2Levelsx8): two groups per call ----
// The levels come from the same shuffle as in gemm_iq2_levels; AVX-512 has no vpsignb, so each
// value's sign bit becomes a mask (vptestmb) under which the broadcast activations are negated,
// and vpdpbusd sums four products into 32 bits, so one vpmulld per sub-scale row (32 values for
// IQ2_XXS, 16 for the others) replaces the 16-bit sums and their madds. Integer totals are exact
// either way, so the bits are those of the 256-bit kernel.
template <typename Packed, int NT>
void iq2_levels_pair_512(int n, const uint8_t* w, size_t gs, const uint8_t* xq, size_t xs, float* out, size_t os) {
  const auto* b0 = reinterpret_cast<const Packed*>(w);
  const auto* b1 = reinterpret_cast<const Packed*>(w + gs);
  const __m512i levels = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq2LevelsByPair.data())));
  const __m512i m03 = _mm512_set1_epi8(0x03), m0c = _mm512_set1_epi8(0x0C), zero = _mm512_setzero_si512();
  constexpr int kQs = iq2_scale_row<Packed>(1) == iq2_scale_row<Packed>(0) ? 2 : 1;  // 16-value sub-blocks per scale row
  __m512 acc[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int ib = 0; ib < n / 256; ++ib) {
    const Packed& B0 = b0[ib];
    const Packed& B1 = b1[ib];
    const BlockQ8_K* y[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(xq + xs * t) + ib;
    __m512i isum[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
    STRATA_UNROLL for (int h = 0; h < 2; ++h) STRATA_UNROLL for (int j = 0; j < 4; ++j) {
      prefetch_pair_ahead<Packed, 8>(b0 + ib, gs, 4 * h + j);
      const __m512i sign_bit = _mm512_set1_epi8(static_cast<char>(1 << (4 * h + j)));  // as in gemm_iq2_levels
      STRATA_UNROLL for (int q0 = 0; q0 < 2; q0 += kQs) {
        __m512i s32[NT];
        STRATA_UNROLL for (int t = 0; t < NT; ++t) s32[t] = zero;
        STRATA_UNROLL for (int q = q0; q < q0 + kQs; ++q) {
          const int s = 8 * h + 2 * j + q;  // sub-block: groups g8 = 4q..4q+3
          STRATA_UNROLL for (int k = 0; k < 4; ++k) {
            const int g8 = 4 * q + k, o = (8 * h + g8) * 32;
            const __m512i v = join256(load256(B0.qs + o), load256(B1.qs + o));
            const __m512i a = _mm512_shuffle_epi8(levels, _mm512_and_si512(j >= 2 ? _mm512_srli_epi16(v, 4) : v, j % 2 ? m0c : m03));
            const __mmask64 neg = _mm512_test_epi8_mask(join256(load256(B0.hm + g8 * 32), load256(B1.hm + g8 * 32)), sign_bit);
            STRATA_UNROLL for (int t = 0; t < NT; ++t) {
              int32_t x4;
              std::memcpy(&x4, y[t]->qs + 16 * s + 4 * k, 4);
              const __m512i x = _mm512_set1_epi32(x4);
              s32[t] = _mm512_dpbusd_epi32(s32[t], a, _mm512_mask_sub_epi8(x, neg, zero, x));
              STRATA_KEEP(s32[t]);
            }
          }
        }
        const int row = iq2_scale_row<Packed>(8 * h + 2 * j + q0);
        const __m512i sc = bytes16_i32(B0.sc[row], B1.sc[row]);
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s32[t], sc));
          STRATA_KEEP(isum[t]);
        }
      }
    }
    const __m512 dw = _mm512_mul_ps(load_d16(B0.d, B1.d), _mm512_set1_ps(0.125f));
    STRATA_UNROLL for (int t = 0; t < NT; ++t)
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(y[t]->d)), _mm512_cvtepi32_ps(isum[t]), acc[t]);
  }
  STRATA_UNROLL for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out + os * t, acc[t]);
}

// ---- IQ1_S, IQ1_M grown (BlockIQ1Codesx8): two groups per call ----
// gemm_iq1_codes' unsigned codes (iq1_deltas, iq1_codes on 512 bits) into vpdpbusd; each 16-value
// sub-block's sum loses its offset (9 times the activations' 16-value sum), which leaves it within
// 16 bits (16 * 9 * 128), so one vpdpwssd applies the rows' sub-scale nibbles (16-bit lanes whose
// upper halves are zero) where a vpmulld and an add would. The same integer total as the 256-bit
// kernel's, so the same bits.
template <int NT>
void iq1_codes_pair_512(int n, const uint8_t* w, size_t gs, const uint8_t* xq, size_t xs, float* out, size_t os) {
  const auto* b0 = reinterpret_cast<const BlockIQ1Codesx8*>(w);
  const auto* b1 = reinterpret_cast<const BlockIQ1Codesx8*>(w + gs);
  const __m512i row_byte0 = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12));
  const __m512i m18 = _mm512_set1_epi8(0x18), m0f = _mm512_set1_epi32(0x0F);
  __m512 acc[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int ib = 0; ib < n / 256; ++ib) {
    const BlockIQ1Codesx8& B0 = b0[ib];
    const BlockIQ1Codesx8& B1 = b1[ib];
    prefetch_pair_ahead(b0 + ib, gs);
    const BlockQ8_K* y[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(xq + xs * t) + ib;
    __m512i isum[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
    const __m512i plus = join256(load256(reinterpret_cast<const uint8_t*>(B0.plus)), load256(reinterpret_cast<const uint8_t*>(B1.plus)));
    STRATA_UNROLL for (int h = 0; h < 2; ++h) STRATA_UNROLL for (int j = 0; j < 4; ++j) {
      const __m512i deltas = _mm512_shuffle_epi8(plus, _mm512_add_epi8(row_byte0, _mm512_set1_epi8(static_cast<char>(2 * h + j / 2))));
      const __m512i scb = bytes16_u32(B0.sc[4 * h + j], B1.sc[4 * h + j]);
      STRATA_UNROLL for (int q = 0; q < 2; ++q) {  // sub-block 8h + 2j + q: groups g8 = 4q..4q+3
        const int s = 8 * h + 2 * j + q;
        __m512i s32[NT];
        STRATA_UNROLL for (int t = 0; t < NT; ++t) s32[t] = _mm512_setzero_si512();
        STRATA_UNROLL for (int k = 0; k < 4; ++k) {
          const int g8 = 4 * q + k, bit = 4 * (j % 2) + g8 / 2, sh = 3 - 2 * j, o = (8 * h + g8) * 32;
          const __m512i v = join256(load256(B0.qs + o), load256(B1.qs + o));
          const __m512i c = _mm512_and_si512(sh > 0 ? _mm512_slli_epi16(v, sh) : _mm512_srli_epi16(v, -sh), m18);
          const __m512i db = _mm512_and_si512(deltas, _mm512_set1_epi8(static_cast<char>(1 << bit)));
          const __m512i u = _mm512_or_si512(c, bit == 0 ? _mm512_add_epi8(db, db) : bit == 1 ? db : _mm512_srli_epi16(db, bit - 1));
          STRATA_UNROLL for (int t = 0; t < NT; ++t) {
            s32[t] = dpbusd_bcast16(s32[t], u, y[t]->qs + 16 * s + 4 * k);
          }
        }
        const __m512i sc = q ? _mm512_srli_epi32(scb, 4) : _mm512_and_si512(scb, m0f);
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          const __m512i off = _mm512_set1_epi32(9 * y[t]->bsums[s]);
          isum[t] = _mm512_dpwssd_epi32(isum[t], _mm512_sub_epi32(s32[t], off), sc);
          STRATA_KEEP(isum[t]);
        }
      }
    }
    const __m512 dw = _mm512_mul_ps(load_d16(B0.d, B1.d), _mm512_set1_ps(0.125f));
    STRATA_UNROLL for (int t = 0; t < NT; ++t)
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(y[t]->d)), _mm512_cvtepi32_ps(isum[t]), acc[t]);
  }
  STRATA_UNROLL for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out + os * t, acc[t]);
}

// G = 1 through the 256-bit kernel K (a GemmX8Fn), G = 2 through the pair P.
template <auto K, auto P, int G, int NT>
void k_groups_512(int n, const uint8_t* w, size_t gs, const uint8_t* xq, size_t xs, const Q8BlockInfo* xi, size_t xis,
                  float* out, size_t os) {
  if constexpr (G == 1) {
    float one[8 * NT];
    K(n, w, xq, xs, xi, xis, one);
    for (int t = 0; t < NT; ++t) std::memcpy(out + os * t, one + 8 * t, 8 * sizeof(float));
  } else {
    P(n, w, gs, xq, xs, out, os);
  }
}

// G = 1 is the 256-bit kernel; G = 2 the pair.
template <typename F, typename F1, int G, int NT>
void unsigned32_groups_512(int n, const uint8_t* w, size_t gs, const uint8_t* xq, size_t xs, const Q8BlockInfo* xsum,
                           size_t xss, float* out, size_t os) {
  if constexpr (G == 1) unsigned32_groups<F1, 1, NT>(n, w, gs, xq, xs, xsum, xss, out, os);
  else unsigned32_pair_512<F, NT>(n, w, gs, xq, xs, xsum, xss, out, os);
}

template <int G, int NT> struct GF16x16 { static constexpr auto f = half_groups_512<WidenF16x16, G, NT>; };
template <int G, int NT> struct GBF16x16 { static constexpr auto f = half_groups_512<WidenBF16x16, G, NT>; };
template <int G, int NT> struct GF16x16Unfetched { static constexpr auto f = half_groups_512<WidenF16x16, G, NT, false>; };
template <int G, int NT> struct GBF16x16Unfetched { static constexpr auto f = half_groups_512<WidenBF16x16, G, NT, false>; };
template <int G, int NT> struct GQ4_0x16 { static constexpr auto f = unsigned32_groups_512<Q4_0x16, Q4_0x8, G, NT>; };
template <int G, int NT> struct GQ5_0x16 { static constexpr auto f = unsigned32_groups_512<Q5_0x16, Q5_0x8, G, NT>; };
template <int G, int NT> struct GQ4_1x16 { static constexpr auto f = unsigned32_groups_512<Q4_1x16, Q4_1x8, G, NT>; };
template <int G, int NT> struct GQ4_Kx16 { static constexpr auto f = q45_k_groups_512<BlockQ4_Kx8, G, NT>; };
template <int G, int NT> struct GQ5_Kx16 { static constexpr auto f = q45_k_groups_512<BlockQ5_Kx8, G, NT>; };
template <int G, int NT> struct GQ6_Kx16 { static constexpr auto f = k_groups_512<gemm_q6_k<NT>, q6_k_pair_512<NT>, G, NT>; };
template <int G, int NT> struct GQ2_Kx16 { static constexpr auto f = k_groups_512<gemm_q23_k<BlockQ2_Kx8, NT>, q23_k_pair_512<BlockQ2_Kx8, NT>, G, NT>; };
template <int G, int NT> struct GTQ2_0x16 { static constexpr auto f = k_groups_512<gemm_tq2_0<NT>, q23_k_pair_512<BlockTQ2_0x8, NT>, G, NT>; };
template <int G, int NT> struct GQ3_Kx16 { static constexpr auto f = k_groups_512<gemm_q23_k<BlockQ3_Kx8, NT>, q23_k_pair_512<BlockQ3_Kx8, NT>, G, NT>; };
template <int G, int NT> struct GIQ4_XSx16 { static constexpr auto f = k_groups_512<gemm_nibble_values<IQ4_XSValues, NT>, nibble_values_pair_512<IQ4_XSOffset, NT>, G, NT>; };
template <int G, int NT> struct GIQ2_XXSx16 {
  static constexpr auto f = k_groups_512<gemm_iq2_levels<BlockIQ2XXSLevelsx8, NT>, iq2_levels_pair_512<BlockIQ2XXSLevelsx8, NT>, G, NT>;
};
template <int G, int NT> struct GIQ2x16 {
  static constexpr auto f = k_groups_512<gemm_iq2_levels<BlockIQ2Levelsx8, NT>, iq2_levels_pair_512<BlockIQ2Levelsx8, NT>, G, NT>;
};
template <int G, int NT> struct GIQ3_XXSx16 {
  static constexpr auto f = k_groups_512<gemm_iq3_offset<IQ3_XXSOffset, NT>, nibble_values_pair_512<IQ3_XXSOffset, NT>, G, NT>;
};
template <int G, int NT> struct GIQ3_Sx16 {
  static constexpr auto f = k_groups_512<gemm_iq3_offset<IQ3_SOffset, NT>, nibble_values_pair_512<IQ3_SOffset, NT>, G, NT>;
};
template <int G, int NT> struct GIQ1x16 { static constexpr auto f = k_groups_512<gemm_iq1_codes<NT>, iq1_codes_pair_512<NT>, G, NT>; };
template <int G, int NT> struct GIQ1_Sx16 { static constexpr auto f = k_groups_512<gemm_iq1_codes<NT, true>, iq1_codes_pair_512<NT>, G, NT>; };
template <int G, int NT> struct GQ8_0x16 { static constexpr auto f = signed32_groups_512<Q8_0x16, Q8_0Plus128x8, G, NT>; };
template <int G, int NT> struct GIQ4_NLx16 { static constexpr auto f = signed32_groups_512<IQ4_NLx16, IQ4_NLPlus128x8, G, NT>; };

// ---- Prefill of the decoded lookup formats, 16 tokens per register (gemm_decoded_bands) ----
// Per 16 values of the 8 rows: for each 4-value word of a row, one vpdpbusd of the word
// broadcast against the 16 tokens' codes (plus 128), then one exact multiply by the row's
// sub-scale. The 128s are taken out once per block per row: 128 * sum_j sc_j * (sum of the
// row's 16 values j), from the weights alone. The integer block total is then the one
// gemm_decoded8 (and dotq) forms (wrapping int32 arithmetic ends at the same value), and the
// float steps are theirs, lane for lane, so the bits are the same. The mins, where the format has
// them, are taken off as its own kernel does: Q2_K's summed apart and subtracted at the end
// (gemm_decoded8), the other K-quants' per block (gemm_q45_k).
// kSub: values per sub-scale (16; 32 where the format's sub-scales come in equal pairs, which
// halves the multiplies).
// kPairs: where a sub-block's sum (codes plus 128, times values) fits 16 bits, two sub-blocks'
// sums share one register, each token's pair in one 32-bit lane, and one vpdpwssd against the
// two sub-scales applies both: half the multiplies. On Zen 4 every 512-bit multiply (vpdpbusd,
// vpmulld, vpdpwssd, vfmadd) takes the one multiply slot a cycle, so with 16-value sub-blocks
// the scales cost 1 in 5 of them, paired 1 in 9. Sums of 16 values: Q3_K (-4..3) at most
// 16 * 255 * 4 = 16320, Q2_K (0..3) 12240; of 32: TQ1_0 / TQ2_0 (-1..1) 8160. The products
// and sums are the same integers, so the bits are too.
// kCentredPairs: the same where only a sub-block's sum without the 128s fits 16 bits: each sum
// loses its 128 * (sum of the row's values) before the pairing (a subtract beside the
// multiplies), in place of the block's correction after it. IQ1_M (-9..9): 16 * 127 * 9 = 18288
// (with the 128s 36720). The same integers again.
enum class BandMins { kNone, kSummedApart, kPerBlock };
enum class BandScales { kMultiply, kPairs, kCentredPairs };
template <BandMins kMins, int kSub, BandScales kScales = BandScales::kMultiply>
void gemm_decoded_bands(int n, const uint8_t* w, const uint8_t* bands, size_t band_stride, int ntok, int nrows, float* y,
                        size_t y_stride) {
  const auto* blocks = reinterpret_cast<const DecodedX8Block*>(w);
  const int nbands = (ntok + kBandTokens - 1) / kBandTokens;
  __m512 acc[kMaxBandsPerCall][8], mins[kMaxBandsPerCall][8];
  for (int b = 0; b < nbands; ++b)
    for (int r = 0; r < 8; ++r) acc[b][r] = mins[b][r] = _mm512_setzero_ps();
  const __m256i ones = _mm256_set1_epi8(1);
  for (int ib = 0; ib < n / 256; ++ib) {
    const DecodedX8Block& B = blocks[ib];
    // The sub-scales as int32, and each row's 128 * sum_j sc_j * (sum of its values j) (centred
    // pairs: each 128 * (sum of the values j) apart).
    constexpr bool kPairs = kScales != BandScales::kMultiply, kCentred = kScales == BandScales::kCentredPairs;
    static_assert(!kCentred || kSub == 16);
    alignas(32) int32_t sc[16][8], corr[8], off[kCentred ? 16 : 1][8];  // corr: not centred; off: centred
    __m256i c = _mm256_setzero_si256();
    for (int j = 0; j < 16; ++j) {
      const __m256i both = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(B.sc[j]));
      const __m256i s = _mm256_srai_epi32(_mm256_slli_epi32(both, 16), 16);
      if constexpr (kPairs) {  // sc[i]: sub-block 2i's scale in the low half, 2i + 1's in the high
        constexpr int kStep = kSub / 16;  // the 16-value scales of one sub-block
        auto* slot = reinterpret_cast<__m256i*>(sc[j / (2 * kStep)]);
        if (j % (2 * kStep) == 0)
          _mm256_store_si256(slot, both);
        else if (j % (2 * kStep) == kStep)
          _mm256_store_si256(slot, _mm256_blend_epi16(_mm256_load_si256(slot), both, 0xAA));
      } else {
        _mm256_store_si256(reinterpret_cast<__m256i*>(sc[j]), s);
      }
      __m256i wsum = _mm256_setzero_si256();
      STRATA_UNROLL for (int g = 0; g < 4; ++g) wsum = _mm256_dpbusd_epi32(wsum, ones, load32(B.v[4 * j + g]));
      if constexpr (kCentred) _mm256_store_si256(reinterpret_cast<__m256i*>(off[j]), _mm256_slli_epi32(wsum, 7));
      else c = _mm256_add_epi32(c, _mm256_mullo_epi32(wsum, s));
    }
    if constexpr (!kCentred) _mm256_store_si256(reinterpret_cast<__m256i*>(corr), _mm256_slli_epi32(c, 7));
    for (int b = 0; b < nbands; ++b) {
      const TokenBandBlock& X = reinterpret_cast<const TokenBandBlock*>(bands + b * band_stride)[ib];
      __m512i isum[8];
      STRATA_UNROLL for (int r = 0; r < 8; ++r) isum[r] = _mm512_setzero_si512();
      auto sub_sums = [&](int j, __m512i* p) {  // p[r]: 16 tokens' sums of sub-block j of row r
        STRATA_UNROLL for (int r = 0; r < 8; ++r) p[r] = _mm512_setzero_si512();
        STRATA_UNROLL for (int g = 0; g < kSub / 4; ++g) {
          const int G = kSub / 4 * j + g;
          const __m512i xv = _mm512_loadu_si512(X.q[G]);
          STRATA_UNROLL for (int r = 0; r < 8; ++r) {
            int32_t word;
            std::memcpy(&word, B.v[G] + 4 * r, 4);
            p[r] = _mm512_dpbusd_epi32(p[r], xv, _mm512_set1_epi32(word));
          }
        }
      };
      if constexpr (kPairs) {
        for (int j = 0; j < 256 / kSub; j += 2) {
          __m512i a[8], b[8];
          sub_sums(j, a);
          sub_sums(j + 1, b);
          if constexpr (kCentred)
            STRATA_UNROLL for (int r = 0; r < 8; ++r) {
              a[r] = _mm512_sub_epi32(a[r], _mm512_set1_epi32(off[j][r]));
              b[r] = _mm512_sub_epi32(b[r], _mm512_set1_epi32(off[j + 1][r]));
            }
          STRATA_UNROLL for (int r = 0; r < 8; ++r) {
            const __m512i pair = _mm512_mask_blend_epi16(0xAAAAAAAA, a[r], _mm512_slli_epi32(b[r], 16));
            isum[r] = _mm512_dpwssd_epi32(isum[r], pair, _mm512_set1_epi32(sc[j / 2][r]));
          }
        }
      } else {
        for (int j = 0; j < 256 / kSub; ++j) {
          __m512i p[8];
          sub_sums(j, p);
          STRATA_UNROLL for (int r = 0; r < 8; ++r)
            isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(p[r], _mm512_set1_epi32(sc[kSub / 16 * j][r])));
        }
      }
      const __m512 dy = _mm512_loadu_ps(X.d);
      STRATA_UNROLL for (int r = 0; r < 8; ++r) {
        const __m512i total = kCentred ? isum[r] : _mm512_sub_epi32(isum[r], _mm512_set1_epi32(corr[r]));
        acc[b][r] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(B.d[r]), dy), _mm512_cvtepi32_ps(total), acc[b][r]);
      }
      if constexpr (kMins != BandMins::kNone) {
        STRATA_UNROLL for (int r = 0; r < 8; ++r) {
          __m512i m32 = _mm512_setzero_si512();
          for (int q = 0; q < 8; ++q)
            m32 = _mm512_add_epi32(m32, _mm512_madd_epi16(_mm512_set1_epi32(B.mn[q][r]), _mm512_loadu_si512(X.bs[q])));
          const __m512 dm = _mm512_set1_ps(B.dmin[r]);
          if constexpr (kMins == BandMins::kSummedApart)
            mins[b][r] = _mm512_add_ps(mins[b][r], _mm512_mul_ps(dy, _mm512_mul_ps(dm, _mm512_cvtepi32_ps(m32))));
          else
            acc[b][r] = _mm512_fnmadd_ps(_mm512_mul_ps(dm, dy), _mm512_cvtepi32_ps(m32), acc[b][r]);
        }
      }
    }
  }
  // Each token's 8 rows leave with one store (transposed in registers): Y's rows for a token are
  // adjacent, its tokens far apart.
  const __mmask8 rows_mask = static_cast<__mmask8>((1u << nrows) - 1);
  for (int b = 0; b < nbands; ++b) {
    const int nt = std::min(kBandTokens, ntok - b * kBandTokens);
    __m256 half[2][8];
    for (int r = 0; r < 8; ++r) {
      const __m512 v = _mm512_sub_ps(acc[b][r], mins[b][r]);
      half[0][r] = _mm512_castps512_ps256(v);
      half[1][r] = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    }
    transpose8x8_ps(half[0]);
    transpose8x8_ps(half[1]);
    for (int t = 0; t < nt; ++t)
      _mm256_mask_storeu_ps(y + static_cast<size_t>(b * kBandTokens + t) * y_stride, rows_mask, half[t / 8][t % 8]);
  }
}

// Decode on AMD (Zen 4) one group per call: the pairs' two interleaved streams read memory at
// 50-65 % of one stream's speed there, whatever the software prefetch (2-8 KiB ahead, in slices
// or none), which costs more than the shared broadcasts gain. The 2-core Zen 4 host, Matvec from
// memory (MV_KIB=262144 MV_COLS=1024, best of 2), pairs -> one group, one thread: Q4_0 14.5 ->
// 24.1, Q8_0 13.8 -> 23.8, Q4_K 11.7 -> 21.6, Q6_K 11.6 -> 23.1 GB/s; two threads: Q4_0 26.3 ->
// 33.5, Q4_K 21.3 -> 32.5 GB/s; 4 tokens, two threads: Q4_K 18.1 -> 23.7. In cache the pairs are
// faster (Q4_K 83.8 against 60.3 G values/s), so prompts keep them. F16 and BF16 keep their four
// groups (one group per call read more slowly), and their four streams read faster there with no
// software prefetch: q2-F16 generation, bench -p 0 -n 32 -t 2 -r 3, nine alternated pairs of runs,
// prefetch -> none, median 31.4 -> 33.8 tok/s (none faster in 7 of the 9); Matvec/F16 from memory
// (MV_KIB=524288 MV_THREADS=2, best of 3) 32.2, 28.4, 29.0 -> 31.5, 42.0, 31.9 GB/s.
void amd_decode_streams(KernelTable& t) {
  decode_one_group_per_call(t);
  t.gemm_groups[static_cast<int>(GgmlType::F16)] = GroupsDispatch<GF16x16Unfetched, 4>::run;
  t.gemm_groups[static_cast<int>(GgmlType::BF16)] = GroupsDispatch<GBF16x16Unfetched, 4>::run;
}

void fill_avx512_x8_kernels(KernelTable& t) {
  static_assert(kX8Vnni, "gemm_x8_avx512.cpp must be built with -mavx512vnni -mavx512vl");
  t.gemm_x8[static_cast<int>(GgmlType::Q8_0)] = Dispatch<KQ8_0>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q4_0)] = Dispatch<KQ4_0>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q5_0)] = Dispatch<KQ5_0>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q4_1)] = Dispatch<KQ4_1>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q5_1)] = Dispatch<KQ5_1>::run;
  t.gemm_x8[static_cast<int>(GgmlType::IQ4_NL)] = Dispatch<KIQ4_NL>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q4_K)] = Dispatch<KQ4_K>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q5_K)] = Dispatch<KQ5_K>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q6_K)] = Dispatch<KQ6_K>::run;
  t.gemm_x8[static_cast<int>(GgmlType::IQ4_XS)] = Dispatch<KIQ4_XS>::run;
  // Several groups per call, two per 512-bit register: Q8_0, IQ4_NL and the K-quants and IQ4_XS gain such kernels, and F16
  // and BF16 take four groups (two registers) per call instead of AVX2's three.
  t.gemm_groups[static_cast<int>(GgmlType::Q4_0)] = GroupsDispatch<GQ4_0x16, 2>::run;
  t.gemm_groups[static_cast<int>(GgmlType::Q5_0)] = GroupsDispatch<GQ5_0x16, 2>::run;
  t.gemm_groups[static_cast<int>(GgmlType::Q4_1)] = GroupsDispatch<GQ4_1x16, 2>::run;
  t.gemm_groups[static_cast<int>(GgmlType::Q8_0)] = GroupsDispatch<GQ8_0x16, 2>::run;
  t.gemm_groups[static_cast<int>(GgmlType::IQ4_NL)] = GroupsDispatch<GIQ4_NLx16, 2>::run;
  t.gemm_groups[static_cast<int>(GgmlType::Q4_K)] = GroupsDispatch<GQ4_Kx16, 2>::run;
  t.gemm_groups[static_cast<int>(GgmlType::Q5_K)] = GroupsDispatch<GQ5_Kx16, 2>::run;
  t.gemm_groups[static_cast<int>(GgmlType::Q6_K)] = GroupsDispatch<GQ6_Kx16, 2>::run;
  t.gemm_groups[static_cast<int>(GgmlType::IQ4_XS)] = GroupsDispatch<GIQ4_XSx16, 2>::run;
  t.gemm_groups[static_cast<int>(GgmlType::Q2_K)] = GroupsDispatch<GQ2_Kx16, 2>::run;
  t.gemm_groups[static_cast<int>(GgmlType::Q3_K)] = GroupsDispatch<GQ3_Kx16, 2>::run;
  t.gemm_groups[static_cast<int>(GgmlType::TQ2_0)] = GroupsDispatch<GTQ2_0x16, 2>::run;
  t.gemm_groups[static_cast<int>(GgmlType::IQ2_XXS)] = GroupsDispatch<GIQ2_XXSx16, 2>::run;
  t.gemm_groups[static_cast<int>(GgmlType::IQ2_XS)] = GroupsDispatch<GIQ2x16, 2>::run;
  t.gemm_groups[static_cast<int>(GgmlType::IQ2_S)] = GroupsDispatch<GIQ2x16, 2>::run;
  t.gemm_groups[static_cast<int>(GgmlType::IQ3_XXS)] = GroupsDispatch<GIQ3_XXSx16, 2>::run;
  t.gemm_groups[static_cast<int>(GgmlType::IQ3_S)] = GroupsDispatch<GIQ3_Sx16, 2>::run;
  t.gemm_groups[static_cast<int>(GgmlType::IQ1_S)] = GroupsDispatch<GIQ1_Sx16, 2>::run;
  t.gemm_groups[static_cast<int>(GgmlType::IQ1_M)] = GroupsDispatch<GIQ1x16, 2>::run;
  for (GgmlType ty : {GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS, GgmlType::IQ3_S,
                      GgmlType::IQ1_S, GgmlType::IQ1_M})
    t.groups_per_call[static_cast<int>(ty)] = 2;
  t.groups_per_call[static_cast<int>(GgmlType::Q6_K)] = 2;
  t.groups_per_call[static_cast<int>(GgmlType::Q2_K)] = 2;
  t.groups_per_call[static_cast<int>(GgmlType::Q3_K)] = 2;
  t.groups_per_call[static_cast<int>(GgmlType::TQ2_0)] = 2;
  t.groups_per_call[static_cast<int>(GgmlType::IQ4_XS)] = 2;
  t.groups_per_call[static_cast<int>(GgmlType::Q4_K)] = 2;
  t.groups_per_call[static_cast<int>(GgmlType::Q5_K)] = 2;
  t.groups_per_call[static_cast<int>(GgmlType::Q8_0)] = 2;
  t.groups_per_call[static_cast<int>(GgmlType::Q4_1)] = 2;
  t.groups_per_call[static_cast<int>(GgmlType::IQ4_NL)] = 2;
  t.gemm_groups[static_cast<int>(GgmlType::F16)] = GroupsDispatch<GF16x16, 4>::run;
  t.gemm_groups[static_cast<int>(GgmlType::BF16)] = GroupsDispatch<GBF16x16, 4>::run;
  // Prefill on more than 4 tokens: the weights widened once per chunk of columns, 8 tokens x 32
  // rows per tile. strata_microbench Matmul/F16 (one thread), min of 6 alternated runs: chunks of
  // 128 columns 7.97 ms, 256 columns 7.66 ms; 12 tokens per tile 7.69 ms.
  t.gemm_half_wide[static_cast<int>(GgmlType::F16)] = gemm_half_wide<LanesAvx512, WidenF16, 8>;
  t.gemm_half_wide[static_cast<int>(GgmlType::BF16)] = gemm_half_wide<LanesAvx512, WidenBF16, 8>;
  t.half_wide_groups[static_cast<int>(GgmlType::F16)] = 4;
  t.half_wide_groups[static_cast<int>(GgmlType::BF16)] = 4;
  t.groups_per_call[static_cast<int>(GgmlType::F16)] = 4;
  t.groups_per_call[static_cast<int>(GgmlType::BF16)] = 4;
  // AMD hosts decode with fewer memory streams (Zen 4 measurements at amd_decode_streams).
  __builtin_cpu_init();
  if (__builtin_cpu_is("amd")) amd_decode_streams(t);
  // Prefill of every format with decoded rows, 16 tokens per register; and of the packed formats
  // whose prefill measured faster decoded so than through their packed kernel (AVX2 decodes packed
  // Q2_K, Q3_K and Q6_K too, for gemm_decoded8). Min ms of 4-6 alternated runs of
  // strata_microbench Matmul/<format> (128 tokens, one thread), packed kernel -> token bands:
  // Q2_K 5.30 -> 5.20, Q5_K 6.42 -> 5.45, Q6_K 7.27 -> 5.11, IQ4_XS 8.26 -> 4.08; Q4_K 5.52 -> 6.12,
  // so Q4_K keeps its packed kernel.
  auto bands = [&](GgmlType ty, GemmDecodedBandsFn f) { t.gemm_decoded_bands[static_cast<int>(ty)] = f; };
  constexpr auto kNone16 = gemm_decoded_bands<BandMins::kNone, 16>, kNone32 = gemm_decoded_bands<BandMins::kNone, 32>;
  for (GgmlType ty : {GgmlType::Q6_K, GgmlType::IQ2_XS, GgmlType::IQ2_S}) bands(ty, kNone16);
  for (GgmlType ty : {GgmlType::IQ2_XXS, GgmlType::IQ3_XXS, GgmlType::IQ3_S, GgmlType::IQ1_S, GgmlType::IQ4_XS}) bands(ty, kNone32);
  bands(GgmlType::Q3_K, gemm_decoded_bands<BandMins::kNone, 16, BandScales::kPairs>);
  for (GgmlType ty : {GgmlType::TQ1_0, GgmlType::TQ2_0}) bands(ty, gemm_decoded_bands<BandMins::kNone, 32, BandScales::kPairs>);
  bands(GgmlType::Q2_K, gemm_decoded_bands<BandMins::kSummedApart, 16, BandScales::kPairs>);
  bands(GgmlType::IQ1_M, gemm_decoded_bands<BandMins::kNone, 16, BandScales::kCentredPairs>);
  bands(GgmlType::Q5_K, gemm_decoded_bands<BandMins::kPerBlock, 32>);
  t.decode_packed8[static_cast<int>(GgmlType::Q2_K)] = decode_packed8_q23<BlockQ2_Kx8>;
  t.decode_packed8[static_cast<int>(GgmlType::Q5_K)] = decode_packed8_q45_k<BlockQ5_Kx8>;
  t.decode_packed8[static_cast<int>(GgmlType::Q6_K)] = decode_packed8_q6_k;
  t.decode_packed8[static_cast<int>(GgmlType::IQ4_XS)] = decode_packed8_nibble_values<IQ4_XSValues>;
  // Packed TQ2_0 too: through its packed kernel, 4 tokens per call, Matmul/TQ2_0 took 7.1-7.4 ms,
  // 2.5 times TQ1_0's decoded file rows; decoded, 3.1-3.4 ms. (With the AVX2 table the decoded
  // path measured slower than the packed kernel, 7.4-9.4 against 6.7-7.9 ms, so it stays there.)
  t.decode_packed8[static_cast<int>(GgmlType::TQ2_0)] = decode_packed8_q23<BlockTQ2_0x8>;
  share_tq1_0_packed_kernels(t);
}

}  // namespace
}  // namespace strata
