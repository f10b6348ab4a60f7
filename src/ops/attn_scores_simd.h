// The SIMD attention-score kernels' common part, shared by the AVX2 and AVX-512 files. Internal
// linkage, as simd_avx2_blocks.h: each file gets its own copy built with its own flags.
//
// Every table sums a score in the scalar reference's order (kernels.h): eight running sums, lane
// j taking dimensions j, j + 8, j + 16, ..., added pairwise at the end, then the dimensions past
// the last whole 8 one by one. So a cell's key is read as it lies, 8 dimensions to a vector, and
// never transposed into one lane per cell (the shuffles that took most of the time before).
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "quant/simd_avx2_blocks.h"  // h2f, load_cvtph, STRATA_UNROLL

namespace strata {
namespace {

// One score's eight running sums, added as the reference adds them:
// ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)).
inline float sum_lanes8(__m256 s) {
  const __m128 p = _mm_hadd_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));  // s0+s1 s2+s3 s4+s5 s6+s7
  const __m128 p2 = _mm_hadd_ps(p, p);
  return _mm_cvtss_f32(_mm_add_ss(p2, _mm_movehdup_ps(p2)));
}

// Four scores' running sums (one row against four cells), each added as sum_lanes8 adds them:
// the pairs within each half, then the pairs of pairs, then the two halves.
inline __m128 sum_lanes8x4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// Scores of one row against n (at most 4) consecutive cells from their running sums, plus the
// dimensions d .. dk - 1 one by one (where dk is not a whole number of 8s). The AVX-512 kernels'
// reduction (2 x 8 lanes a vector).
template <class Keys>
void finish_scores(const __m256* s, int n, const Keys& keys, int c0, const float* q, int d, int dk, float* out) {
  const __m128 r = sum_lanes8x4(s[0], s[n > 1 ? 1 : 0], s[n > 2 ? 2 : 0], s[n > 3 ? 3 : 0]);
  if (n == 4 && d == dk) {
    _mm_storeu_ps(out, r);
    return;
  }
  alignas(16) float t[4];
  _mm_store_ps(t, r);
  for (int c = 0; c < n; ++c) {
    float v = t[c];
    for (int e = d; e < dk; ++e) v += q[e] * keys.value(c0 + c, e);
    out[c] = v;
  }
}

// Keys as rows of floats (k: [nc][dk]).
struct RowKeys {
  const float* k;
  int dk;
  const float* at(int c, int d) const { return k + static_cast<size_t>(c) * dk + d; }
  __m256 load8(int c, int d) const { return _mm256_loadu_ps(at(c, d)); }
  float value(int c, int d) const { return *at(c, d); }
};

// Keys as f16 cells where they lie (cell c's vector at k + c * stride).
struct F16Keys {
  const uint16_t* k;
  size_t stride;
  const uint16_t* at(int c, int d) const { return k + static_cast<size_t>(c) * stride + d; }
  __m256 load8(int c, int d) const { return load_cvtph(at(c, d)); }
  float value(int c, int d) const { return h2f(*at(c, d)); }
};

// Scores of G query rows against cells c0 .. c0 + C - 1: C x G running sums, each query vector
// loaded once per 8 dimensions and each key vector loaded (converted) once for the G rows.
template <int G, int C, class Keys>
void scores_block8(int dk, const Keys& keys, int c0, const float* q, float* out, int ld) {
  __m256 acc[C][G];
  STRATA_UNROLL for (int c = 0; c < C; ++c) STRATA_UNROLL for (int g = 0; g < G; ++g) acc[c][g] = _mm256_setzero_ps();
  int d = 0;
  for (; d + 8 <= dk; d += 8) {
    __m256 qv[G];
    STRATA_UNROLL for (int g = 0; g < G; ++g) qv[g] = _mm256_loadu_ps(q + static_cast<size_t>(g) * dk + d);
    STRATA_UNROLL for (int c = 0; c < C; ++c) {
      const __m256 kv = keys.load8(c0 + c, d);
      STRATA_UNROLL for (int g = 0; g < G; ++g) acc[c][g] = _mm256_add_ps(acc[c][g], _mm256_mul_ps(qv[g], kv));
    }
  }
  // One score at a time: four at once (finish_scores) took 1.1-1.45x as long on Zen 1, whose
  // 256-bit hadd runs at half the 128-bit one's rate.
  STRATA_UNROLL for (int c = 0; c < C; ++c) STRATA_UNROLL for (int g = 0; g < G; ++g) {
    float s = sum_lanes8(acc[c][g]);
    for (int e = d; e < dk; ++e) s += q[static_cast<size_t>(g) * dk + e] * keys.value(c0 + c, e);
    out[static_cast<size_t>(g) * ld + c0 + c] = s;
  }
}

// G rows against every cell: C cells a block, the last few one at a time.
template <int G, int C, class Keys>
void scores_cells8(int dk, int nc, const Keys& keys, const float* q, float* out, int ld) {
  int c = 0;
  for (; c + C <= nc; c += C) scores_block8<G, C>(dk, keys, c, q, out, ld);
  for (; c < nc; ++c) scores_block8<G, 1>(dk, keys, c, q, out, ld);
}

// out[g * ld + c] = q[g] . key c, up to 4 query rows at a time; the cells per block keep the
// C x G sums, G query vectors and a key within AVX2's 16 registers.
template <class Keys>
void attn_scores_lanes8(int dk, int nc, const Keys& keys, const float* q, int group, float* out, int ld) {
  for (int g = 0; g < group; g += 4) {
    const float* qg = q + static_cast<size_t>(g) * dk;
    float* og = out + static_cast<size_t>(g) * ld;
    switch (std::min(4, group - g)) {
      case 1: scores_cells8<1, 8>(dk, nc, keys, qg, og, ld); break;
      case 2: scores_cells8<2, 4>(dk, nc, keys, qg, og, ld); break;
      case 3: scores_cells8<3, 2>(dk, nc, keys, qg, og, ld); break;
      default: scores_cells8<4, 2>(dk, nc, keys, qg, og, ld); break;
    }
  }
}

}  // namespace
}  // namespace strata
