// AVX2 + FMA + F16C kernels. Compiled with those ISA flags and only called after the CPU check
// in kernels.cpp. Each kernel matches dot_row_ref within float rounding (tests/test_kernels).
#include <immintrin.h>

#include "quant/dequant_blocks.h"
#include "quant/kernels.h"

namespace strata {

namespace {

inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// acc += codes[0..16) * x[0..16), codes as signed bytes.
inline __m256 fma_i8x16(__m128i q, const float* x, __m256 acc) {
  __m256 a = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
  __m256 b = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)));
  acc = _mm256_fmadd_ps(a, _mm256_loadu_ps(x), acc);
  return _mm256_fmadd_ps(b, _mm256_loadu_ps(x + 8), acc);
}

inline float dot_f32_n(int n, const float* a, const float* x) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(x + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(x + i + 8), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(x + i + 16), s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(x + i + 24), s3);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(x + i), s0);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (; i < n; ++i) s += a[i] * x[i];
  return s;
}

float dot_f32(int n, const void* w, const float* x) { return dot_f32_n(n, static_cast<const float*>(w), x); }

float dot_f16(int n, const void* w, const float* x) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
  int i = 0;
  auto ld = [&](int k) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + k))); };
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(ld(i), _mm256_loadu_ps(x + i), s0);
    s1 = _mm256_fmadd_ps(ld(i + 8), _mm256_loadu_ps(x + i + 8), s1);
    s2 = _mm256_fmadd_ps(ld(i + 16), _mm256_loadu_ps(x + i + 16), s2);
    s3 = _mm256_fmadd_ps(ld(i + 24), _mm256_loadu_ps(x + i + 24), s3);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(ld(i), _mm256_loadu_ps(x + i), s0);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (; i < n; ++i) s += fp16_to_fp32(a[i]) * x[i];
  return s;
}

float dot_bf16(int n, const void* w, const float* x) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  __m256 s0 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    s0 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), _mm256_loadu_ps(x + i), s0);
  }
  float s = hsum(s0);
  for (; i < n; ++i) s += bf16_to_fp32(a[i]) * x[i];
  return s;
}

float dot_q8_0(int n, const void* w, const float* x) {
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(w);
  __m256 acc = _mm256_setzero_ps();
  for (int i = 0; i < n / 32; ++i, x += 32) {
    __m256 t = _mm256_setzero_ps();
    t = fma_i8x16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs)), x, t);
    t = fma_i8x16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs + 16)), x + 16, t);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16_to_fp32(b[i].d)), t, acc);
  }
  return hsum(acc);
}

// Splits 16 packed bytes into low nibbles (elements 0..15) and high nibbles (16..31).
inline void nibbles(const uint8_t* qs, __m128i& lo, __m128i& hi) {
  __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(0x0F);
  lo = _mm_and_si128(q, m);
  hi = _mm_and_si128(_mm_srli_epi16(q, 4), m);
}

float dot_q4_0(int n, const void* w, const float* x) {
  const BlockQ4_0* b = static_cast<const BlockQ4_0*>(w);
  const __m128i eight = _mm_set1_epi8(8);
  __m256 acc = _mm256_setzero_ps();
  for (int i = 0; i < n / 32; ++i, x += 32) {
    __m128i lo, hi;
    nibbles(b[i].qs, lo, hi);
    __m256 t = fma_i8x16(_mm_sub_epi8(lo, eight), x, _mm256_setzero_ps());
    t = fma_i8x16(_mm_sub_epi8(hi, eight), x + 16, t);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16_to_fp32(b[i].d)), t, acc);
  }
  return hsum(acc);
}

float dot_q4_1(int n, const void* w, const float* x) {
  const BlockQ4_1* b = static_cast<const BlockQ4_1*>(w);
  __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
  for (int i = 0; i < n / 32; ++i, x += 32) {
    __m128i lo, hi;
    nibbles(b[i].qs, lo, hi);
    __m256 t = fma_i8x16(lo, x, _mm256_setzero_ps());
    t = fma_i8x16(hi, x + 16, t);
    __m256 sx = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8)),
                              _mm256_add_ps(_mm256_loadu_ps(x + 16), _mm256_loadu_ps(x + 24)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16_to_fp32(b[i].d)), t, acc);
    accm = _mm256_fmadd_ps(_mm256_set1_ps(fp16_to_fp32(b[i].m)), sx, accm);
  }
  return hsum(_mm256_add_ps(acc, accm));
}

// 16 bytes holding 0x10 where bit j of `bits` (j = 0..15) is set.
inline __m128i bits_to_0x10(uint32_t bits) {
  const __m128i shuf = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const __m128i sel = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
  __m128i v = _mm_shuffle_epi8(_mm_cvtsi32_si128(static_cast<int>(bits & 0xFFFF)), shuf);
  v = _mm_cmpeq_epi8(_mm_and_si128(v, sel), sel);
  return _mm_and_si128(v, _mm_set1_epi8(0x10));
}

float dot_q5_0(int n, const void* w, const float* x) {
  const BlockQ5_0* b = static_cast<const BlockQ5_0*>(w);
  const __m128i sixteen = _mm_set1_epi8(16);
  __m256 acc = _mm256_setzero_ps();
  for (int i = 0; i < n / 32; ++i, x += 32) {
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    __m128i lo, hi;
    nibbles(b[i].qs, lo, hi);
    lo = _mm_sub_epi8(_mm_or_si128(lo, bits_to_0x10(qh)), sixteen);
    hi = _mm_sub_epi8(_mm_or_si128(hi, bits_to_0x10(qh >> 16)), sixteen);
    __m256 t = fma_i8x16(lo, x, _mm256_setzero_ps());
    t = fma_i8x16(hi, x + 16, t);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16_to_fp32(b[i].d)), t, acc);
  }
  return hsum(acc);
}

float dot_q5_1(int n, const void* w, const float* x) {
  const BlockQ5_1* b = static_cast<const BlockQ5_1*>(w);
  __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
  for (int i = 0; i < n / 32; ++i, x += 32) {
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    __m128i lo, hi;
    nibbles(b[i].qs, lo, hi);
    lo = _mm_or_si128(lo, bits_to_0x10(qh));
    hi = _mm_or_si128(hi, bits_to_0x10(qh >> 16));
    __m256 t = fma_i8x16(lo, x, _mm256_setzero_ps());
    t = fma_i8x16(hi, x + 16, t);
    __m256 sx = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8)),
                              _mm256_add_ps(_mm256_loadu_ps(x + 16), _mm256_loadu_ps(x + 24)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16_to_fp32(b[i].d)), t, acc);
    accm = _mm256_fmadd_ps(_mm256_set1_ps(fp16_to_fp32(b[i].m)), sx, accm);
  }
  return hsum(_mm256_add_ps(acc, accm));
}

float dot_iq4_nl(int n, const void* w, const float* x) {
  const BlockIQ4_NL* b = static_cast<const BlockIQ4_NL*>(w);
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
  __m256 acc = _mm256_setzero_ps();
  for (int i = 0; i < n / 32; ++i, x += 32) {
    __m128i lo, hi;
    nibbles(b[i].qs, lo, hi);
    __m256 t = fma_i8x16(_mm_shuffle_epi8(table, lo), x, _mm256_setzero_ps());
    t = fma_i8x16(_mm_shuffle_epi8(table, hi), x + 16, t);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16_to_fp32(b[i].d)), t, acc);
  }
  return hsum(acc);
}

// K-quants: dequantize one 256-element super-block (vectorised by the compiler under these
// flags), then an FMA dot. Super-blocks are small enough to stay in L1.
template <typename Block, void (*Deq)(const Block*, float*, int64_t)>
float dot_kquant(int n, const void* w, const float* x) {
  const Block* b = static_cast<const Block*>(w);
  alignas(32) float buf[256];
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (int i = 0; i < n / 256; ++i, x += 256) {
    Deq(b + i, buf, 1);
    for (int j = 0; j < 256; j += 16) {
      acc0 = _mm256_fmadd_ps(_mm256_load_ps(buf + j), _mm256_loadu_ps(x + j), acc0);
      acc1 = _mm256_fmadd_ps(_mm256_load_ps(buf + j + 8), _mm256_loadu_ps(x + j + 8), acc1);
    }
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

void deq_f16_avx2(const void* src, float* y, int64_t n) {
  const uint16_t* a = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i))));
  for (; i < n; ++i) y[i] = fp16_to_fp32(a[i]);
}

}  // namespace

void fill_avx2_kernels(KernelTable& t) {
  t.isa = "avx2";
  auto set = [&](GgmlType ty, DotFn f) { t.dot[static_cast<int>(ty)] = f; };
  set(GgmlType::F32, dot_f32);
  set(GgmlType::F16, dot_f16);
  set(GgmlType::BF16, dot_bf16);
  set(GgmlType::Q8_0, dot_q8_0);
  set(GgmlType::Q4_0, dot_q4_0);
  set(GgmlType::Q4_1, dot_q4_1);
  set(GgmlType::Q5_0, dot_q5_0);
  set(GgmlType::Q5_1, dot_q5_1);
  set(GgmlType::IQ4_NL, dot_iq4_nl);
  set(GgmlType::Q2_K, dot_kquant<BlockQ2_K, deq_q2_k>);
  set(GgmlType::Q3_K, dot_kquant<BlockQ3_K, deq_q3_k>);
  set(GgmlType::Q4_K, dot_kquant<BlockQ4_K, deq_q4_k>);
  set(GgmlType::Q5_K, dot_kquant<BlockQ5_K, deq_q5_k>);
  set(GgmlType::Q6_K, dot_kquant<BlockQ6_K, deq_q6_k>);
  t.dequant[static_cast<int>(GgmlType::F16)] = deq_f16_avx2;
}

}  // namespace strata
