// AVX2 element-wise kernels.
// - Gated activations silu(g) * u and gelu_tanh(g) * u with a vector exp (Cephes' degree-6
//   polynomial after reduction by ln 2; about 1 ulp), both in the form g / (1 + exp(-z)) * u.
// - exp_shift (out = exp(x - shift)), for attention weights.
// - scale with one rounding per multiply, exactly as the scalar loop, so it gives the same bits;
//   so do attn_scores and attn_values, attention over a page of cells (the scores 8 dimensions to
//   a vector, as the reference's eight running sums), with one rounding per multiply and per add
//   (compiled without FMA contraction).
#include <immintrin.h>

#include <algorithm>

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
// same bits. The scores: attn_scores_simd.h.

void attn_scores_avx2(int dk, int nc, const float* k, const float* q, int group, float* out, int ld) {
  attn_scores_lanes8(dk, nc, RowKeys{k, dk}, q, group, out, ld);
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
// those of decoding the cells into rows first.

// Keys: each cell's vectors are converted as they are used, once per 4 query rows (the caller
// decodes the cells into rows for more).
void attn_scores_f16_avx2(int dk, int nc, const uint16_t* k, size_t stride, const float* q, int group, float* out, int ld) {
  attn_scores_lanes8(dk, nc, F16Keys{k, stride}, q, group, out, ld);
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
