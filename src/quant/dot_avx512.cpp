// AVX-512 VNNI kernels (256-bit, AVX512VL) for the 32-element block formats on Q8_0
// activations, in the file layout. Compiled with those ISA flags and only called after the CPU
// check in kernels.cpp. vpdpbusd does the multiply and the 4-way add that AVX2 needs maddubs +
// madd for. (A first version put two blocks in one 512-bit register; on a Sapphire Rapids host
// it ran Dot/Q4_0 in 514 ns against AVX2's 335, though in that one run the unchanged AVX2 Q4_K
// kernel was slower too. This one ran within that host's noise of AVX2: 335, 435 vs 369, 458 ns.)
// Results match the scalar reference within float rounding (tests/test_kernels); the
// single-row kernel is the multi-row one with one row.
#include <immintrin.h>

#include <cstring>

#include "quant/formats.h"
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
