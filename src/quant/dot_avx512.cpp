// AVX-512 (F, BW, VL) + VNNI kernels for the 32-element block formats on Q8_0 activations.
// Compiled with those ISA flags and only called after the CPU check in kernels.cpp. Two blocks
// go through one 512-bit register; vpdpbusd does the multiply and the 4-way add that AVX2 needs
// maddubs + madd for. Results match the scalar reference within float rounding
// (tests/test_kernels); the single-row kernel is the multi-row one with one row.
#include <immintrin.h>

#include <cstring>

#include "quant/formats.h"
#include "quant/kernels.h"
#include "quant/simd_avx2_blocks.h"

namespace strata {

namespace {

inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1); }
inline __m512 join_ps(__m256 lo, __m256 hi) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_zextpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}

template <typename Block, typename Unpack, int NT>
void dotq_vnni_n(int n, const Block* b, const uint8_t* xq, size_t stride, float* out) {
  __m512 acc[NT];
  __m256 acc_tail[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps(), acc_tail[t] = _mm256_setzero_ps();
  const int nb = n / 32;
  int i = 0;
  for (; i + 1 < nb; i += 2) {
    const __m512i q = join(Unpack::codes(b[i]), Unpack::codes(b[i + 1]));
    const __m512i aq = _mm512_abs_epi8(q);              // |q| as unsigned bytes (|-128| reads as 128)
    const __mmask64 neg = _mm512_movepi8_mask(q);       // where q < 0 the activation changes sign
    const float d0 = h2f(b[i].d), d1 = h2f(b[i + 1].d);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_0* y = reinterpret_cast<const BlockQ8_0*>(xq + t * stride) + i;
      __m512i x = join(load32(y[0].qs), load32(y[1].qs));
      x = _mm512_mask_sub_epi8(x, neg, _mm512_setzero_si512(), x);
      const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), aq, x);
      const __m512 s = join_ps(_mm256_set1_ps(d0 * h2f(y[0].d)), _mm256_set1_ps(d1 * h2f(y[1].d)));
      acc[t] = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(p), acc[t]);
    }
  }
  if (i < nb) {  // an odd last block: 256-bit VNNI
    const __m256i q = Unpack::codes(b[i]);
    const __m256i aq = _mm256_abs_epi8(q);
    const float d0 = h2f(b[i].d);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_0& y = reinterpret_cast<const BlockQ8_0*>(xq + t * stride)[i];
      const __m256i x = _mm256_sign_epi8(load32(y.qs), q);
      const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), aq, x);
      acc_tail[t] = _mm256_fmadd_ps(_mm256_set1_ps(d0 * h2f(y.d)), _mm256_cvtepi32_ps(p), acc_tail[t]);
    }
  }
  for (int t = 0; t < NT; ++t) {
    const __m256 folded = _mm256_add_ps(_mm512_castps512_ps256(acc[t]),
                                        _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[t]), 1)));
    __m256 v = _mm256_add_ps(folded, acc_tail[t]);
    __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    out[t] = _mm_cvtss_f32(lo);
  }
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
}

}  // namespace strata
