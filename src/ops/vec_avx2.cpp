// AVX2 element-wise kernels.
// - Gated activations silu(g) * u and gelu_tanh(g) * u with a vector exp (Cephes' degree-6
//   polynomial after reduction by ln 2; about 1 ulp), both in the form g / (1 + exp(-z)) * u.
// - exp_shift (out = exp(x - shift)), for attention weights.
// - scale with one rounding per multiply, exactly as the scalar loop, so it gives the same bits;
//   so do attn_scores and attn_values, attention over a page of cells (8 cells per vector for the
//   scores), with one rounding per multiply and per add (compiled without FMA contraction).
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "quant/kernels.h"
#include "ops/attn_scores_simd.h"
#include "quant/simd_avx2_blocks.h"  // STRATA_UNROLL

namespace strata {
namespace {

inline __m256 exp256(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3365f)), _mm256_set1_ps(88.3762f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = x - n ln2, with ln2 split in two for an exact first product.
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.f));
  // times 2^n, through the exponent bits (n is within the normal range after the clamp)
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

// out = g / (1 + exp(-z)) * u
inline __m256 gated(__m256 g, __m256 z, __m256 u) {
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.f), exp256(_mm256_sub_ps(_mm256_setzero_ps(), z)))), u);
}

void silu_mul_avx2(const float* g, const float* u, float* out, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    _mm256_storeu_ps(out + i, gated(x, x, _mm256_loadu_ps(u + i)));
  }
  if (i < n) {
    alignas(32) float gb[8] = {}, ub[8] = {}, ob[8];
    for (int j = 0; i + j < n; ++j) gb[j] = g[i + j], ub[j] = u[i + j];
    _mm256_store_ps(ob, gated(_mm256_load_ps(gb), _mm256_load_ps(gb), _mm256_load_ps(ub)));
    for (int j = 0; i + j < n; ++j) out[i + j] = ob[j];
  }
}

// 0.5 x (1 + tanh(a)) = x / (1 + exp(-2a)),  a = sqrt(2/pi) x (1 + 0.044715 x^2)
inline __m256 gelu_arg2(__m256 x) {
  const __m256 x2 = _mm256_mul_ps(x, x);
  const __m256 a = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.79788456080286535588f), x),
                                 _mm256_add_ps(_mm256_set1_ps(1.f), _mm256_mul_ps(_mm256_set1_ps(0.044715f), x2)));
  return _mm256_add_ps(a, a);
}

void gelu_tanh_mul_avx2(const float* g, const float* u, float* out, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    _mm256_storeu_ps(out + i, gated(x, gelu_arg2(x), _mm256_loadu_ps(u + i)));
  }
  if (i < n) {
    alignas(32) float gb[8] = {}, ub[8] = {}, ob[8];
    for (int j = 0; i + j < n; ++j) gb[j] = g[i + j], ub[j] = u[i + j];
    const __m256 x = _mm256_load_ps(gb);
    _mm256_store_ps(ob, gated(x, gelu_arg2(x), _mm256_load_ps(ub)));
    for (int j = 0; i + j < n; ++j) out[i + j] = ob[j];
  }
}

// y *= a
void scale_avx2(int n, float a, float* y) {
  const __m256 va = _mm256_set1_ps(a);
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), va));
  for (; i < n; ++i) y[i] *= a;
}

// out[i] = exp(x[i] - shift)
void exp_shift_avx2(int n, const float* x, float shift, float* out) {
  const __m256 vs = _mm256_set1_ps(shift);
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vs)));
  if (i < n) {
    alignas(32) float b[8] = {}, o[8];
    for (int j = 0; i + j < n; ++j) b[j] = x[i + j];
    _mm256_store_ps(o, exp256(_mm256_sub_ps(_mm256_load_ps(b), vs)));
    for (int j = 0; i + j < n; ++j) out[i + j] = o[j];
  }
}


// ---- Attention over a page of cells (KernelTable::attn_scores, attn_values) ----
// Separate multiplies and adds (no FMA), in the scalar references' order, so every table gives the
// same bits.

// G query rows against 8 cells whose keys are laid out by dimension (kt[d][8]): one lane per cell.
struct Scores8 {
  template <int G>
  static void run(int dk, const float* kt, const float* q, float* out, int ld, int m) {
    __m256 acc[G];
    STRATA_UNROLL for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
    for (int d = 0; d < dk; ++d) {
      const __m256 k = _mm256_loadu_ps(kt + 8 * d);
      STRATA_UNROLL for (int g = 0; g < G; ++g)
        acc[g] = _mm256_add_ps(acc[g], _mm256_mul_ps(_mm256_broadcast_ss(q + static_cast<size_t>(g) * dk + d), k));
    }
    STRATA_UNROLL for (int g = 0; g < G; ++g) {
      alignas(32) float o[8];
      _mm256_store_ps(o, acc[g]);
      for (int j = 0; j < m; ++j) out[static_cast<size_t>(g) * ld + j] = o[j];
    }
  }
};

void attn_scores_avx2(int dk, int nc, const float* k, const float* q, int group, float* out, int ld) {
  attn_scores_by_cells<8, Scores8>(dk, nc, k, q, group, out, ld);
}

// acc[0 .. 8R) += w[c] * v[c][0 .. 8R) for every cell, the sums held in R registers.
template <int R>
void values_block(int dv, int nc, const float* v, const float* w, float* acc) {
  __m256 a[R];
  STRATA_UNROLL for (int i = 0; i < R; ++i) a[i] = _mm256_loadu_ps(acc + 8 * i);
  for (int c = 0; c < nc; ++c) {
    const __m256 wc = _mm256_broadcast_ss(w + c);
    const float* vc = v + static_cast<size_t>(c) * dv;
    STRATA_UNROLL for (int i = 0; i < R; ++i) a[i] = _mm256_add_ps(a[i], _mm256_mul_ps(wc, _mm256_loadu_ps(vc + 8 * i)));
  }
  STRATA_UNROLL for (int i = 0; i < R; ++i) _mm256_storeu_ps(acc + 8 * i, a[i]);
}

void attn_values_avx2(int dv, int nc, const float* v, const float* w, int ld, int group, float* acc) {
  for (int g = 0; g < group; ++g) {
    const float* wg = w + static_cast<size_t>(g) * ld;
    float* ag = acc + static_cast<size_t>(g) * dv;
    int d = 0;
    for (; d + 64 <= dv; d += 64) values_block<8>(dv, nc, v + d, wg, ag + d);
    for (; d + 8 <= dv; d += 8) values_block<1>(dv, nc, v + d, wg, ag + d);
    for (; d < dv; ++d)
      for (int c = 0; c < nc; ++c) ag[d] += wg[c] * v[static_cast<size_t>(c) * dv + d];
  }
}

// ---- The same over f16 cells where they lie (the f16 KV format) ----
// Exact conversions (vcvtph2ps) feed the arithmetic above in the same order, so the bits are
// those of decoding the cells into rows first; what goes is the rows' stores and reloads, and for
// the keys the lane-crossing shuffles of transpose8x8_ps.

// G query rows against 16 cells laid out by dimension (kt[d][16]), two vectors a row: each sum
// is a chain of dependent adds over the dimensions, and one row against 8 cells left two chains
// to a Qwen3 KV head's pair of query rows, fewer than the add's latency needs. Four rows at a
// time keep the 8 sums, 2 key vectors and a broadcast within AVX2's 16 registers.
struct Scores16x2 {
  template <int G>
  static void run(int dk, const float* kt, const float* q, float* out, int ld, int m) {
    __m256 acc[G][2];
    STRATA_UNROLL for (int g = 0; g < G; ++g) acc[g][0] = acc[g][1] = _mm256_setzero_ps();
    for (int d = 0; d < dk; ++d) {
      const __m256 k0 = _mm256_loadu_ps(kt + 16 * d), k1 = _mm256_loadu_ps(kt + 16 * d + 8);
      STRATA_UNROLL for (int g = 0; g < G; ++g) {
        const __m256 qd = _mm256_broadcast_ss(q + static_cast<size_t>(g) * dk + d);
        acc[g][0] = _mm256_add_ps(acc[g][0], _mm256_mul_ps(qd, k0));
        acc[g][1] = _mm256_add_ps(acc[g][1], _mm256_mul_ps(qd, k1));
      }
    }
    STRATA_UNROLL for (int g = 0; g < G; ++g) {
      alignas(32) float o[16];
      _mm256_store_ps(o, acc[g][0]);
      _mm256_store_ps(o + 8, acc[g][1]);
      for (int j = 0; j < m; ++j) out[static_cast<size_t>(g) * ld + j] = o[j];
    }
  }
};

// Dimensions d0..d0+3 of 8 cells (cell j at kc + j * stride) as four rows of 8 lanes, r[i] =
// dimension d0 + i of every cell: one register holds the four dimensions of cells j and j + 4
// (two 8-byte loads, one conversion), so a 4 x 4 transpose within each 128-bit lane gives the
// rows, without the lane-crossing shuffles of transpose8x8_ps, which Zen 1 runs slowly.
inline void tile4x8_f16(const uint16_t* kc, size_t stride, int d0, __m256 r[4]) {
  __m256 c[4];
  for (int j = 0; j < 4; ++j) {
    const __m128i lo = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(kc + static_cast<size_t>(j) * stride + d0));
    const __m128i both = _mm_castpd_si128(
        _mm_loadh_pd(_mm_castsi128_pd(lo), reinterpret_cast<const double*>(kc + static_cast<size_t>(j + 4) * stride + d0)));
    c[j] = _mm256_cvtph_ps(both);
  }
  const __m256 t0 = _mm256_unpacklo_ps(c[0], c[1]), t1 = _mm256_unpackhi_ps(c[0], c[1]);
  const __m256 t2 = _mm256_unpacklo_ps(c[2], c[3]), t3 = _mm256_unpackhi_ps(c[2], c[3]);
  r[0] = _mm256_shuffle_ps(t0, t2, 0x44), r[1] = _mm256_shuffle_ps(t0, t2, 0xEE);
  r[2] = _mm256_shuffle_ps(t1, t3, 0x44), r[3] = _mm256_shuffle_ps(t1, t3, 0xEE);
}

// G (at most 4) query rows against 16 whole cells, the tiles' rows used as they are made (no
// kt): the 2 x 4 rows of a step, 2G sums and a broadcast fit AVX2's 16 registers. Each sum takes
// the dimensions in order, as Scores16x2.
template <int G>
void scores16_f16_direct(int dk, const uint16_t* kc, size_t stride, const float* q, float* out, int ld) {
  __m256 acc[G][2];
  STRATA_UNROLL for (int g = 0; g < G; ++g) acc[g][0] = acc[g][1] = _mm256_setzero_ps();
  for (int d0 = 0; d0 < dk; d0 += 4) {
    __m256 r[2][4];
    tile4x8_f16(kc, stride, d0, r[0]);
    tile4x8_f16(kc + 8 * stride, stride, d0, r[1]);
    STRATA_UNROLL for (int i = 0; i < 4; ++i) STRATA_UNROLL for (int g = 0; g < G; ++g) {
      const __m256 qd = _mm256_broadcast_ss(q + static_cast<size_t>(g) * dk + d0 + i);
      acc[g][0] = _mm256_add_ps(acc[g][0], _mm256_mul_ps(qd, r[0][i]));
      acc[g][1] = _mm256_add_ps(acc[g][1], _mm256_mul_ps(qd, r[1][i]));
    }
  }
  STRATA_UNROLL for (int g = 0; g < G; ++g) {
    _mm256_storeu_ps(out + static_cast<size_t>(g) * ld, acc[g][0]);
    _mm256_storeu_ps(out + static_cast<size_t>(g) * ld + 8, acc[g][1]);
  }
}

// Keys: 16 cells at a time. Up to 4 query rows (a decode token's group) take whole blocks
// straight from the tiles; otherwise the cells are laid out by dimension (kt[d][16]) once for
// all rows, 8 cells a tile, a tile with missing cells filled one value at a time with zeros past
// the cells.
void attn_scores_f16_avx2(int dk, int nc, const uint16_t* k, size_t stride, const float* q, int group, float* out, int ld) {
  thread_local std::vector<float> kt;
  kt.resize(static_cast<size_t>(dk) * 16);
  for (int c0 = 0; c0 < nc; c0 += 16) {
    const int m = std::min(16, nc - c0);
    const uint16_t* kb = k + static_cast<size_t>(c0) * stride;
    if (m == 16 && dk % 4 == 0 && group <= 4) {
      float* ob = out + c0;
      switch (group) {
        case 1: scores16_f16_direct<1>(dk, kb, stride, q, ob, ld); break;
        case 2: scores16_f16_direct<2>(dk, kb, stride, q, ob, ld); break;
        case 3: scores16_f16_direct<3>(dk, kb, stride, q, ob, ld); break;
        default: scores16_f16_direct<4>(dk, kb, stride, q, ob, ld); break;
      }
      continue;
    }
    for (int h = 0; h < 2; ++h) {
      const int mt = std::clamp(m - 8 * h, 0, 8);
      const uint16_t* kc = kb + static_cast<size_t>(8 * h) * stride;
      if (mt == 8 && dk % 4 == 0) {
        for (int d0 = 0; d0 < dk; d0 += 4) {
          __m256 r[4];
          tile4x8_f16(kc, stride, d0, r);
          for (int i = 0; i < 4; ++i) _mm256_storeu_ps(kt.data() + 16 * (d0 + i) + 8 * h, r[i]);
        }
      } else {
        for (int d = 0; d < dk; ++d)
          for (int j = 0; j < 8; ++j) kt[16 * d + 8 * h + j] = j < mt ? h2f(kc[static_cast<size_t>(j) * stride + d]) : 0.f;
      }
    }
    for (int g = 0; g < group; g += 4) {
      const float* qg = q + static_cast<size_t>(g) * dk;
      float* og = out + static_cast<size_t>(g) * ld + c0;
      switch (std::min(4, group - g)) {
        case 1: Scores16x2::run<1>(dk, kt.data(), qg, og, ld, m); break;
        case 2: Scores16x2::run<2>(dk, kt.data(), qg, og, ld, m); break;
        case 3: Scores16x2::run<3>(dk, kt.data(), qg, og, ld, m); break;
        default: Scores16x2::run<4>(dk, kt.data(), qg, og, ld, m); break;
      }
    }
  }
}

// Values: G query rows at once over S vectors of dimensions, each cell's vectors converted once
// for all G rows; G * S sums (at most 8) give the adds enough independent chains.
template <int G, int S>
void values_f16_block(int nc, const uint16_t* v, size_t stride, const float* w, int ld, float* acc, int dv) {
  __m256 a[G][S];
  STRATA_UNROLL for (int g = 0; g < G; ++g) STRATA_UNROLL for (int s = 0; s < S; ++s)
    a[g][s] = _mm256_loadu_ps(acc + static_cast<size_t>(g) * dv + 8 * s);
  for (int c = 0; c < nc; ++c) {
    const uint16_t* vc = v + static_cast<size_t>(c) * stride;
    __m256 x[S];
    STRATA_UNROLL for (int s = 0; s < S; ++s) x[s] = load_cvtph(vc + 8 * s);
    STRATA_UNROLL for (int g = 0; g < G; ++g) {
      const __m256 wc = _mm256_broadcast_ss(w + static_cast<size_t>(g) * ld + c);
      STRATA_UNROLL for (int s = 0; s < S; ++s) a[g][s] = _mm256_add_ps(a[g][s], _mm256_mul_ps(wc, x[s]));
    }
  }
  STRATA_UNROLL for (int g = 0; g < G; ++g) STRATA_UNROLL for (int s = 0; s < S; ++s)
    _mm256_storeu_ps(acc + static_cast<size_t>(g) * dv + 8 * s, a[g][s]);
}

template <int G>
void values_f16_rows(int dv, int nc, const uint16_t* v, size_t stride, const float* w, int ld, float* acc) {
  constexpr int S = G == 1 ? 8 : G == 2 ? 4 : 2;
  int d = 0;
  for (; d + 8 * S <= dv; d += 8 * S) values_f16_block<G, S>(nc, v + d, stride, w, ld, acc + d, dv);
  for (; d + 8 <= dv; d += 8) values_f16_block<G, 1>(nc, v + d, stride, w, ld, acc + d, dv);
  for (; d < dv; ++d)
    for (int g = 0; g < G; ++g)
      for (int c = 0; c < nc; ++c)
        acc[static_cast<size_t>(g) * dv + d] += w[static_cast<size_t>(g) * ld + c] * h2f(v[static_cast<size_t>(c) * stride + d]);
}

void attn_values_f16_avx2(int dv, int nc, const uint16_t* v, size_t stride, const float* w, int ld, int group, float* acc) {
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

void fill_avx2_vec(KernelTable& t) {
  t.exp_shift = exp_shift_avx2;
  t.attn_scores = attn_scores_avx2;
  t.attn_values = attn_values_avx2;
  t.attn_scores_f16 = attn_scores_f16_avx2;
  t.attn_values_f16 = attn_values_f16_avx2;
  t.silu_mul = silu_mul_avx2;
  t.gelu_tanh_mul = gelu_tanh_mul_avx2;
  t.scale = scale_avx2;
}

}  // namespace strata
