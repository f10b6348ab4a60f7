// The driver of the SIMD attention-score kernels over a page of cells, shared by the AVX2 (8
// cells per vector) and AVX-512 (16) files. Internal linkage, as simd_avx2_blocks.h: each file
// gets its own copy built with its own flags.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "quant/simd_avx2_blocks.h"  // transpose8x8_ps

namespace strata {
namespace {

// out[g * ld + c] = q[g] . k[c] for nc cells, W at a time: the W cells' keys laid out by
// dimension (kt[d][W]; missing cells as zeros, 8 x 8 transposes when the cells are all there),
// then S::run<G>(dk, kt, q, out, ld, m) for up to 8 query rows at a time (m: the cells present).
template <int W, class S>
void attn_scores_by_cells(int dk, int nc, const float* k, const float* q, int group, float* out, int ld) {
  thread_local std::vector<float> kt;
  kt.resize(static_cast<size_t>(dk) * W);
  for (int c0 = 0; c0 < nc; c0 += W) {
    const int m = std::min(W, nc - c0);
    const float* kc = k + static_cast<size_t>(c0) * dk;
    if (m == W && dk % 8 == 0) {
      for (int h = 0; h < W / 8; ++h)
        for (int d0 = 0; d0 < dk; d0 += 8) {
          __m256 r[8];
          for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(kc + static_cast<size_t>(8 * h + j) * dk + d0);
          transpose8x8_ps(r);
          for (int j = 0; j < 8; ++j) _mm256_storeu_ps(kt.data() + W * (d0 + j) + 8 * h, r[j]);
        }
    } else {
      for (int d = 0; d < dk; ++d)
        for (int j = 0; j < W; ++j) kt[W * d + j] = j < m ? kc[static_cast<size_t>(j) * dk + d] : 0.f;
    }
    for (int g = 0; g < group; g += 8) {
      const float* qg = q + static_cast<size_t>(g) * dk;
      float* og = out + static_cast<size_t>(g) * ld + c0;
      switch (std::min(8, group - g)) {
        case 1: S::template run<1>(dk, kt.data(), qg, og, ld, m); break;
        case 2: S::template run<2>(dk, kt.data(), qg, og, ld, m); break;
        case 3: S::template run<3>(dk, kt.data(), qg, og, ld, m); break;
        case 4: S::template run<4>(dk, kt.data(), qg, og, ld, m); break;
        case 5: S::template run<5>(dk, kt.data(), qg, og, ld, m); break;
        case 6: S::template run<6>(dk, kt.data(), qg, og, ld, m); break;
        case 7: S::template run<7>(dk, kt.data(), qg, og, ld, m); break;
        default: S::template run<8>(dk, kt.data(), qg, og, ld, m); break;
      }
    }
  }
}

}  // namespace
}  // namespace strata
