// AVX2 element-wise kernels.
// - Gated activations silu(g) * u and gelu_tanh(g) * u with a vector exp (Cephes' degree-6
//   polynomial after reduction by ln 2; about 1 ulp), both in the form g / (1 + exp(-z)) * u.
// - exp_shift (out = exp(x - shift)) and dot_rows (several dot products with one vector), for
//   attention scores and weights.
// - axpy and scale with one rounding per multiply and per add, exactly as the scalar loops
//   (compiled without FMA contraction), so they give the same bits.
#include <immintrin.h>

#include "quant/kernels.h"

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

// y += a * x
void axpy_avx2(int n, float a, const float* x, float* y) {
  const __m256 va = _mm256_set1_ps(a);
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, _mm256_loadu_ps(x + i))));
  for (; i < n; ++i) y[i] += a * x[i];
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

inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// out[r] = rows[r] . x for nrows rows of n (a multiple of 8 here; others go element by element).
void dot_rows_avx2(int n, const float* x, const float* rows, int nrows, float* out) {
  if (n % 8 != 0) {
    for (int r = 0; r < nrows; ++r) {
      float s = 0.f;
      for (int i = 0; i < n; ++i) s += rows[static_cast<size_t>(r) * n + i] * x[i];
      out[r] = s;
    }
    return;
  }
  for (int r = 0; r < nrows; ++r) {
    const float* w = rows + static_cast<size_t>(r) * n;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    }
    if (i < n) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
    out[r] = hsum8(_mm256_add_ps(a0, a1));
  }
}

}  // namespace

void fill_avx2_vec(KernelTable& t) {
  t.exp_shift = exp_shift_avx2;
  t.dot_rows = dot_rows_avx2;
  t.silu_mul = silu_mul_avx2;
  t.gelu_tanh_mul = gelu_tanh_mul_avx2;
  t.axpy = axpy_avx2;
  t.scale = scale_avx2;
}

}  // namespace strata
