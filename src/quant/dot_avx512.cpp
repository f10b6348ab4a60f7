// AVX-512 VNNI kernels (256-bit, AVX512VL) for the 32-element block formats on Q8_0
// activations, in the file layout. Compiled with those ISA flags and only called after the CPU
// check in kernels.cpp. vpdpbusd does the multiply and the 4-way add that AVX2 needs maddubs +
// madd for. (A first version put two blocks in one 512-bit register; on a Sapphire Rapids host
// it ran Dot/Q4_0 in 514 ns against AVX2's 335, though in that one run the unchanged AVX2 Q4_K
// kernel was slower too. This one ran within that host's noise of AVX2: 335, 435 vs 369, 458 ns.)
// Results match the scalar reference within float rounding (tests/test_kernels); the
// single-row kernel is the multi-row one with one row.
#include <immintrin.h>

#include <array>
#include <cmath>
#include <cstring>

#include "quant/formats.h"
#include "quant/iq_tables.h"
#include "quant/kernels.h"
#include "quant/simd_avx2_blocks.h"

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

// Decode of the grid i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S), 64 values per
// register: the chunk's grid entries come in one gather, its 64 sign bits (IQ2_S and IQ3_S
// store them; the others 7 per 8 values, with_parity adding the 8th) become a mask that negates
// the activations in one masked subtract, and maddubs then madd with the sub-scales (2s + 1) sum
// the products in 32 bits, where the AVX2 kernel takes 32 values with four or eight table loads,
// a shuffle and psignb. The block's integer total is exact either way and the float step per
// block is the AVX2 kernel's (dotq_codes_tile's block_step), so the bits are the same.
//
// F::prepare gives the block's 32 sign bytes and its sub-scales as 16-bit values of a vector
// (kLanes[j][l]: the one for 16-bit lane l of chunk j), F::grid chunk j's 64 grid bytes.
struct GridPrep {
  __m256i signs;
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
// 2s + 1 for eight 4-bit s in 32-bit lanes.
inline __m256i odd32(__m256i s) { return _mm256_or_si256(_mm256_slli_epi32(s, 1), _mm256_set1_epi32(1)); }

struct GridIQ2_XXS {
  using Block = BlockIQ2_XXS;
  static constexpr auto kLanes = scale_lanes<32, 2>();
  static float d(const Block& b) { return h2f(b.d) * 0.125f; }
  // 32-value chunk c: grid codes in bytes 8c..8c+3, signs (4 x 7 bits) and scale (bits 28..31) in the next word.
  static GridPrep prepare(const Block& b) {
    const auto* v = reinterpret_cast<const float*>(b.qs);
    const __m256i odd = _mm256_permute4x64_epi64(
        _mm256_castps_si256(_mm256_shuffle_ps(_mm256_loadu_ps(v), _mm256_loadu_ps(v + 8), _MM_SHUFFLE(3, 1, 3, 1))),
        _MM_SHUFFLE(3, 1, 2, 0));  // the 8 upper words in chunk order
    GridPrep p;
    p.signs = sign_fields4(odd);
    p.scales = _mm512_castsi256_si512(odd32(_mm256_srli_epi32(odd, 28)));
    return p;
  }
  static __m512i grid(const Block& b, const GridPrep&, int j, const iq::Tables& t) {
    const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs) + j);  // chunks 2j, 2j + 1
    return _mm512_i32gather_epi64(_mm256_cvtepu8_epi32(_mm_shuffle_epi32(w, _MM_SHUFFLE(2, 0, 2, 0))), t.iq2xxs, 8);
  }
};
struct GridIQ2_XS {
  using Block = BlockIQ2_XS;
  static constexpr auto kLanes = scale_lanes<16, 1>();
  static float d(const Block& b) { return h2f(b.d) * 0.125f; }
  // Each 16-bit code: a 9-bit grid index below 7 sign bits.
  static GridPrep prepare(const Block& b) {
    const __m512i q = _mm512_loadu_si512(b.qs);
    const __m512i idx = _mm512_and_si512(q, _mm512_set1_epi16(511));
    const __m512i lo = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(idx));
    const __m512i hi = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(idx, 1));
    GridPrep p;
    p.signs = with_parity(_mm512_cvtepi16_epi8(_mm512_srli_epi16(q, 9)));
    p.scales = _mm512_castsi256_si512(odd_scale(nibbles16(b.scales)));
    p.index[0] = _mm512_castsi512_si256(lo);
    p.index[1] = _mm512_extracti64x4_epi64(lo, 1);
    p.index[2] = _mm512_castsi512_si256(hi);
    p.index[3] = _mm512_extracti64x4_epi64(hi, 1);
    return p;
  }
  static __m512i grid(const Block&, const GridPrep& p, int j, const iq::Tables& t) {
    return _mm512_i32gather_epi64(p.index[j], t.iq2xs, 8);
  }
};
struct GridIQ3_XXS {
  using Block = BlockIQ3_XXS;
  static constexpr auto kLanes = scale_lanes<32, 2>();
  static float d(const Block& b) { return h2f(b.d) * 0.25f; }  // d * (0.5 + s) / 2 = (d / 4) * (2s + 1)
  static GridPrep prepare(const Block& b) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.scales_signs));
    GridPrep p;
    p.signs = sign_fields4(w);
    p.scales = _mm512_castsi256_si512(odd32(_mm256_srli_epi32(w, 28)));
    return p;
  }
  static __m512i grid(const Block& b, const GridPrep&, int j, const iq::Tables& t) {
    const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs) + j));
    return _mm512_i32gather_epi32(e, t.iq3xxs, 4);
  }
};

struct GridIQ2_S {
  using Block = BlockIQ2_S;
  static constexpr auto kLanes = scale_lanes<16, 1>();
  static float d(const Block& b) { return h2f(b.d) * 0.125f; }
  static GridPrep prepare(const Block& b) {
    GridPrep p;
    p.signs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.signs));  // stored as they are
    p.scales = _mm512_castsi256_si512(odd_scale(nibbles16(b.scales)));
    return p;
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
  static float d(const Block& b) { return h2f(b.d); }
  static GridPrep prepare(const Block& b) {
    uint32_t four;
    std::memcpy(&four, b.scales, 4);
    const __m256i nib = _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(four)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    GridPrep p;
    p.signs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.signs));  // stored as they are
    p.scales = _mm512_castsi256_si512(odd32(_mm256_and_si256(nib, _mm256_set1_epi32(0xF))));
    return p;
  }
  // Entry m of chunk j: qs[16j + m] | bit m of (qh[2j] | qh[2j + 1] << 8) << 8: the high bits as a mask.
  static __m512i grid(const Block& b, const GridPrep&, int j, const iq::Tables& t) {
    const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs) + j));
    const __mmask16 high = static_cast<__mmask16>(b.qh[2 * j] | b.qh[2 * j + 1] << 8);
    return _mm512_i32gather_epi32(_mm512_mask_or_epi32(lo, high, lo, _mm512_set1_epi32(256)), t.iq3s, 4);
  }
};

template <class F, int NR>
void dotq_grid_rows512(int n, const uint8_t* w, size_t ws, const uint8_t* xq, float* out) {
  using Block = typename F::Block;
  const iq::Tables& tab = iq::tables();
  const auto* y = reinterpret_cast<const BlockQ8_K*>(xq);
  float acc[NR] = {};
  for (int i = 0; i < n / 256; ++i) {
    __m512i yv[4];
    for (int j = 0; j < 4; ++j) yv[j] = _mm512_loadu_si512(y[i].qs + 64 * j);
    STRATA_UNROLL for (int r = 0; r < NR; ++r) {
      const Block& b = reinterpret_cast<const Block*>(w + r * ws)[i];
      const GridPrep p = F::prepare(b);
      alignas(32) uint64_t signs[4];
      _mm256_store_si256(reinterpret_cast<__m256i*>(signs), p.signs);
      __m512i tot = _mm512_setzero_si512();
      STRATA_UNROLL for (int j = 0; j < 4; ++j) {
        const __m512i ys = _mm512_mask_sub_epi8(yv[j], _cvtu64_mask64(signs[j]), _mm512_setzero_si512(), yv[j]);
        const __m512i s = _mm512_permutexvar_epi16(_mm512_loadu_si512(F::kLanes[j].data()), p.scales);
        tot = _mm512_add_epi32(tot, _mm512_madd_epi16(_mm512_maddubs_epi16(F::grid(b, p, j, tab), ys), s));
      }
      acc[r] = std::fma(F::d(b) * y[i].d, static_cast<float>(_mm512_reduce_add_epi32(tot)), acc[r]);
    }
  }
  for (int r = 0; r < NR; ++r) out[r] = acc[r];
}

// Two weight rows per call (sharing the activation loads), an odd last one alone.
template <class F>
void dotq_grid_rows(int n, const uint8_t* w, size_t row_stride, int nrows, const uint8_t* xq, float* out) {
  int r = 0;
  for (; r + 2 <= nrows; r += 2) dotq_grid_rows512<F, 2>(n, w + r * row_stride, row_stride, xq, out + r);
  if (r < nrows) dotq_grid_rows512<F, 1>(n, w + r * row_stride, row_stride, xq, out + r);
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
  // IQ1_S and IQ1_M through the same kernel (signed codes: abs, and their signs as the mask)
  // measured no faster (min 0.230 -> 0.244, 0.202 -> 0.198 ms) and keep the AVX2 kernels.
  t.dotq_rows[static_cast<int>(GgmlType::IQ2_XXS)] = dotq_grid_rows<GridIQ2_XXS>;
  t.dotq_rows[static_cast<int>(GgmlType::IQ2_XS)] = dotq_grid_rows<GridIQ2_XS>;
  t.dotq_rows[static_cast<int>(GgmlType::IQ3_XXS)] = dotq_grid_rows<GridIQ3_XXS>;
  t.dotq_rows[static_cast<int>(GgmlType::IQ2_S)] = dotq_grid_rows<GridIQ2_S>;
  t.dotq_rows[static_cast<int>(GgmlType::IQ3_S)] = dotq_grid_rows<GridIQ3_S>;
}

}  // namespace strata
