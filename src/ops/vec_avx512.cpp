// AVX-512 attention over a page of cells (KernelTable::attn_scores, attn_values): the AVX2
// kernels' arithmetic 16 lanes wide, 16 cells per vector for the scores and 16 dimensions for the
// values. Separate multiplies and adds (no FMA, no contraction), each element's in the scalar
// references' order, so the bits are those of every other table.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "quant/kernels.h"
#include "quant/simd_avx2_blocks.h"  // STRATA_UNROLL, transpose8x8_ps

namespace strata {
namespace {

// G query rows against 16 cells whose keys are laid out by dimension (kt[d][16]).
template <int G>
void scores16(int dk, const float* kt, const float* q, float* out, int ld, int m) {
  __m512 acc[G];
  STRATA_UNROLL for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
  for (int d = 0; d < dk; ++d) {
    const __m512 k = _mm512_loadu_ps(kt + 16 * d);
    STRATA_UNROLL for (int g = 0; g < G; ++g)
      acc[g] = _mm512_add_ps(acc[g], _mm512_mul_ps(_mm512_set1_ps(q[static_cast<size_t>(g) * dk + d]), k));
  }
  const __mmask16 cells = static_cast<__mmask16>((1u << m) - 1);
  STRATA_UNROLL for (int g = 0; g < G; ++g) _mm512_mask_storeu_ps(out + static_cast<size_t>(g) * ld, cells, acc[g]);
}

void attn_scores_avx512(int dk, int nc, const float* k, const float* q, int group, float* out, int ld) {
  thread_local std::vector<float> kt;
  kt.resize(static_cast<size_t>(dk) * 16);
  for (int c0 = 0; c0 < nc; c0 += 16) {
    const int m = std::min(16, nc - c0);
    const float* kc = k + static_cast<size_t>(c0) * dk;
    // The 16 cells' keys by dimension (missing cells as zeros), 8 x 8 tiles at a time.
    if (m == 16 && dk % 8 == 0) {
      for (int h = 0; h < 2; ++h)
        for (int d0 = 0; d0 < dk; d0 += 8) {
          __m256 r[8];
          for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(kc + static_cast<size_t>(8 * h + j) * dk + d0);
          transpose8x8_ps(r);
          for (int j = 0; j < 8; ++j) _mm256_storeu_ps(kt.data() + 16 * (d0 + j) + 8 * h, r[j]);
        }
    } else {
      for (int d = 0; d < dk; ++d)
        for (int j = 0; j < 16; ++j) kt[16 * d + j] = j < m ? kc[static_cast<size_t>(j) * dk + d] : 0.f;
    }
    for (int g = 0; g < group; g += 8) {
      const float* qg = q + static_cast<size_t>(g) * dk;
      float* og = out + static_cast<size_t>(g) * ld + c0;
      switch (std::min(8, group - g)) {
        case 1: scores16<1>(dk, kt.data(), qg, og, ld, m); break;
        case 2: scores16<2>(dk, kt.data(), qg, og, ld, m); break;
        case 3: scores16<3>(dk, kt.data(), qg, og, ld, m); break;
        case 4: scores16<4>(dk, kt.data(), qg, og, ld, m); break;
        case 5: scores16<5>(dk, kt.data(), qg, og, ld, m); break;
        case 6: scores16<6>(dk, kt.data(), qg, og, ld, m); break;
        case 7: scores16<7>(dk, kt.data(), qg, og, ld, m); break;
        default: scores16<8>(dk, kt.data(), qg, og, ld, m); break;
      }
    }
  }
}

// acc[0 .. 16R) += w[c] * v[c][0 .. 16R) for every cell, the sums held in R registers (the
// lanes of `last` only in the last register).
template <int R>
void values_block(int dv, int nc, const float* v, const float* w, float* acc, __mmask16 last) {
  __m512 a[R];
  STRATA_UNROLL for (int i = 0; i < R; ++i) a[i] = _mm512_maskz_loadu_ps(i == R - 1 ? last : 0xFFFF, acc + 16 * i);
  for (int c = 0; c < nc; ++c) {
    const __m512 wc = _mm512_set1_ps(w[c]);
    const float* vc = v + static_cast<size_t>(c) * dv;
    STRATA_UNROLL for (int i = 0; i < R; ++i)
      a[i] = _mm512_add_ps(a[i], _mm512_mul_ps(wc, _mm512_maskz_loadu_ps(i == R - 1 ? last : 0xFFFF, vc + 16 * i)));
  }
  STRATA_UNROLL for (int i = 0; i < R; ++i) _mm512_mask_storeu_ps(acc + 16 * i, i == R - 1 ? last : 0xFFFF, a[i]);
}

void attn_values_avx512(int dv, int nc, const float* v, const float* w, int ld, int group, float* acc) {
  for (int g = 0; g < group; ++g) {
    const float* wg = w + static_cast<size_t>(g) * ld;
    float* ag = acc + static_cast<size_t>(g) * dv;
    int d = 0;
    for (; d + 128 <= dv; d += 128) values_block<8>(dv, nc, v + d, wg, ag + d, 0xFFFF);
    for (; d < dv; d += 16)
      values_block<1>(dv, nc, v + d, wg, ag + d, static_cast<__mmask16>((1u << std::min(16, dv - d)) - 1));
  }
}

}  // namespace

void fill_avx512_vec(KernelTable& t) {
  t.attn_scores = attn_scores_avx512;
  t.attn_values = attn_values_avx512;
}

}  // namespace strata
