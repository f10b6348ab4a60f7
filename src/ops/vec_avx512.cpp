// AVX-512 attention over a page of cells (KernelTable::attn_scores, attn_values, and the same
// over f16 cells in place): the AVX2 kernels' arithmetic 16 lanes wide. The scores keep the
// reference's eight running sums (attn_scores_simd.h), two cells to a vector, one in each 256-bit
// half; the values take 16 dimensions to a vector. Separate multiplies and adds (no FMA, no
// contraction), each element's in the scalar references' order, so the bits are those of every
// other table.
#include <immintrin.h>

#include <algorithm>

#include "quant/kernels.h"
#include "ops/attn_scores_simd.h"
#include "quant/simd_avx2_blocks.h"  // STRATA_UNROLL

namespace strata {
namespace {

// Two cells' keys, 8 dimensions each, as one vector: cell c in the low half, c + 1 in the high.
inline __m512 load8x2(const RowKeys& keys, int c, int d) {
  const __m512d lo = _mm512_castpd256_pd512(_mm256_castps_pd(keys.load8(c, d)));
  return _mm512_castpd_ps(_mm512_insertf64x4(lo, _mm256_castps_pd(keys.load8(c + 1, d)), 1));
}
inline __m512 load8x2(const F16Keys& keys, int c, int d) {
  __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(keys.at(c, d)))),
                                      _mm_loadu_si128(reinterpret_cast<const __m128i*>(keys.at(c + 1, d))), 1);
  return _mm512_cvtph_ps(h);
}

// Scores of G query rows against P pairs of cells from c0: P x G running sums of 2 x 8 lanes,
// each row's 8 query values broadcast to both halves.
template <int G, int P, class Keys>
void scores_pairs(int dk, const Keys& keys, int c0, const float* q, float* out, int ld) {
  __m512 acc[P][G];
  STRATA_UNROLL for (int p = 0; p < P; ++p) STRATA_UNROLL for (int g = 0; g < G; ++g) acc[p][g] = _mm512_setzero_ps();
  int d = 0;
  for (; d + 8 <= dk; d += 8) {
    __m512 qv[G];
    STRATA_UNROLL for (int g = 0; g < G; ++g)
      qv[g] = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd(reinterpret_cast<const double*>(q + static_cast<size_t>(g) * dk + d))));
    STRATA_UNROLL for (int p = 0; p < P; ++p) {
      const __m512 kv = load8x2(keys, c0 + 2 * p, d);
      STRATA_UNROLL for (int g = 0; g < G; ++g) acc[p][g] = _mm512_add_ps(acc[p][g], _mm512_mul_ps(qv[g], kv));
    }
  }
  STRATA_UNROLL for (int g = 0; g < G; ++g) {
    __m256 cells[2 * P];  // cell c0 + i's eight running sums
    STRATA_UNROLL for (int p = 0; p < P; ++p) {
      cells[2 * p] = _mm512_castps512_ps256(acc[p][g]);
      cells[2 * p + 1] = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[p][g]), 1));
    }
    STRATA_UNROLL for (int i = 0; i < 2 * P; i += 4)
      finish_scores(cells + i, std::min(4, 2 * P - i), keys, c0 + i, q + static_cast<size_t>(g) * dk, d, dk,
                    out + static_cast<size_t>(g) * ld + c0 + i);
  }
}

// G rows against every cell: 8 cells a block, then pairs, then a last odd cell 8 lanes wide.
template <int G, class Keys>
void scores_cells16(int dk, int nc, const Keys& keys, const float* q, float* out, int ld) {
  int c = 0;
  for (; c + 8 <= nc; c += 8) scores_pairs<G, 4>(dk, keys, c, q, out, ld);
  for (; c + 2 <= nc; c += 2) scores_pairs<G, 1>(dk, keys, c, q, out, ld);
  if (c < nc) scores_block8<G, 1>(dk, keys, c, q, out, ld);
}

// Up to 4 query rows at a time: 4 x 4 sums, 4 query vectors and a key within 32 registers.
template <class Keys>
void attn_scores_lanes16(int dk, int nc, const Keys& keys, const float* q, int group, float* out, int ld) {
  for (int g = 0; g < group; g += 4) {
    const float* qg = q + static_cast<size_t>(g) * dk;
    float* og = out + static_cast<size_t>(g) * ld;
    switch (std::min(4, group - g)) {
      case 1: scores_cells16<1>(dk, nc, keys, qg, og, ld); break;
      case 2: scores_cells16<2>(dk, nc, keys, qg, og, ld); break;
      case 3: scores_cells16<3>(dk, nc, keys, qg, og, ld); break;
      default: scores_cells16<4>(dk, nc, keys, qg, og, ld); break;
    }
  }
}

void attn_scores_avx512(int dk, int nc, const float* k, const float* q, int group, float* out, int ld) {
  attn_scores_lanes16(dk, nc, RowKeys{k, dk}, q, group, out, ld);
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

// ---- The same over f16 cells where they lie (the f16 KV format) ----
// Exact conversions (vcvtph2ps) feed the arithmetic above in the same order, so the bits are
// those of decoding the cells into rows first.

// Keys: each cell's vectors are converted as they are used, once per 4 query rows (the caller
// decodes the cells into rows for more).
void attn_scores_f16_avx512(int dk, int nc, const uint16_t* k, size_t stride, const float* q, int group, float* out, int ld) {
  attn_scores_lanes16(dk, nc, F16Keys{k, stride}, q, group, out, ld);
}

// Values: G query rows at once over S vectors of 16 dimensions, each cell's vectors converted
// once for all G rows.
template <int G, int S>
void values_f16_block(int nc, const uint16_t* v, size_t stride, const float* w, int ld, float* acc, int dv) {
  __m512 a[G][S];
  STRATA_UNROLL for (int g = 0; g < G; ++g) STRATA_UNROLL for (int s = 0; s < S; ++s)
    a[g][s] = _mm512_loadu_ps(acc + static_cast<size_t>(g) * dv + 16 * s);
  for (int c = 0; c < nc; ++c) {
    const uint16_t* vc = v + static_cast<size_t>(c) * stride;
    __m512 x[S];
    STRATA_UNROLL for (int s = 0; s < S; ++s)
      x[s] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(vc + 16 * s)));
    STRATA_UNROLL for (int g = 0; g < G; ++g) {
      const __m512 wc = _mm512_set1_ps(w[static_cast<size_t>(g) * ld + c]);
      STRATA_UNROLL for (int s = 0; s < S; ++s) a[g][s] = _mm512_add_ps(a[g][s], _mm512_mul_ps(wc, x[s]));
    }
  }
  STRATA_UNROLL for (int g = 0; g < G; ++g) STRATA_UNROLL for (int s = 0; s < S; ++s)
    _mm512_storeu_ps(acc + static_cast<size_t>(g) * dv + 16 * s, a[g][s]);
}

template <int G>
void values_f16_rows(int dv, int nc, const uint16_t* v, size_t stride, const float* w, int ld, float* acc) {
  constexpr int S = G <= 2 ? 8 : 4;
  int d = 0;
  for (; d + 16 * S <= dv; d += 16 * S) values_f16_block<G, S>(nc, v + d, stride, w, ld, acc + d, dv);
  for (; d + 16 <= dv; d += 16) values_f16_block<G, 1>(nc, v + d, stride, w, ld, acc + d, dv);
  for (; d < dv; ++d)
    for (int g = 0; g < G; ++g)
      for (int c = 0; c < nc; ++c)
        acc[static_cast<size_t>(g) * dv + d] += w[static_cast<size_t>(g) * ld + c] * h2f(v[static_cast<size_t>(c) * stride + d]);
}

void attn_values_f16_avx512(int dv, int nc, const uint16_t* v, size_t stride, const float* w, int ld, int group, float* acc) {
  for (int g = 0; g < group; g += 4) {
    const float* wg = w + static_cast<size_t>(g) * ld;
    float* ag = acc + static_cast<size_t>(g) * dv;
    switch (std::min(4, group - g)) {
      case 1: values_f16_rows<1>(dv, nc, v, stride, wg, ld, ag); break;
      case 2: values_f16_rows<2>(dv, nc, v, stride, wg, ld, ag); break;
      case 3: values_f16_rows<3>(dv, nc, v, stride, wg, ld, ag); break;
      default: values_f16_rows<4>(dv, nc, v, stride, wg, ld, ag); break;
    }
  }
}

}  // namespace

void fill_avx512_vec(KernelTable& t) {
  t.attn_scores = attn_scores_avx512;
  t.attn_values = attn_values_avx512;
  t.attn_scores_f16 = attn_scores_f16_avx512;
  t.attn_values_f16 = attn_values_f16_avx512;
}

}  // namespace strata
