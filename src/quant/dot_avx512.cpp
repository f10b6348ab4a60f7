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

// IQ2_XS decode, 64 values per register: the 8 grid entries of a 64-value chunk come in one
// gather (9-bit indices into the 512 entries of 8 unsigned bytes), the chunk's 64 sign bits
// (7 stored per entry plus parity, with_parity) become a mask that negates the activations in
// one masked subtract, and maddubs then madd with the 16-value sub-scales (2s + 1) sum the
// products in 32 bits, as the AVX2 kernel does for 32 values with four table loads, a shuffle
// and psignb. The block's integer total is exact either way, and the float step per block is
// the AVX2 kernel's (dotq_codes_tile's block_step), so the bits are the same.
template <int NR>
void dotq_iq2_xs_rows512(int n, const uint8_t* w, size_t ws, const uint8_t* xq, float* out) {
  const uint64_t* grid = iq::tables().iq2xs;
  const auto* y = reinterpret_cast<const BlockQ8_K*>(xq);
  // Lane l of chunk j's scale vector (16-bit pairs 2l, 2l + 1 of the chunk) takes sub-block 4j + l / 8.
  static constexpr auto kScaleLanes = [] {
    std::array<std::array<uint16_t, 32>, 4> p{};
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 32; ++l) p[j][l] = static_cast<uint16_t>(4 * j + l / 8);
    return p;
  }();
  float acc[NR] = {};
  for (int i = 0; i < n / 256; ++i) {
    __m512i yv[4];
    for (int j = 0; j < 4; ++j) yv[j] = _mm512_loadu_si512(y[i].qs + 64 * j);
    STRATA_UNROLL for (int r = 0; r < NR; ++r) {
      const BlockIQ2_XS& b = reinterpret_cast<const BlockIQ2_XS*>(w + r * ws)[i];
      const __m512i q = _mm512_loadu_si512(b.qs);
      const __m512i idx = _mm512_and_si512(q, _mm512_set1_epi16(511));
      alignas(32) uint64_t signs[4];
      _mm256_store_si256(reinterpret_cast<__m256i*>(signs), with_parity(_mm512_cvtepi16_epi8(_mm512_srli_epi16(q, 9))));
      const __m512i sc = _mm512_castsi256_si512(odd_scale(nibbles16(b.scales)));
      const __m512i idx_lo = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(idx));
      const __m512i idx_hi = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(idx, 1));
      const __m256i e[4] = {_mm512_castsi512_si256(idx_lo), _mm512_extracti64x4_epi64(idx_lo, 1),
                            _mm512_castsi512_si256(idx_hi), _mm512_extracti64x4_epi64(idx_hi, 1)};
      __m512i tot = _mm512_setzero_si512();
      STRATA_UNROLL for (int j = 0; j < 4; ++j) {
        const __m512i g = _mm512_i32gather_epi64(e[j], grid, 8);
        const __m512i ys = _mm512_mask_sub_epi8(yv[j], _cvtu64_mask64(signs[j]), _mm512_setzero_si512(), yv[j]);
        const __m512i s = _mm512_permutexvar_epi16(_mm512_load_si512(kScaleLanes[j].data()), sc);
        tot = _mm512_add_epi32(tot, _mm512_madd_epi16(_mm512_maddubs_epi16(g, ys), s));
      }
      acc[r] = std::fma(h2f(b.d) * 0.125f * y[i].d, static_cast<float>(_mm512_reduce_add_epi32(tot)), acc[r]);
    }
  }
  for (int r = 0; r < NR; ++r) out[r] = acc[r];
}

void dotq_iq2_xs_rows(int n, const uint8_t* w, size_t row_stride, int nrows, const uint8_t* xq, float* out) {
  int r = 0;
  for (; r + 2 <= nrows; r += 2) dotq_iq2_xs_rows512<2>(n, w + r * row_stride, row_stride, xq, out + r);
  if (r < nrows) dotq_iq2_xs_rows512<1>(n, w + r * row_stride, row_stride, xq, out + r);
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
  t.dotq_rows[static_cast<int>(GgmlType::IQ2_XS)] = dotq_iq2_xs_rows;
}

}  // namespace strata
