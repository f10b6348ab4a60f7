// AVX2 activation quantizers (Q8_0 for the 32-value formats, Q8_K for the K- and i-quants), and
// the f16 rows of the KV cache. They give exactly the bytes of the reference quantizers: same scale, products in float,
// round-to-nearest-even conversion, and for Q8_K the first element of largest magnitude.
#include <immintrin.h>

#include <cstring>

#include "quant/fp16.h"
#include "quant/kernels.h"

namespace strata {
namespace {

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// 32 floats times id, rounded to int8 (values are within +-127 by construction).
inline __m256i round32(const float* x, __m256 id) {
  __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), id));
  __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), id));
  __m256i c = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), id));
  __m256i d = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), id));
  __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
  __m256i q = _mm256_packs_epi16(ab, cd);
  // packs work per 128-bit lane: restore element order.
  return _mm256_permutevar8x32_epi32(q, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

const __m256 kAbsMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));

void quantize_q8_0_avx2(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    __m256 m = _mm256_and_ps(_mm256_loadu_ps(x), kAbsMask);
    for (int j = 8; j < 32; j += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + j), kAbsMask));
    const float amax = hmax(m);
    const float d = amax / 127.f, id = amax != 0.f ? 127.f / amax : 0.f;
    b[i].d = fp32_to_fp16(d);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs), round32(x, _mm256_set1_ps(id)));
  }
}

void quantize_q8_k_avx2(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / 256; ++i, x += 256) {
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < 256; j += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + j), kAbsMask));
    const float amax = hmax(m);
    if (amax == 0.f) {
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    float max = 0.f;  // the first element whose magnitude is amax, sign kept
    const __m256 va = _mm256_set1_ps(amax);
    for (int j = 0; j < 256; j += 8) {
      int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), kAbsMask), va, _CMP_EQ_OQ));
      if (hit) {
        max = x[j + __builtin_ctz(static_cast<unsigned>(hit))];
        break;
      }
    }
    const float iscale = -127.f / max;
    const __m256 vs = _mm256_set1_ps(iscale);
    for (int j = 0; j < 256; j += 32) {
      // min(127, .) as in the reference: -127/max * x can only exceed 127 by rounding.
      __m256i q = _mm256_min_epi8(round32(x + j, vs), _mm256_set1_epi8(127));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs + j), q);
      // Sums of each 16 codes.
      __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
      __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));  // 8 sums of 4 codes
      __m128i lo = _mm256_castsi256_si128(s32), hi = _mm256_extracti128_si256(s32, 1);
      __m128i h = _mm_hadd_epi32(lo, hi);  // sums of 8: [0-7, 8-15, 16-23, 24-31]
      h = _mm_hadd_epi32(h, h);            // [0-15, 16-31, ...]
      b[i].bsums[j / 16] = static_cast<int16_t>(_mm_cvtsi128_si32(h));
      b[i].bsums[j / 16 + 1] = static_cast<int16_t>(_mm_extract_epi32(h, 1));
    }
    b[i].d = 1 / iscale;
  }
}

// F16 rows (the f16 KV cache's): F16C's conversion rounds to nearest even as fp32_to_fp16 does,
// overflow, subnormals and zeros included; NaNs become fp32_to_fp16's sign | 0x7E00.
void quantize_f16_avx2(const float* x, void* dst, int64_t n) {
  auto* out = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    if (_mm256_movemask_ps(nan)) {
      // Each lane's top 16 bits (sign first) and its NaN mask, narrowed to the 16-bit lanes of h.
      auto narrow = [](__m256i x) { return _mm_packs_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1)); };
      const __m128i sign = _mm_and_si128(narrow(_mm256_srai_epi32(_mm256_castps_si256(v), 16)),
                                         _mm_set1_epi16(static_cast<int16_t>(0x8000)));
      h = _mm_blendv_epi8(h, _mm_or_si128(sign, _mm_set1_epi16(0x7E00)), narrow(_mm256_castps_si256(nan)));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = fp32_to_fp16(x[i]);
}

}  // namespace

void fill_avx2_quantizers(KernelTable& t) {
  t.quantize_act[static_cast<int>(GgmlType::Q8_0)] = quantize_q8_0_avx2;
  t.quantize_act[static_cast<int>(GgmlType::Q8_K)] = quantize_q8_k_avx2;
  t.quantize_act[static_cast<int>(GgmlType::F16)] = quantize_f16_avx2;
}

}  // namespace strata
