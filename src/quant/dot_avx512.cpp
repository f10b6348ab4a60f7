// AVX-512 VNNI kernels (256-bit, AVX512VL) for the 32-element block formats on Q8_0
// activations, in the file layout. Compiled with those ISA flags and only called after the CPU
// check in kernels.cpp. vpdpbusd does the multiply and the 4-way add that AVX2 needs maddubs +
// madd for. (A first version put two blocks in one 512-bit register; on a Sapphire Rapids host
// it ran Dot/Q4_0 in 514 ns against AVX2's 335, though in that one run the unchanged AVX2 Q4_K
// kernel was slower too. This one ran within that host's noise of AVX2: 335, 435 vs 369, 458 ns.)
// Results match the scalar reference within float rounding (tests/test_kernels); the
// single-row kernel is the multi-row one with one row.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "quant/formats.h"
#include "quant/gemm_x8.h"
#include "quant/iq_tables.h"
#include "quant/kernels.h"
#include "quant/simd_avx2_blocks.h"
#include "quant/simd_avx512.h"

namespace strata {

namespace {

template <typename Block, typename Unpack, int NT>
void dotq_vnni_n(int n, const Block* b, const uint8_t* xq, size_t stride, float* out) {
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int i = 0; i < n / 32; ++i) {
    const __m256i q = Unpack::codes(b[i]);
    const __m256i aq = _mm256_abs_epi8(q);  // |q| as unsigned bytes (|-128| reads as 128)
    const float dw = h2f(b[i].d);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_0& y = reinterpret_cast<const BlockQ8_0*>(xq + t * stride)[i];
      const __m256i x = _mm256_sign_epi8(load32(y.qs), q);  // the sign of q moved onto the activations
      const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), aq, x);
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * h2f(y.d)), _mm256_cvtepi32_ps(p), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = hsum(acc[t]);
}

template <typename Block, typename Unpack>
float dotq_vnni(int n, const void* w, const void* xq) {
  float out;
  dotq_vnni_n<Block, Unpack, 1>(n, static_cast<const Block*>(w), static_cast<const uint8_t*>(xq), 0, &out);
  return out;
}

template <typename Block, typename Unpack>
void dotq_vnni_multi(int n, const void* w, const uint8_t* xq, size_t stride, int ntok, float* out) {
  const Block* b = static_cast<const Block*>(w);
  switch (ntok) {
    case 1: dotq_vnni_n<Block, Unpack, 1>(n, b, xq, stride, out); break;
    case 2: dotq_vnni_n<Block, Unpack, 2>(n, b, xq, stride, out); break;
    case 3: dotq_vnni_n<Block, Unpack, 3>(n, b, xq, stride, out); break;
    default: dotq_vnni_n<Block, Unpack, 4>(n, b, xq, stride, out); break;
  }
}

// Decode of the grid i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S; IQ1_S and IQ1_M below), 64 values per
// register: the chunk's grid entries come in one gather, its 64 sign bits (IQ2_S and IQ3_S
// store them; the others 7 per 8 values, with_parity512 adding the 8th) become a mask that
// negates the activations in one masked subtract, and maddubs then vpdpwssd with the sub-scales
// (2s + 1) sum the products in 32 bits, where the AVX2 kernel takes 32 values with four or eight
// table loads, a shuffle and psignb. The block's integer total is exact either way and the float
// step per block is the AVX2 kernel's (dotq_codes_tile's block_step), so the bits are the same.
//
// With 512-bit instructions in flight only two ports take vector work, and without stored signs
// this loop is bound by its vector uops more than by its gathers, so two rows' sign bytes are
// made in one register. The compiler forwards the bytes stored to buf and takes each 64-bit mask
// out of that register through a general register; forcing the masks through memory was slower,
// the 8-byte loads waiting on the 64-byte store (Matvec/IQ2_XS min 0.109 ms as built, 0.158 with
// the loads forced, 0.164 with kmovq from memory).
//
// F::prepare<NR>(b, buf, s, p) gives the rows' sub-scales as 16-bit values of a vector
// (kLanes[j][l]: the one for 16-bit lane l of chunk j) and where their sign bytes are (their
// blocks for IQ2_S and IQ3_S, otherwise buf): row r's chunk j at s[r] + F::kSignStep * j.
// F::grid gives chunk j's 64 grid bytes.
struct GridPrep {
  __m512i scales;
  __m256i index[4];  // the formats' own use
};
template <int PerScale, int Stride>  // values per sub-scale; 16-bit elements between sub-scales
constexpr auto scale_lanes() {
  std::array<std::array<uint16_t, 32>, 4> p{};
  for (int j = 0; j < 4; ++j)
    for (int l = 0; l < 32; ++l) p[j][l] = static_cast<uint16_t>(Stride * ((64 * j + 2 * l) / PerScale));
  return p;
}
// with_parity and sign_fields4 (simd_avx2_blocks.h) on 64 bytes.
inline __m512i with_parity512(__m512i s7) {
  const __m512i parity4 = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0));
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i p = _mm512_xor_si512(_mm512_shuffle_epi8(parity4, _mm512_and_si512(s7, m4)),
                                     _mm512_shuffle_epi8(parity4, _mm512_and_si512(_mm512_srli_epi16(s7, 4), m4)));
  return _mm512_or_si512(s7, _mm512_slli_epi16(p, 7));
}
inline __m512i sign_fields4_512(__m512i w) {
  const __m512i f = _mm512_or_si512(
      _mm512_or_si512(_mm512_and_si512(w, _mm512_set1_epi32(0x7F)), _mm512_and_si512(_mm512_slli_epi32(w, 1), _mm512_set1_epi32(0x7F00))),
      _mm512_or_si512(_mm512_and_si512(_mm512_slli_epi32(w, 2), _mm512_set1_epi32(0x7F0000)),
                      _mm512_and_si512(_mm512_slli_epi32(w, 3), _mm512_set1_epi32(0x7F000000))));
  return with_parity512(f);
}
inline __mmask64 load_mask64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return _cvtu64_mask64(v);
}
// IQ2_XXS, IQ3_XXS: each row's eight 32-bit words, one per 32-value chunk, hold four 7-bit sign
// fields and the chunk's scale (bits 28..31); w1 is w0 again for one row.
template <int NR>
void prepare_sign_words(__m256i w0, __m256i w1, uint8_t* buf, const uint8_t** s, GridPrep* p) {
  _mm512_store_si512(buf, sign_fields4_512(_mm512_inserti64x4(_mm512_castsi256_si512(w0), w1, 1)));
  const __m256i w[2] = {w0, w1};
  for (int r = 0; r < NR; ++r) {
    s[r] = buf + 32 * r;
    p[r].scales = _mm512_castsi256_si512(odd32(_mm256_srli_epi32(w[r], 28)));
  }
}

struct GridIQ2_XXS {
  using Block = BlockIQ2_XXS;
  static constexpr auto kLanes = scale_lanes<32, 2>();
  static constexpr int kSignStep = 8;
  static float d(const Block& b) { return h2f(b.d) * 0.125f; }
  // 32-value chunk c: grid codes in bytes 8c..8c+3, signs (4 x 7 bits) and scale (bits 28..31) in the next word.
  static __m256i upper_words(const Block& b) {
    const auto* v = reinterpret_cast<const float*>(b.qs);
    return _mm256_permute4x64_epi64(
        _mm256_castps_si256(_mm256_shuffle_ps(_mm256_loadu_ps(v), _mm256_loadu_ps(v + 8), _MM_SHUFFLE(3, 1, 3, 1))),
        _MM_SHUFFLE(3, 1, 2, 0));  // the 8 upper words in chunk order
  }
  template <int NR>
  static void prepare(const Block* const* b, uint8_t* buf, const uint8_t** s, GridPrep* p) {
    prepare_sign_words<NR>(upper_words(*b[0]), upper_words(*b[NR - 1]), buf, s, p);
  }
  static __m512i grid(const Block& b, const GridPrep&, int j, const iq::Tables& t) {
    const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs) + j);  // chunks 2j, 2j + 1
    return _mm512_i32gather_epi64(_mm256_cvtepu8_epi32(_mm_shuffle_epi32(w, _MM_SHUFFLE(2, 0, 2, 0))), t.iq2xxs, 8);
  }
};
struct GridIQ2_XS {
  using Block = BlockIQ2_XS;
  static constexpr auto kLanes = scale_lanes<16, 1>();
  static constexpr int kSignStep = 16;
  static float d(const Block& b) { return h2f(b.d) * 0.125f; }
  // Each 16-bit code: a 9-bit grid index below 7 sign bits. packus puts the rows' fields for
  // codes 8j..8j+7 side by side in 128-bit lane j: row 0 at 16j, row 1 at 16j + 8.
  template <int NR>
  static void prepare(const Block* const* b, uint8_t* buf, const uint8_t** s, GridPrep* p) {
    const __m512i q0 = _mm512_loadu_si512(b[0]->qs), q1 = _mm512_loadu_si512(b[NR - 1]->qs);
    _mm512_store_si512(buf, with_parity512(_mm512_packus_epi16(_mm512_srli_epi16(q0, 9), _mm512_srli_epi16(q1, 9))));
    s[0] = buf;
    if (NR == 2) s[1] = buf + 8;
    for (int r = 0; r < NR; ++r) {
      const __m512i idx = _mm512_and_si512(r == 0 ? q0 : q1, _mm512_set1_epi16(511));
      const __m512i lo = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(idx));
      const __m512i hi = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(idx, 1));
      p[r].scales = _mm512_castsi256_si512(odd_scale(nibbles16(b[r]->scales)));
      p[r].index[0] = _mm512_castsi512_si256(lo);
      p[r].index[1] = _mm512_extracti64x4_epi64(lo, 1);
      p[r].index[2] = _mm512_castsi512_si256(hi);
      p[r].index[3] = _mm512_extracti64x4_epi64(hi, 1);
    }
  }
  static __m512i grid(const Block&, const GridPrep& p, int j, const iq::Tables& t) {
    return _mm512_i32gather_epi64(p.index[j], t.iq2xs, 8);
  }
};
struct GridIQ3_XXS {
  using Block = BlockIQ3_XXS;
  static constexpr auto kLanes = scale_lanes<32, 2>();
  static constexpr int kSignStep = 8;
  static float d(const Block& b) { return h2f(b.d) * 0.25f; }  // d * (0.5 + s) / 2 = (d / 4) * (2s + 1)
  static __m256i words(const Block& b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.scales_signs)); }
  template <int NR>
  static void prepare(const Block* const* b, uint8_t* buf, const uint8_t** s, GridPrep* p) {
    prepare_sign_words<NR>(words(*b[0]), words(*b[NR - 1]), buf, s, p);
  }
  static __m512i grid(const Block& b, const GridPrep&, int j, const iq::Tables& t) {
    const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs) + j));
    return _mm512_i32gather_epi32(e, t.iq3xxs, 4);
  }
};

struct GridIQ2_S {
  using Block = BlockIQ2_S;
  static constexpr auto kLanes = scale_lanes<16, 1>();
  static constexpr int kSignStep = 8;
  static float d(const Block& b) { return h2f(b.d) * 0.125f; }
  template <int NR>
  static void prepare(const Block* const* b, uint8_t*, const uint8_t** s, GridPrep* p) {
    for (int r = 0; r < NR; ++r) {
      s[r] = b[r]->signs;  // stored as they are
      p[r].scales = _mm512_castsi256_si512(odd_scale(nibbles16(b[r]->scales)));
    }
  }
  // Entry m of chunk j: qs[8j + m] | bits 2m, 2m + 1 of (qh[2j] | qh[2j + 1] << 8) << 8.
  static __m512i grid(const Block& b, const GridPrep&, int j, const iq::Tables& t) {
    const int h = b.qh[2 * j] | b.qh[2 * j + 1] << 8;
    const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                                        _mm256_set1_epi32(3));
    const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * j)));
    return _mm512_i32gather_epi64(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 8)), t.iq2s, 8);
  }
};
struct GridIQ3_S {
  using Block = BlockIQ3_S;
  static constexpr auto kLanes = scale_lanes<32, 2>();
  static constexpr int kSignStep = 8;
  static float d(const Block& b) { return h2f(b.d); }
  template <int NR>
  static void prepare(const Block* const* b, uint8_t*, const uint8_t** s, GridPrep* p) {
    for (int r = 0; r < NR; ++r) {
      s[r] = b[r]->signs;  // stored as they are
      uint32_t four;
      std::memcpy(&four, b[r]->scales, 4);
      const __m256i nib =
          _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(four)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
      p[r].scales = _mm512_castsi256_si512(odd32(_mm256_and_si256(nib, _mm256_set1_epi32(0xF))));
    }
  }
  // Entry m of chunk j: qs[16j + m] | bit m of (qh[2j] | qh[2j + 1] << 8) << 8: the high bits as a mask.
  static __m512i grid(const Block& b, const GridPrep&, int j, const iq::Tables& t) {
    const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs) + j));
    const __mmask16 high = static_cast<__mmask16>(b.qh[2 * j] | b.qh[2 * j + 1] << 8);
    return _mm512_i32gather_epi32(_mm512_mask_or_epi32(lo, high, lo, _mm512_set1_epi32(256)), t.iq3s, 4);
  }
};

// IQ1_S and IQ1_M: codes 8g + δ (g in {-1, 0, 1} from the grid, δ = ±1 per 32 values for IQ1_S,
// per 8 for IQ1_M) are taken as the unsigned bytes 8g + δ + 10 (the table iq1s_code holds them
// for both signs of δ, bit 11 of the index being δ's sign), so no signs move onto the activations
// and vpdpbusd sums four products at once; the 10 Σ y this adds comes off through the dot
// product's accumulator (dotq_grid_rows512). Entry e's index: qs[e], 3 bits of qh rotated into
// bits 8..10 (F::kRotate[e % 16]) and δ's sign in bit 11 (IQ1_M: the rotated nibble's top bit;
// IQ1_S: bit 15 of its qh word, moved down by 4; the dot product takes IQ1_S's δ through its
// sub-scales instead, kSign false: see GridIQ1_S).
template <class F, bool kSign>
inline void iq1_indices(const uint8_t* qs, const __m512i* qh16, GridPrep& p) {
  for (int h = 0; h < 2; ++h) {  // entries 16h .. 16h + 15
    const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs) + h));
    const __m512i rot = _mm512_rolv_epi32(qh16[h], _mm512_loadu_si512(F::kRotate.data()));
    __m512i idx;
    if constexpr (F::kSignRotated) {
      idx = _mm512_ternarylogic_epi32(rot, lo, _mm512_set1_epi32(0xF00), 0xEC);  // (rot & 0xF00) | lo
    } else {
      idx = _mm512_ternarylogic_epi32(rot, lo, _mm512_set1_epi32(0x700), 0xEC);
      if constexpr (kSign) idx = _mm512_ternarylogic_epi32(_mm512_srli_epi32(qh16[h], 4), idx, _mm512_set1_epi32(0x800), 0xEC);
    }
    p.index[2 * h] = _mm512_castsi512_si256(idx);
    p.index[2 * h + 1] = _mm512_extracti64x4_epi64(idx, 1);
  }
}
inline __m512i iq1_grid(const GridPrep& p, int j, const iq::Tables& t) {
  return _mm512_i32gather_epi64(p.index[j], t.iq1s_code, 8);
}
struct GridIQ1_S {
  using Block = BlockIQ1_S;
  static constexpr auto kLanes = scale_lanes<32, 2>();
  static constexpr bool kOffsetCodes = true;  // no signs: see above
  // Entry 4c + k: bits 3k..3k+2 of qh[c] (rotated left by 8 - 3k); δ's sign is bit 15 of qh[c].
  static constexpr std::array<int, 16> kRotate = {8, 5, 2, 31, 8, 5, 2, 31, 8, 5, 2, 31, 8, 5, 2, 31};
  static constexpr bool kSignRotated = false;
  // The dot product looks up every entry with δ = +1 and takes 2 Σ y off the sub-blocks whose δ
  // is negative, through a masked vpdpwssd of their sub-scales (negative_delta) with -2 Σ y per
  // 32 values: two instructions per row and block where the sign in the index takes four.
  static constexpr bool kSubBlockSigns = true;
  static float d(const Block& b) { return h2f(b.d) * 0.125f; }
  // Bit k: sub-block k's δ is negative. Taken where it is used: made in prepare, four rows' masks
  // did not fit the mask registers beside the gathers' and went through general registers.
  static __mmask16 negative_delta(const Block& b) {
    return _mm_test_epi16_mask(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh)), _mm_set1_epi16(static_cast<short>(0x8000)));
  }
  template <int NR, bool kSign = true>
  static void prepare(const Block* const* b, uint8_t*, const uint8_t**, GridPrep* p) {
    for (int r = 0; r < NR; ++r) {
      const __m256i qh = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[r]->qh)));
      // 2s + 1, s = bits 12..14: (qh >> 11 & 0xE) | 1
      p[r].scales = _mm512_castsi256_si512(
          _mm256_ternarylogic_epi32(_mm256_srli_epi32(qh, 11), _mm256_set1_epi32(0xE), _mm256_set1_epi32(1), 0xEA));
      const __m512i q = _mm512_castsi256_si512(qh);
      const __m512i qh16[2] = {_mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), q),
                               _mm512_permutexvar_epi32(_mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7), q)};
      iq1_indices<GridIQ1_S, kSign>(b[r]->qs, qh16, p[r]);
    }
  }
  static __m512i grid(const Block&, const GridPrep& p, int j, const iq::Tables& t) { return iq1_grid(p, j, t); }
};
// iq1m_odd_scales with its last steps in one: the sub-scale at bits 9..11 -> (>> 8 & 0xE) | 1.
inline __m256i iq1m_odd_scales512(const BlockIQ1_M& b) {
  return _mm256_ternarylogic_epi32(_mm256_srli_epi16(iq1m_scales_at_bit9(b), 8), _mm256_set1_epi16(0xE), _mm256_set1_epi16(1), 0xEA);
}
struct GridIQ1_M {
  using Block = BlockIQ1_M;
  static constexpr auto kLanes = scale_lanes<16, 1>();
  static constexpr bool kOffsetCodes = true;  // no signs: see above
  static constexpr bool kSubBlockSigns = false;
  // Entry e: nibble e % 2 of qh[e / 2], its low 3 bits for the index (rotated left by 8 or 4),
  // its top bit δ's sign (bit 11 once rotated).
  static constexpr std::array<int, 16> kRotate = {8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4, 8, 4};
  static constexpr bool kSignRotated = true;
  static float d(const Block& b) { return h2f(iq1m_d_bits(b)) * 0.125f; }
  template <int NR, bool = true>  // δ's sign always in the index: it costs nothing there
  static void prepare(const Block* const* b, uint8_t*, const uint8_t**, GridPrep* p) {
    for (int r = 0; r < NR; ++r) {
      p[r].scales = _mm512_castsi256_si512(iq1m_odd_scales512(*b[r]));
      const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[r]->qh)));
      const __m512i qh16[2] = {_mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), q),
                               _mm512_permutexvar_epi32(_mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15), q)};
      iq1_indices<GridIQ1_M, true>(b[r]->qs, qh16, p[r]);
    }
  }
  static __m512i grid(const Block&, const GridPrep& p, int j, const iq::Tables& t) { return iq1_grid(p, j, t); }
};

template <class F>
constexpr bool kOffsetCodes = requires { F::kOffsetCodes; };

// The offset codes' chunk pair q (chunks 2q, 2q + 1): their vpdpbusd sums of four products each,
// packed to 16 bits (128-bit lane L: four of chunk 2q, then four of 2q + 1), pair with the
// sub-scales this picks out of GridPrep::scales (both 16-bit halves of a 32-bit lane cover the
// same sub-scale). A sum of four is at most 4 * 9 * 128 in magnitude, so the pack never saturates.
template <class F>
constexpr auto packed_pair_lanes() {
  std::array<std::array<uint16_t, 32>, 2> p{};
  for (int q = 0; q < 2; ++q)
    for (int w = 0; w < 32; ++w) {
      const int lane = w / 8, i = w % 8;
      p[q][w] = F::kLanes[2 * q + i / 4][2 * (4 * lane + i % 4)];
    }
  return p;
}

// -10 Σ y per four values of each block's chunks, where the offset codes' accumulators start,
// and (off[4]) -2 Σ y per 32 values as 32-bit lanes (GridIQ1_S's negative δ).
constexpr int kOffsetSums = 5;
inline void offset_sums(const BlockQ8_K& y, __m512i* off) {
  for (int j = 0; j < 4; ++j)
    off[j] = _mm512_sub_epi32(_mm512_setzero_si512(),
                              _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(10), _mm512_loadu_si512(y.qs + 64 * j)));
  off[4] = _mm512_castsi256_si512(
      _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums)), _mm256_set1_epi16(-2)));
}

// off: offset_sums of every block (offset codes; null: made per block here).
template <class F, int NR>
void dotq_grid_rows512(int n, const uint8_t* w, size_t ws, const uint8_t* xq, const __m512i* off_all, float* out) {
  using Block = typename F::Block;
  const iq::Tables& tab = iq::tables();
  const auto* y = reinterpret_cast<const BlockQ8_K*>(xq);
  // block i's integer totals and float factors per row
  auto block = [&](int i, __m512i* tot, float* dy) {
    alignas(64) uint8_t sign_buf[64];
    __m512i yv[4];
    for (int j = 0; j < 4; ++j) yv[j] = _mm512_loadu_si512(y[i].qs + 64 * j);
    const Block* b[NR];
    for (int r = 0; r < NR; ++r) {
      b[r] = reinterpret_cast<const Block*>(w + r * ws) + i;
      // IQ1 (50 and 56 bytes per block, the fastest of these per block) 2 KiB ahead, 16 blocks
      // were too few: see fill_avx512_kernels
      if constexpr (kOffsetCodes<F>) prefetch_ahead<Block, 2048>(b[r]);
      else prefetch_codes_ahead(b[r]);
    }
    const uint8_t* sg[NR];
    GridPrep p[NR];
    if constexpr (kOffsetCodes<F>) {
      F::template prepare<NR, !F::kSubBlockSigns>(b, sign_buf, sg, p);
      // Σ (code + 10) y - 10 Σ y per four values: the accumulators start at -10 Σ y.
      __m512i off_here[kOffsetSums];
      const __m512i* off = off_all ? off_all + kOffsetSums * i : off_here;
      if (!off_all) offset_sums(y[i], off_here);
      static constexpr auto kPair = packed_pair_lanes<F>();
      STRATA_UNROLL for (int r = 0; r < NR; ++r) {
        tot[r] = _mm512_setzero_si512();
        STRATA_UNROLL for (int q = 0; q < 2; ++q) {
          const __m512i a0 = _mm512_dpbusd_epi32(off[2 * q], F::grid(*b[r], p[r], 2 * q, tab), yv[2 * q]);
          const __m512i a1 = _mm512_dpbusd_epi32(off[2 * q + 1], F::grid(*b[r], p[r], 2 * q + 1, tab), yv[2 * q + 1]);
          const __m512i s = _mm512_permutexvar_epi16(_mm512_loadu_si512(kPair[q].data()), p[r].scales);
          tot[r] = _mm512_dpwssd_epi32(tot[r], _mm512_packs_epi32(a0, a1), s);
        }
        // sub-scale k in 32-bit lane k with a zero upper half, against -2 Σ y (sign-extended)
        if constexpr (F::kSubBlockSigns) tot[r] = _mm512_mask_dpwssd_epi32(tot[r], F::negative_delta(*b[r]), p[r].scales, off[4]);
        dy[r] = F::d(*b[r]) * y[i].d;
      }
    } else {
      F::template prepare<NR>(b, sign_buf, sg, p);
      STRATA_UNROLL for (int r = 0; r < NR; ++r) {
        tot[r] = _mm512_setzero_si512();
        STRATA_UNROLL for (int j = 0; j < 4; ++j) {
          const __m512i ys = _mm512_mask_sub_epi8(yv[j], load_mask64(sg[r] + F::kSignStep * j), _mm512_setzero_si512(), yv[j]);
          const __m512i s = _mm512_permutexvar_epi16(_mm512_loadu_si512(F::kLanes[j].data()), p[r].scales);
          tot[r] = _mm512_dpwssd_epi32(tot[r], _mm512_maddubs_epi16(F::grid(*b[r], p[r], j, tab), ys), s);
        }
        dy[r] = F::d(*b[r]) * y[i].d;
      }
    }
  };
  sum_blocks<NR>(n / 256, block, out);
}

// Two weight rows per call (sharing the activation loads and the sign work), an odd last one alone;
// the offset codes four rows first (eight: faster in cache, slower end to end).
template <class F>
void dotq_grid_rows(int n, const uint8_t* w, size_t row_stride, int nrows, const uint8_t* xq, float* out) {
  int r = 0;
  // The offset sums once per call where they fit 20 KiB (rows of up to 16384 values).
  constexpr int kMaxBlocks = kOffsetCodes<F> ? 64 : 0;
  __m512i sums[kOffsetSums * kMaxBlocks + 1];
  const __m512i* off = nullptr;
  if constexpr (kOffsetCodes<F>) {
    if (nrows > 1 && n / 256 <= kMaxBlocks) {
      const auto* y = reinterpret_cast<const BlockQ8_K*>(xq);
      for (int i = 0; i < n / 256; ++i) offset_sums(y[i], sums + kOffsetSums * i);
      off = sums;
    }
    for (; r + 4 <= nrows; r += 4) dotq_grid_rows512<F, 4>(n, w + r * row_stride, row_stride, xq, off, out + r);
  }
  for (; r + 2 <= nrows; r += 2) dotq_grid_rows512<F, 2>(n, w + r * row_stride, row_stride, xq, off, out + r);
  if (r < nrows) dotq_grid_rows512<F, 1>(n, w + r * row_stride, row_stride, xq, off, out + r);
}

// Prefill decode of the same formats (KernelTable::decode_rows8, the DecodedX8Block layout):
// each pair of rows is prepared and looked up as for the dot kernel above, 64 values per
// gather, its signs applied with one masked subtract (IQ1: the offset of 10 taken back off),
// and the 8 rows' registers are transposed into the layout. The AVX2 decode takes 32 values per
// four or eight table loads and a 256-bit transpose; the values, sub-scales and factors are the
// same bytes, so the prefill kernels give the same bits.

// x[r] (8 rows of 16 dwords) to out[k], whose dword m is dword 2k + m / 8 of row m % 8: the
// DecodedX8Block order for 16 columns of 8 rows.
inline void transpose8x16_epi32(const __m512i* x, __m512i* out) {
  __m512i t[8], u[2][4];
  for (int q = 0; q < 4; ++q) {
    t[2 * q] = _mm512_unpacklo_epi32(x[2 * q], x[2 * q + 1]);
    t[2 * q + 1] = _mm512_unpackhi_epi32(x[2 * q], x[2 * q + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // u[h][c]: column 4L + c of rows 4h .. 4h + 3 in 128-bit lane L
    u[h][0] = _mm512_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
    u[h][1] = _mm512_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
    u[h][2] = _mm512_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
    u[h][3] = _mm512_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
  }
  for (int a = 0; a < 4; a += 2) {
    const __m512i p0 = _mm512_shuffle_i32x4(u[0][a], u[1][a], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i q0 = _mm512_shuffle_i32x4(u[0][a], u[1][a], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512i p1 = _mm512_shuffle_i32x4(u[0][a + 1], u[1][a + 1], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i q1 = _mm512_shuffle_i32x4(u[0][a + 1], u[1][a + 1], _MM_SHUFFLE(3, 2, 3, 2));
    out[a / 2] = _mm512_shuffle_i32x4(p0, p1, _MM_SHUFFLE(2, 0, 2, 0));      // columns a, a + 1
    out[2 + a / 2] = _mm512_shuffle_i32x4(p0, p1, _MM_SHUFFLE(3, 1, 3, 1));  // 4 + a, 5 + a
    out[4 + a / 2] = _mm512_shuffle_i32x4(q0, q1, _MM_SHUFFLE(2, 0, 2, 0));
    out[6 + a / 2] = _mm512_shuffle_i32x4(q0, q1, _MM_SHUFFLE(3, 1, 3, 1));
  }
}

// Rows r0 .. r0 + NR - 1 of the block: their values (val[j][r]: values 64j .. 64j + 63 of row r),
// sub-scales per 16 values twice as 16 bits (sc[r]) and factors.
template <class F, int NR>
inline void decode_grid_pair(const uint8_t* rows, size_t row_stride, int i, int r0, __m512i (*val)[8], __m512i* sc,
                             float* d) {
  using Block = typename F::Block;
  static constexpr auto kSubScale = [] {  // 16-bit element of the scales vector for values 16m ..
    std::array<uint16_t, 32> c{};
    for (int m = 0; m < 16; ++m) c[m] = F::kLanes[m / 4][8 * (m % 4)];
    return c;
  }();
  const iq::Tables& tab = iq::tables();
  const Block* b[NR];
  for (int r = 0; r < NR; ++r) b[r] = reinterpret_cast<const Block*>(rows + (r0 + r) * row_stride) + i;
  alignas(64) uint8_t sign_buf[64];
  const uint8_t* sg[NR];
  GridPrep p[NR];
  F::template prepare<NR>(b, sign_buf, sg, p);
  STRATA_UNROLL for (int r = 0; r < NR; ++r) {
    STRATA_UNROLL for (int j = 0; j < 4; ++j) {
      const __m512i g = F::grid(*b[r], p[r], j, tab);
      if constexpr (kOffsetCodes<F>) val[j][r0 + r] = _mm512_sub_epi8(g, _mm512_set1_epi8(10));
      else val[j][r0 + r] = _mm512_mask_sub_epi8(g, load_mask64(sg[r] + F::kSignStep * j), _mm512_setzero_si512(), g);
    }
    const __m512i sub = _mm512_cvtepu16_epi32(
        _mm512_castsi512_si256(_mm512_permutexvar_epi16(_mm512_loadu_si512(kSubScale.data()), p[r].scales)));
    sc[r0 + r] = _mm512_or_si512(sub, _mm512_slli_epi32(sub, 16));
    d[r0 + r] = F::d(*b[r]);
  }
}

template <class F>
void decode_rows8_grid(int n, const uint8_t* rows, size_t row_stride, int nrows, uint8_t* out) {
  auto* db = reinterpret_cast<DecodedX8Block*>(out);
  for (int i = 0; i < n / 256; ++i) {
    DecodedX8Block& d = db[i];
    __m512i val[4][8], sc[8], o[8];
    for (int r0 = 0; r0 < 8; r0 += 2) {
      if (r0 + 2 <= nrows) {
        decode_grid_pair<F, 2>(rows, row_stride, i, r0, val, sc, d.d);
        continue;
      }
      if (r0 < nrows) decode_grid_pair<F, 1>(rows, row_stride, i, r0, val, sc, d.d);
      for (int r = std::max(r0, nrows); r < r0 + 2; ++r) {  // rows past the matrix: zero
        for (int j = 0; j < 4; ++j) val[j][r] = _mm512_setzero_si512();
        sc[r] = _mm512_setzero_si512();
        d.d[r] = 0.f;
      }
    }
    transpose8x16_epi32(sc, o);
    for (int k = 0; k < 8; ++k) _mm512_storeu_si512(d.sc[2 * k], o[k]);
    for (int j = 0; j < 4; ++j) {
      transpose8x16_epi32(val[j], o);
      for (int k = 0; k < 8; ++k) _mm512_storeu_si512(d.v[16 * j + 2 * k], o[k]);
    }
    std::memset(d.dmin, 0, sizeof(d.dmin));
    std::memset(d.mn, 0, sizeof(d.mn));
  }
}

}  // namespace

void fill_avx512_kernels(KernelTable& t) {
  t.isa = "avx512vnni";
#define STRATA_VNNI(T, U)                                                         \
  t.dotq[static_cast<int>(GgmlType::T)] = dotq_vnni<Block##T, U>;                  \
  t.dotq_multi[static_cast<int>(GgmlType::T)] = dotq_vnni_multi<Block##T, U>;
  STRATA_VNNI(Q8_0, UnpackQ8_0)
  STRATA_VNNI(Q4_0, UnpackQ4_0)
  STRATA_VNNI(Q5_0, UnpackQ5_0)
  STRATA_VNNI(IQ4_NL, UnpackIQ4_NL)
#undef STRATA_VNNI
  // Decode of the grid i-quants. strata_microbench Matvec/<format> (MV_COLS=1024 MV_KIB=512, in
  // cache, one core), median ms of 5 alternated runs, AVX2 -> this: IQ2_XXS 0.293 -> 0.195,
  // IQ2_XS 0.197 -> 0.156, IQ2_S 0.166 -> 0.137, IQ3_XXS 0.226 -> 0.129, IQ3_S 0.181 -> 0.087.
  // Sign pairs, masks through general registers and vpdpwssd, min of 5 alternated runs: IQ2_XXS
  // 0.160 -> 0.135, IQ2_XS 0.136 -> 0.111, IQ2_S 0.113 -> 0.102 (IQ3_XXS, IQ3_S: no change).
  // IQ1_S and IQ1_M with their codes offset to unsigned bytes (no signs; an earlier try that
  // took |code| and the codes' signs as the mask measured no faster than AVX2): Matvec min of 5
  // alternated runs, AVX2 kernel -> this: IQ1_S 0.248 -> 0.189, IQ1_M 0.220 -> 0.169 ms; bench -n
  // 32 on q3-IQ1_S and q3-IQ1_M, 4 alternated runs, tg median 22.0 -> 31.8 and 23.6 -> 32.4 tok/s.
  // Then vpdpbusd into -10 Σ y, chunk pairs packed for one vpdpwssd, four rows per call, IQ1_S's δ
  // through its sub-scales, prefetch 2 KiB ahead (16 blocks before; 1.5 and 3 KiB no different),
  // Matvec median of 5, 3 alternated runs: IQ1_S 0.112-0.115 -> 0.087-0.089, IQ1_M 0.103-0.104
  // -> 0.079-0.080 ms; bench -n 32, 4 alternated rounds: 59.4-62.1 -> 68.9-73.7, 58.5-60.8 ->
  // 68.5-70.3 tok/s.
  t.dotq_rows[static_cast<int>(GgmlType::IQ2_XXS)] = dotq_grid_rows<GridIQ2_XXS>;
  t.dotq_rows[static_cast<int>(GgmlType::IQ2_XS)] = dotq_grid_rows<GridIQ2_XS>;
  t.dotq_rows[static_cast<int>(GgmlType::IQ3_XXS)] = dotq_grid_rows<GridIQ3_XXS>;
  t.dotq_rows[static_cast<int>(GgmlType::IQ2_S)] = dotq_grid_rows<GridIQ2_S>;
  t.dotq_rows[static_cast<int>(GgmlType::IQ3_S)] = dotq_grid_rows<GridIQ3_S>;
  t.dotq_rows[static_cast<int>(GgmlType::IQ1_S)] = dotq_grid_rows<GridIQ1_S>;
  t.dotq_rows[static_cast<int>(GgmlType::IQ1_M)] = dotq_grid_rows<GridIQ1_M>;
  t.decode_rows8[static_cast<int>(GgmlType::IQ2_XXS)] = decode_rows8_grid<GridIQ2_XXS>;
  t.decode_rows8[static_cast<int>(GgmlType::IQ2_XS)] = decode_rows8_grid<GridIQ2_XS>;
  t.decode_rows8[static_cast<int>(GgmlType::IQ2_S)] = decode_rows8_grid<GridIQ2_S>;
  t.decode_rows8[static_cast<int>(GgmlType::IQ3_XXS)] = decode_rows8_grid<GridIQ3_XXS>;
  t.decode_rows8[static_cast<int>(GgmlType::IQ3_S)] = decode_rows8_grid<GridIQ3_S>;
  t.decode_rows8[static_cast<int>(GgmlType::IQ1_S)] = decode_rows8_grid<GridIQ1_S>;
  t.decode_rows8[static_cast<int>(GgmlType::IQ1_M)] = decode_rows8_grid<GridIQ1_M>;
}

}  // namespace strata
