// AVX-512 attention over a page of cells (KernelTable::attn_scores, attn_values): the AVX2
// kernels' arithmetic 16 lanes wide, 16 cells per vector for the scores and 16 dimensions for the
// values. Separate multiplies and adds (no FMA, no contraction), each element's in the scalar
// references' order, so the bits are those of every other table.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "quant/kernels.h"
#include "ops/attn_scores_simd.h"
#include "quant/simd_avx2_blocks.h"  // STRATA_UNROLL

namespace strata {
namespace {

// G query rows against 16 cells whose keys are laid out by dimension (kt[d][16]).
struct Scores16 {
  template <int G>
  static void run(int dk, const float* kt, const float* q, float* out, int ld, int m) {
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
};

void attn_scores_avx512(int dk, int nc, const float* k, const float* q, int group, float* out, int ld) {
  attn_scores_by_cells<16, Scores16>(dk, nc, k, q, group, out, ld);
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
  // The AVX2 table's in-place f16 kernels (inherited) are not measured against these 16-cell
  // kernels on decoded rows yet: this table decodes the cells, as before they existed.
  t.attn_scores_f16 = nullptr;
  t.attn_values_f16 = nullptr;
}

}  // namespace strata
