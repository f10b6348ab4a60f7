// AVX2 + FMA + F16C kernels. Compiled with those ISA flags and only called after the CPU check
// in kernels.cpp. Each kernel matches dot_row_ref within float rounding (tests/test_kernels).
#include <immintrin.h>

#include <array>
#include <type_traits>
#include <cmath>

#include "backend/thread_scratch.h"
#include "quant/dequant_blocks.h"
#include "quant/simd_avx2_blocks.h"
#include "quant/kernels.h"

namespace strata {

namespace {

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
  auto ld = [&](int k) { return load_cvtph(a + k); };
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(ld(i), _mm256_loadu_ps(x + i), s0);
    s1 = _mm256_fmadd_ps(ld(i + 8), _mm256_loadu_ps(x + i + 8), s1);
    s2 = _mm256_fmadd_ps(ld(i + 16), _mm256_loadu_ps(x + i + 16), s2);
    s3 = _mm256_fmadd_ps(ld(i + 24), _mm256_loadu_ps(x + i + 24), s3);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(ld(i), _mm256_loadu_ps(x + i), s0);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (; i < n; ++i) s += h2f(a[i]) * x[i];
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
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[i].d)), t, acc);
  }
  return hsum(acc);
}

// Splits 16 packed bytes into low nibbles (elements 0..15) and high nibbles (16..31).

float dot_q4_0(int n, const void* w, const float* x) {
  const BlockQ4_0* b = static_cast<const BlockQ4_0*>(w);
  const __m128i eight = _mm_set1_epi8(8);
  __m256 acc = _mm256_setzero_ps();
  for (int i = 0; i < n / 32; ++i, x += 32) {
    __m128i lo, hi;
    nibbles(b[i].qs, lo, hi);
    __m256 t = fma_i8x16(_mm_sub_epi8(lo, eight), x, _mm256_setzero_ps());
    t = fma_i8x16(_mm_sub_epi8(hi, eight), x + 16, t);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[i].d)), t, acc);
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
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[i].d)), t, acc);
    accm = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[i].m)), sx, accm);
  }
  return hsum(_mm256_add_ps(acc, accm));
}

// 16 bytes holding 0x10 where bit j of `bits` (j = 0..15) is set.

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
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[i].d)), t, acc);
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
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[i].d)), t, acc);
    accm = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[i].m)), sx, accm);
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
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[i].d)), t, acc);
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
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load_cvtph(a + i));
  for (; i < n; ++i) y[i] = h2f(a[i]);
}

// Dequantizers used on hot paths (KV cells are decoded once per attention step).
void deq_q8_0_avx2(const void* src, float* y, int64_t n) {
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / 32; ++i, y += 32) {
    const __m256 d = _mm256_set1_ps(h2f(b[i].d));
    for (int k = 0; k < 4; ++k) {
      __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + 8 * k));
      _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
    }
  }
}

void deq_q4_0_avx2(const void* src, float* y, int64_t n) {
  const BlockQ4_0* b = static_cast<const BlockQ4_0*>(src);
  const __m128i eight = _mm_set1_epi8(8);
  for (int64_t i = 0; i < n / 32; ++i, y += 32) {
    const __m256 d = _mm256_set1_ps(h2f(b[i].d));
    __m128i lo, hi;
    nibbles(b[i].qs, lo, hi);
    lo = _mm_sub_epi8(lo, eight);
    hi = _mm_sub_epi8(hi, eight);
    _mm256_storeu_ps(y, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo))));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)))));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi))));
    _mm256_storeu_ps(y + 24, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))));
  }
}

}  // namespace

void fill_avx2_int_kernels(KernelTable& t);

void fill_avx2_kernels(KernelTable& t) {
  t.isa = "avx2";
  fill_avx2_int_kernels(t);
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
#define STRATA_IQ(T, f) set(GgmlType::T, dot_kquant<Block##T, deq_unpacked<Block##T, unpack_##f>>);
  STRATA_IQ(IQ2_XXS, iq2_xxs) STRATA_IQ(IQ2_XS, iq2_xs) STRATA_IQ(IQ2_S, iq2_s) STRATA_IQ(IQ3_XXS, iq3_xxs)
  STRATA_IQ(IQ3_S, iq3_s) STRATA_IQ(IQ1_S, iq1_s) STRATA_IQ(IQ1_M, iq1_m) STRATA_IQ(IQ4_XS, iq4_xs)
  STRATA_IQ(TQ1_0, tq1_0) STRATA_IQ(TQ2_0, tq2_0)
#undef STRATA_IQ
  t.dequant[static_cast<int>(GgmlType::F16)] = deq_f16_avx2;
  t.dequant[static_cast<int>(GgmlType::Q8_0)] = deq_q8_0_avx2;
  t.dequant[static_cast<int>(GgmlType::Q4_0)] = deq_q4_0_avx2;
}

}  // namespace strata

// ---- Integer kernels on Q8_0-quantized activations ----
namespace strata {
namespace {

// Sum over 32 lanes of w * x (signed bytes) as 8 int32 lanes, via the sign trick so that
// maddubs (unsigned x signed) can be used.
inline __m256i dot_i8x32(__m256i w, __m256i x) {
  __m256i aw = _mm256_sign_epi8(w, w);
  __m256i sx = _mm256_sign_epi8(x, w);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), _mm256_set1_epi16(1));
}
// Same for unsigned codes w.
inline __m256i dot_u8i8x32(__m256i w, __m256i x) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1));
}

float dotq_q8_0(int n, const void* w, const void* xq) {
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(w);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(xq);
  __m256 acc = _mm256_setzero_ps();
  for (int i = 0; i < n / 32; ++i) {
    __m256 p = _mm256_cvtepi32_ps(dot_i8x32(load32(b[i].qs), load32(y[i].qs)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[i].d) * h2f(y[i].d)), p, acc);
  }
  return hsum(acc);
}

float dotq_q4_0(int n, const void* w, const void* xq) {
  const BlockQ4_0* b = static_cast<const BlockQ4_0*>(w);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(xq);
  const __m256i eight = _mm256_set1_epi8(8);
  __m256 acc = _mm256_setzero_ps();
  for (int i = 0; i < n / 32; ++i) {
    __m256i q = _mm256_sub_epi8(nibbles32(b[i].qs), eight);
    __m256 p = _mm256_cvtepi32_ps(dot_i8x32(q, load32(y[i].qs)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[i].d) * h2f(y[i].d)), p, acc);
  }
  return hsum(acc);
}

float dotq_iq4_nl(int n, const void* w, const void* xq) {
  const BlockIQ4_NL* b = static_cast<const BlockIQ4_NL*>(w);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(xq);
  const __m128i t128 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
  const __m256i table = _mm256_set_m128i(t128, t128);
  __m256 acc = _mm256_setzero_ps();
  for (int i = 0; i < n / 32; ++i) {
    __m256i q = _mm256_shuffle_epi8(table, nibbles32(b[i].qs));
    __m256 p = _mm256_cvtepi32_ps(dot_i8x32(q, load32(y[i].qs)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[i].d) * h2f(y[i].d)), p, acc);
  }
  return hsum(acc);
}


float dotq_q5_0(int n, const void* w, const void* xq) {
  const BlockQ5_0* b = static_cast<const BlockQ5_0*>(w);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(xq);
  const __m256i sixteen = _mm256_set1_epi8(16);
  __m256 acc = _mm256_setzero_ps();
  for (int i = 0; i < n / 32; ++i) {
    __m256i q = _mm256_sub_epi8(_mm256_or_si256(nibbles32(b[i].qs), high_bits32(b[i].qh)), sixteen);
    __m256 p = _mm256_cvtepi32_ps(dot_i8x32(q, load32(y[i].qs)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[i].d) * h2f(y[i].d)), p, acc);
  }
  return hsum(acc);
}

// Sum of the 32 activation codes of a block (for the min term of Q4_1 / Q5_1).
inline int sum_codes(const int8_t* qs) {
  __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), load32(qs)), _mm256_set1_epi16(1));
  __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
  return _mm_cvtsi128_si32(t);
}

template <typename Block, bool kFive>
float dotq_q41_q51(int n, const void* w, const void* xq) {
  const Block* b = static_cast<const Block*>(w);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(xq);
  __m256 acc = _mm256_setzero_ps();
  float acc_m = 0;
  for (int i = 0; i < n / 32; ++i) {
    __m256i q = nibbles32(b[i].qs);
    if constexpr (kFive) q = _mm256_or_si256(q, high_bits32(b[i].qh));
    float dy = h2f(y[i].d);
    __m256 p = _mm256_cvtepi32_ps(dot_u8i8x32(q, load32(y[i].qs)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[i].d) * dy), p, acc);
    acc_m += h2f(b[i].m) * dy * static_cast<float>(sum_codes(y[i].qs));
  }
  return hsum(acc) + acc_m;
}


// ---- K-quants on Q8_K-quantized activations ----

// Q4_K and Q5_K: eight 32-element sub-blocks, each with a 6-bit scale and min. The weight
// super-block is unpacked once for NT activation rows (NT = 1 is the single-row kernel).
template <typename Block, bool kFive, int NT>
void dotq_q45_k_n(int n, const Block* b, const uint8_t* xq, size_t stride, float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  float total[NT] = {};
  for (int i = 0; i < n / 256; ++i) {
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; ++j) get_scale_min_k4(j, b[i].scales, sc[j], mn[j]);
    __m256i lo[4], hi[4];
    __m256i qh = _mm256_setzero_si256();
    if constexpr (kFive) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qh));
    for (int j = 0; j < 4; ++j) {
      __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qs + 32 * j));
      lo[j] = _mm256_and_si256(q, m4);
      hi[j] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      if constexpr (kFive) {
        const __m256i bit_lo = _mm256_set1_epi8(static_cast<char>(1 << (2 * j)));
        const __m256i bit_hi = _mm256_set1_epi8(static_cast<char>(2 << (2 * j)));
        lo[j] = _mm256_or_si256(lo[j], _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit_lo), bit_lo), _mm256_set1_epi8(16)));
        hi[j] = _mm256_or_si256(hi[j], _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit_hi), bit_hi), _mm256_set1_epi8(16)));
      }
    }
    const float dw = h2f(b[i].d), dmin = h2f(b[i].dmin);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_K& y = reinterpret_cast<const BlockQ8_K*>(xq + t * stride)[i];
      int sum_mins = 0;
      for (int j = 0; j < 8; ++j) sum_mins += mn[j] * (y.bsums[2 * j] + y.bsums[2 * j + 1]);
      __m256i acc = _mm256_setzero_si256();
      for (int j = 0; j < 4; ++j) {
        __m256i p_lo = _mm256_maddubs_epi16(lo[j], load32(y.qs + 64 * j));
        __m256i p_hi = _mm256_maddubs_epi16(hi[j], load32(y.qs + 64 * j + 32));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p_lo, _mm256_set1_epi16(sc[2 * j])));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p_hi, _mm256_set1_epi16(sc[2 * j + 1])));
      }
      const float a = y.d * dw * static_cast<float>(hsum_i32(acc));
      const float m = y.d * dmin * static_cast<float>(sum_mins);
      total[t] += a - m;
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = total[t];
}

template <typename Block, bool kFive>
float dotq_q45_k(int n, const void* w, const void* xq) {
  float out;
  dotq_q45_k_n<Block, kFive, 1>(n, static_cast<const Block*>(w), static_cast<const uint8_t*>(xq), 0, &out);
  return out;
}

template <typename Block, bool kFive>
void dotq_q45_k_multi(int n, const void* w, const uint8_t* xq, size_t stride, int ntok, float* out) {
  const Block* b = static_cast<const Block*>(w);
  switch (ntok) {
    case 1: dotq_q45_k_n<Block, kFive, 1>(n, b, xq, stride, out); break;
    case 2: dotq_q45_k_n<Block, kFive, 2>(n, b, xq, stride, out); break;
    case 3: dotq_q45_k_n<Block, kFive, 3>(n, b, xq, stride, out); break;
    default: dotq_q45_k_n<Block, kFive, 4>(n, b, xq, stride, out); break;
  }
}

// Q6_K: sixteen 16-element groups with signed 8-bit scales, codes 0..63 offset by 32.
template <int NT>
void dotq_q6_k_n(int n, const BlockQ6_K* b, const uint8_t* xq, size_t stride, float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
  float total[NT] = {};
  for (int i = 0; i < n / 256; ++i) {
    const int8_t* sc = b[i].scales;
    __m256i q[2][4], s[2][4];
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = b[i].ql + 64 * half;
      __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qh + 32 * half));
      q[half][0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
      q[half][1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4));
      q[half][2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4));
      q[half][3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4));
      for (int k = 0; k < 4; ++k) {
        const int g = 8 * half + 2 * k;  // groups g (first 16 codes) and g + 1
        s[half][k] = _mm256_set_m128i(_mm_set1_epi16(sc[g + 1]), _mm_set1_epi16(sc[g]));
      }
    }
    const float dw = h2f(b[i].d);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_K& y = reinterpret_cast<const BlockQ8_K*>(xq + t * stride)[i];
      int offset = 0;  // sum over groups of scale * sum(q8); the codes' +32 offset is removed with it
      for (int g = 0; g < 16; ++g) offset += sc[g] * y.bsums[g];
      __m256i acc = _mm256_setzero_si256();
      for (int half = 0; half < 2; ++half)
        for (int k = 0; k < 4; ++k) {
          __m256i p = _mm256_maddubs_epi16(q[half][k], load32(y.qs + 128 * half + 32 * k));
          acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, s[half][k]));
        }
      total[t] += y.d * dw * static_cast<float>(hsum_i32(acc) - 32 * offset);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = total[t];
}

float dotq_q6_k(int n, const void* w, const void* xq) {
  float out;
  dotq_q6_k_n<1>(n, static_cast<const BlockQ6_K*>(w), static_cast<const uint8_t*>(xq), 0, &out);
  return out;
}

void dotq_q6_k_multi(int n, const void* w, const uint8_t* xq, size_t stride, int ntok, float* out) {
  const BlockQ6_K* b = static_cast<const BlockQ6_K*>(w);
  switch (ntok) {
    case 1: dotq_q6_k_n<1>(n, b, xq, stride, out); break;
    case 2: dotq_q6_k_n<2>(n, b, xq, stride, out); break;
    case 3: dotq_q6_k_n<3>(n, b, xq, stride, out); break;
    default: dotq_q6_k_n<4>(n, b, xq, stride, out); break;
  }
}

// ---- Several activation rows per weight row (prefill, batched decode) ----
// Each weight block is unpacked once and multiplied with up to 4 activation rows; the per-row
// arithmetic is exactly that of the single-row kernels above, so results are bit-identical.
template <typename Block, typename Unpack, int NT>
void dotq_multi_n(int n, const Block* b, const uint8_t* xq, size_t stride, float* out) {
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int i = 0; i < n / 32; ++i) {
    const __m256i q = Unpack::codes(b[i]);
    const float dw = h2f(b[i].d);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_0& y = reinterpret_cast<const BlockQ8_0*>(xq + t * stride)[i];
      __m256 p = _mm256_cvtepi32_ps(dot_i8x32(q, load32(y.qs)));
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * h2f(y.d)), p, acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = hsum(acc[t]);
}

template <typename Block, typename Unpack>
void dotq_multi(int n, const void* w, const uint8_t* xq, size_t stride, int ntok, float* out) {
  const Block* b = static_cast<const Block*>(w);
  switch (ntok) {
    case 1: dotq_multi_n<Block, Unpack, 1>(n, b, xq, stride, out); break;
    case 2: dotq_multi_n<Block, Unpack, 2>(n, b, xq, stride, out); break;
    case 3: dotq_multi_n<Block, Unpack, 3>(n, b, xq, stride, out); break;
    default: dotq_multi_n<Block, Unpack, 4>(n, b, xq, stride, out); break;
  }
}

// ---- i-quants and ternary formats on Q8_K activations ----
// Integer sub-scales (one per 16 values) weight the int16 products through madd, so each
// block needs a single float multiply per activation row. Lane layout: a chunk's first 16
// values land in the low 128 bits, the second 16 in the high; `scale_pair` broadcasts the two
// matching sub-scales into those halves with one shuffle.
// Eight byte-sized sub-scales (one per 32 values), each used for both 16-value halves.
inline __m256i dup8(uint64_t v8) {
  const __m128i b = _mm_cvtsi64_si128(static_cast<long long>(v8));
  return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(b, b));
}
// Scales with one value per 32 values (IQ2_XXS, IQ3_XXS, IQ3_S, IQ1_S), gathered in vector
// registers: dword c holds chunk c's scale s; the result has 2s + 1 in both of its 16-bit lanes,
// the lanes odd_scale(dup8(...)) gives. (Dot/IQ3_XXS, ten alternated runs, best: 499 -> 465 ns;
// the scalar gathering of the eight nibbles was 40 of the block's 460 instructions.)
inline __m256i odd_pairs(__m256i s) { return pairs16(odd32(s)); }
// ... from the top nibble of each of eight 32-bit words at p (IQ3_XXS)
inline __m256i top_nibbles32(const uint8_t* p) {
  return _mm256_srli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), 28);
}
// ... from the top nibble of each of eight 64-bit words at p (IQ2_XXS)
inline __m256i top_nibbles64(const void* p) {
  const auto* v = reinterpret_cast<const __m256i*>(p);
  const __m256i a = _mm256_srli_epi64(_mm256_loadu_si256(v), 60), b = _mm256_srli_epi64(_mm256_loadu_si256(v + 1), 60);
  // dwords a0 b0 a1 b1 | a2 b2 a3 b3 -> a0..a3 b0..b3
  return _mm256_permutevar8x32_epi32(_mm256_or_si256(a, _mm256_slli_epi64(b, 32)), _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
}
// Sub-scales s0..s15 in natural order -> low lane s0, s2, ..., s14 (first half of each chunk),
// high lane s1, s3, ..., s15.
inline __m256i block_scales(__m256i natural) {
  const __m128i evens_odds = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  const __m256i v = _mm256_shuffle_epi8(natural, _mm256_set_m128i(evens_odds, evens_odds));
  return _mm256_permute4x64_epi64(v, _MM_SHUFFLE(3, 1, 2, 0));
}
// The shuffle patterns come from memory: built from immediates, each cost GCC four instructions
// per chunk (mov, vmovd, vpshufd, vinserti128).
struct ScalePairPatterns {
  alignas(32) uint8_t idx[8][32];
  constexpr ScalePairPatterns() : idx{} {
    for (int c = 0; c < 8; ++c)
      for (int k = 0; k < 32; k += 2) {
        idx[c][k] = static_cast<uint8_t>(2 * c);
        idx[c][k + 1] = static_cast<uint8_t>(2 * c + 1);
      }
  }
};
inline constexpr ScalePairPatterns kScalePair{};
inline __m256i scale_pair(__m256i scales, int c) {
  return _mm256_shuffle_epi8(scales, _mm256_load_si256(reinterpret_cast<const __m256i*>(kScalePair.idx[c])));
}

inline __m128i load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

// One byte per group of 8 values for a whole block (32 groups), spread chunk by chunk over the
// values with one shuffle each: bytes 0-15 and 16-31 are first copied into both 128-bit lanes,
// so chunk c's four bytes are in reach.
struct GroupBytes {
  __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
  GroupBytes() = default;
  GroupBytes(__m128i g0_15, __m128i g16_31) : lo(_mm256_set_m128i(g0_15, g0_15)), hi(_mm256_set_m128i(g16_31, g16_31)) {}
  explicit GroupBytes(const uint8_t* g32) : GroupBytes(load16(g32), load16(g32 + 16)) {}
  explicit GroupBytes(__m256i g) : lo(_mm256_permute2x128_si256(g, g, 0x00)), hi(_mm256_permute2x128_si256(g, g, 0x11)) {}
  // Chunk c: byte 8k + j is group 4c + k's byte.
  __m256i spread(int c) const {
    alignas(32) static constexpr auto kSpread = [] {
      std::array<std::array<uint8_t, 32>, 4> p{};
      for (int k = 0; k < 4; ++k)
        for (int j = 0; j < 32; ++j) p[k][j] = static_cast<uint8_t>(4 * k + j / 8);
      return p;
    }();
    return _mm256_shuffle_epi8(c < 4 ? lo : hi, _mm256_load_si256(reinterpret_cast<const __m256i*>(kSpread[c % 4].data())));
  }
  // The bytes as signs (bit j: value j of the group is negative) -> chunk c's sign source: each
  // value's bit, plus 127 with unsigned saturation, is 127 (positive) when clear and 128 or more
  // (negative as a signed byte) when set.
  __m256i signs(int c) const { return sign_source(spread(c)); }
  static __m256i sign_source(__m256i spread) {
    const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
    return _mm256_adds_epu8(_mm256_and_si256(spread, bit), _mm256_set1_epi8(127));
  }
};
// A block's 32 group bytes in G(k, q) lane order: 128-bit lane L holds groups 8L .. 8L + 7 in
// its bytes 0-7 and groups 16 + 8L .. 16 + 8L + 7 in bytes 8-15, which is the order some formats'
// sign fields come out in (IQ2_XXS, IQ2_XS) and is natural order with 64-bit lanes 1 and 2
// swapped (swap_mid_qwords, its own inverse). Entry register k's lane q (group
// 16 (k / 4) + 4q + k % 4) then finds its byte in its own 128-bit lane, so one register serves
// every k, where GroupBytes keeps two.
inline __m256i swap_mid_qwords(__m256i v) { return _mm256_permute4x64_epi64(v, _MM_SHUFFLE(3, 1, 2, 0)); }
inline __m256i gkq_signs(__m256i gkq_bytes, int k) {
  alignas(32) static constexpr auto kSpread = [] {
    std::array<std::array<uint8_t, 32>, 8> p{};
    for (int k = 0; k < 8; ++k)
      for (int j = 0; j < 32; ++j) p[k][j] = static_cast<uint8_t>(8 * (k / 4) + 4 * (j % 16 / 8) + k % 4);
    return p;
  }();
  return GroupBytes::sign_source(_mm256_shuffle_epi8(gkq_bytes, _mm256_load_si256(reinterpret_cast<const __m256i*>(kSpread[k].data()))));
}

// Grid formats (IQ2_*, IQ3_*): values are unsigned grid bytes times a sign, so each 32-value
// chunk is gathered as 4 grid entries (8 for IQ3) plus a sign source (GroupBytes::signs); the
// signs go onto the activations and maddubs multiplies them with the unsigned grid bytes.
// A block's 32 sign bytes are made once per block in vector registers (IQ2_S and IQ3_S store
// them as they are; the others' parity bits by with_parity, simd_avx2_blocks.h): Dot/<format>,
// three runs, table lookups per chunk -> this, ns: IQ2_XS 315 -> 298, IQ3_XXS 449 -> 416,
// IQ3_S 610 -> 545.
// Table entries side by side, loaded with merges from memory (vmovhpd, vinsertps) in place of
// integer inserts, which llvm-mca (znver3) prices higher. Measured, this helped IQ3_S and IQ1_M
// along with their stored indices, while IQ3_XXS ran slower with vinsertps (Dot 417 -> 439 ns)
// and keeps _mm256_set_epi32.
inline __m128i entries2x64(const uint64_t* tab, unsigned e0, unsigned e1) {
  const __m128d lo = _mm_castsi128_pd(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(tab + e0)));
  return _mm_castpd_si128(_mm_loadh_pd(lo, reinterpret_cast<const double*>(tab + e1)));
}
inline __m256i entries4x64(const uint64_t* tab, const unsigned* e) {
  return _mm256_set_m128i(entries2x64(tab, e[2], e[3]), entries2x64(tab, e[0], e[1]));
}
inline __m128i entries4x32(const uint32_t* tab, const unsigned* e) {
  auto at = [&](int k) { return _mm_load_ss(reinterpret_cast<const float*>(tab + e[k])); };
  __m128 v = at(0);
  v = _mm_insert_ps(v, at(1), 0x10);
  v = _mm_insert_ps(v, at(2), 0x20);
  v = _mm_insert_ps(v, at(3), 0x30);
  return _mm_castps_si128(v);
}
inline __m256i entries8x32(const uint32_t* tab, const unsigned* e) {
  return _mm256_set_m128i(entries4x32(tab, e + 4), entries4x32(tab, e));
}

// A block made ready for its chunks (by F::prepare): the groups' sign (or other) bytes and, where
// the table indices take more than a byte load each, all of them worked out at once in vector
// registers (as 16-bit lanes stored here; 4 per chunk for 8-value entries, 8 for IQ3's 4-value ones).
struct BlockPrep {
  GroupBytes groups;
  alignas(32) uint16_t idx[64];
  // Chunks read the indices back from memory, one load each: left to itself, GCC takes them
  // from the vector registers with vpextrw, two µops each.
  void indices_stored() { __asm__("" : "+m"(idx)); }
};
template <int N>
inline void indices_of(const BlockPrep& g, int c, unsigned* e) {
  for (int k = 0; k < N; ++k) e[k] = g.idx[N * c + k];
}
// Chunk c's table entries by the block's stored indices: 4 eight-byte or 8 four-byte ones.
inline __m256i entries_of(const uint64_t* tab, const BlockPrep& g, int c) {
  unsigned e[4];
  indices_of<4>(g, c, e);
  return entries4x64(tab, e);
}
inline __m256i entries_of(const uint32_t* tab, const BlockPrep& g, int c) {
  unsigned e[8];
  indices_of<8>(g, c, e);
  return entries8x32(tab, e);
}
// Four pairs of adjacent stored indices, pair q at v + q * stride, one 32-bit load per pair
// (IQ3_S's entries: Zen 1, Matvec/IQ3_S MV_KIB=512 MV_COLS=1024, three alternated rounds of
// medians of 3, 0.194-0.195 -> 0.189-0.193 ms; the same for IQ3_XXS's byte indices was slower,
// 0.205 -> 0.222).
inline void index_pairs(const uint16_t* v, int stride, unsigned* e) {
  for (int q = 0; q < 4; ++q) {
    uint32_t p;
    std::memcpy(&p, v + stride * q, sizeof p);
    e[2 * q] = p & 0xFFFFu;
    e[2 * q + 1] = p >> 16;
  }
}
template <int N>
inline void bytes_of(const uint8_t* q, unsigned* e) {
  for (int k = 0; k < N; ++k) e[k] = q[k];
}
// Table indices of 16 entries at once: 8 bits from a code byte and the rest from qh. Lane e
// takes two bytes of qh (chosen per lane by a pick pattern; -1 for a zero byte) as a 16-bit
// value, multiplies it by mul[e] to shift its bits into place, masks them and adds the code
// byte. qh2: 16 bytes of qh in both 128-bit lanes.
using Lanes16 = std::array<int16_t, 16>;
struct IndexLanes {
  std::array<int8_t, 32> pick;
  Lanes16 mul;
};
inline __m256i indices16(__m128i codes, __m256i qh2, const IndexLanes& l, __m256i mask) {
  const __m256i h = _mm256_shuffle_epi8(qh2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(l.pick.data())));
  const __m256i mul = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(l.mul.data()));
  return _mm256_or_si256(_mm256_cvtepu8_epi16(codes), _mm256_and_si256(_mm256_mullo_epi16(h, mul), mask));
}
// The lanes of NG sets of 16 entries; f(E) gives entry E's two qh bytes and its multiplier.
struct IndexLane {
  int lo, hi, mul;
};
template <int NG, typename Fn>
constexpr std::array<IndexLanes, NG> index_lanes(Fn f) {
  std::array<IndexLanes, NG> r{};
  for (int g = 0; g < NG; ++g)
    for (int e = 0; e < 16; ++e) {
      const IndexLane l = f(16 * g + e);
      r[g].pick[2 * e] = static_cast<int8_t>(l.lo);
      r[g].pick[2 * e + 1] = static_cast<int8_t>(l.hi);
      r[g].mul[e] = static_cast<int16_t>(l.mul);
    }
  return r;
}
// All NG * 16 indices of a block into p.idx.
template <int NG>
inline void store_indices(const uint8_t* codes, const void* qh, const std::array<IndexLanes, NG>& lanes, int mask, BlockPrep& p) {
  const __m256i qh2 = _mm256_broadcastsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(qh)));
  const __m256i m = _mm256_set1_epi16(static_cast<int16_t>(mask));
  for (int g = 0; g < NG; ++g)
    _mm256_store_si256(reinterpret_cast<__m256i*>(p.idx + 16 * g), indices16(load16(codes + 16 * g), qh2, lanes[g], m));
  p.indices_stored();
}

struct ChunkIQ2_XXS {
  using Block = BlockIQ2_XXS;
  // d * (0.5 + s) / 4 = (d / 8) * (2s + 1)
  static __m256i scales(const Block& b, float& d) {
    d = h2f(b.d) * 0.125f;
    return odd_pairs(top_nibbles64(b.qs));  // qs[4c + 3] >> 12
  }
  // Chunk c's sign word is the second 32-bit word of its 8 bytes; its grid codes are the first 4 bytes.
  static __m256i sign_bytes_gkq(const Block& b) {
    const auto* v = reinterpret_cast<const float*>(b.qs);
    // words 1, 3 of each lane of both loads: chunks 0, 1, 4, 5 | 2, 3, 6, 7
    const __m256 odd = _mm256_shuffle_ps(_mm256_loadu_ps(v), _mm256_loadu_ps(v + 8), _MM_SHUFFLE(3, 1, 3, 1));
    return sign_fields4(_mm256_castps_si256(odd));
  }
  static void prepare(const Block& b, BlockPrep& g) { g.groups = GroupBytes(swap_mid_qwords(sign_bytes_gkq(b))); }
  static __m256i grid(const Block& b, const BlockPrep&, int c, const iq::Tables& t) {
    unsigned e[4];
    bytes_of<4>(reinterpret_cast<const uint8_t*>(b.qs + 4 * c), e);
    return entries4x64(t.iq2xxs, e);
  }
  // Entry register k in G(k, q) order (grid_rows): group G's code is byte G % 4 of chunk G / 4.
  static __m256i grid_gkq(const Block& b, const BlockPrep&, int k, const iq::Tables& t) {
    const uint8_t* q = reinterpret_cast<const uint8_t*>(b.qs) + 32 * (k / 4) + k % 4;
    const unsigned e[4] = {q[0], q[8], q[16], q[24]};
    return entries4x64(t.iq2xxs, e);
  }
};
struct ChunkIQ2_XS {
  using Block = BlockIQ2_XS;
  static __m256i scales(const Block& b, float& d) {
    d = h2f(b.d) * 0.125f;
    return odd_scale(nibbles16(b.scales));
  }
  // Each 16-bit code: a 9-bit grid index below 7 sign bits. The in-lane pack of groups 0-15
  // and 16-31 leaves them in G(k, q) lane order.
  static __m256i sign_bytes_gkq(const Block& b) {
    const auto* v = reinterpret_cast<const __m256i*>(b.qs);
    const __m256i q0 = _mm256_loadu_si256(v), q1 = _mm256_loadu_si256(v + 1);
    return with_parity(_mm256_packus_epi16(_mm256_srli_epi16(q0, 9), _mm256_srli_epi16(q1, 9)));
  }
  static void prepare(const Block& b, BlockPrep& g) { g.groups = GroupBytes(swap_mid_qwords(sign_bytes_gkq(b))); }
  static __m256i grid(const Block& b, const BlockPrep&, int c, const iq::Tables& t) {
    const uint16_t* v = b.qs + 4 * c;
    const unsigned e[4] = {v[0] & 511u, v[1] & 511u, v[2] & 511u, v[3] & 511u};
    return entries4x64(t.iq2xs, e);
  }
  static __m256i grid_gkq(const Block& b, const BlockPrep&, int k, const iq::Tables& t) {
    const uint16_t* v = b.qs + 16 * (k / 4) + k % 4;
    const unsigned e[4] = {v[0] & 511u, v[4] & 511u, v[8] & 511u, v[12] & 511u};
    return entries4x64(t.iq2xs, e);
  }
};
struct ChunkIQ2_S {
  using Block = BlockIQ2_S;
  static constexpr bool kIndicesAhead = true;
  static __m256i scales(const Block& b, float& d) {
    d = h2f(b.d) * 0.125f;
    return odd_scale(nibbles16(b.scales));
  }
  // Index of entry k of chunk c: qs[4c + k] | bits 2k, 2k + 1 of qh[c] << 8.
  static constexpr auto kLanes = index_lanes<2>([](int E) { return IndexLane{E / 4, -1, 256 >> (2 * (E % 4))}; });
  static void indices(const Block& b, BlockPrep& g) {
    store_indices<2>(b.qs, b.qh, kLanes, 0x300, g);  // qh[8] and the first 8 scale bytes: in the block
  }
  static void prepare(const Block& b, BlockPrep& g) {
    g.groups = GroupBytes(b.signs);
    indices(b, g);
  }
  static __m256i sign_bytes_gkq(const Block& b) { return swap_mid_qwords(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.signs))); }
  static __m256i grid(const Block&, const BlockPrep& g, int c, const iq::Tables& t) { return entries_of(t.iq2s, g, c); }
  // grid_rows makes the indices in G(k, q) order (iq1_indices, four per 64-bit load) from these.
  static constexpr IndexLane lane(int G) { return IndexLane{G / 4, -1, 256 >> (2 * (G % 4))}; }
  static constexpr int kIndexMask = 0x300;
  static const uint64_t* gkq_table(const iq::Tables& t) { return t.iq2s; }
};
struct ChunkIQ3_XXS {
  using Block = BlockIQ3_XXS;
  // d * (0.5 + s) / 2 = (d / 4) * (2s + 1)
  static __m256i scales(const Block& b, float& d) {
    d = h2f(b.d) * 0.25f;
    return odd_pairs(top_nibbles32(b.scales_signs));
  }
  static void prepare(const Block& b, BlockPrep& g) {
    g.groups = GroupBytes(sign_fields4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.scales_signs))));
  }
  static __m256i sign_bytes_gkq(const Block& b) {
    return sign_fields4(swap_mid_qwords(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.scales_signs))));
  }
  static __m256i grid(const Block& b, const BlockPrep&, int c, const iq::Tables& t) {
    const uint8_t* q = b.qs + 8 * c;
    return _mm256_set_epi32(t.iq3xxs[q[7]], t.iq3xxs[q[6]], t.iq3xxs[q[5]], t.iq3xxs[q[4]], t.iq3xxs[q[3]], t.iq3xxs[q[2]],
                            t.iq3xxs[q[1]], t.iq3xxs[q[0]]);
  }
  // Group G: the two 4-value entries qs[2G], qs[2G + 1].
  static __m256i grid_gkq(const Block& b, const BlockPrep&, int k, const iq::Tables& t) {
    const uint8_t* q = b.qs + 32 * (k / 4) + 2 * (k % 4);
    return _mm256_set_epi32(t.iq3xxs[q[25]], t.iq3xxs[q[24]], t.iq3xxs[q[17]], t.iq3xxs[q[16]], t.iq3xxs[q[9]], t.iq3xxs[q[8]],
                            t.iq3xxs[q[1]], t.iq3xxs[q[0]]);
  }
};
struct ChunkIQ3_S {
  using Block = BlockIQ3_S;
  static constexpr bool kIndicesAhead = true;
  static __m256i scales(const Block& b, float& d) {
    uint32_t four;
    std::memcpy(&four, b.scales, 4);
    d = h2f(b.d);
    const __m256i nib = _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(four)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    return odd_pairs(_mm256_and_si256(nib, _mm256_set1_epi32(0xF)));
  }
  // Index of entry k of chunk c: qs[8c + k] | bit k of qh[c] << 8. (Eight loads per chunk, not
  // one vpgatherdd, which is slower on Zen 3: Dot/IQ3_S, fifteen alternated runs twice, best:
  // 675, 686 -> 604, 589 ns.)
  static constexpr auto kLanes = index_lanes<4>([](int E) { return IndexLane{E / 8, -1, 256 >> (E % 8)}; });
  static void indices(const Block& b, BlockPrep& g) {
    store_indices<4>(b.qs, b.qh, kLanes, 0x100, g);  // qh[8] and the first 8 sign bytes: in the block
  }
  static void prepare(const Block& b, BlockPrep& g) {
    g.groups = GroupBytes(b.signs);
    indices(b, g);
  }
  static __m256i sign_bytes_gkq(const Block& b) { return swap_mid_qwords(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.signs))); }
  static __m256i grid(const Block&, const BlockPrep& g, int c, const iq::Tables& t) { return entries_of(t.iq3s, g, c); }
  static __m256i grid_gkq(const Block&, const BlockPrep& g, int k, const iq::Tables& t) {
    const uint16_t* v = g.idx + 32 * (k / 4) + 2 * (k % 4);
    unsigned e[8];
    index_pairs(v, 8, e);
    return entries8x32(t.iq3s, e);
  }
};

// The index lanes of group G (as in index_lanes). IQ1_S: qs[G] | bits 3k..3k+2 of qh[c] << 8
// (c = G / 4, k = G % 4; bits 9-11 for k = 3 come from qh[c]'s high byte alone, shifted left 7).
// IQ1_M: G's nibble of qh[G / 2] shifted to bits 8-11.
constexpr IndexLane iq1s_lane(int G) {
  const int c = G / 4, k = G % 4;
  return k < 3 ? IndexLane{2 * c, 2 * c + 1, 256 >> (3 * k)} : IndexLane{2 * c + 1, -1, 128};
}
constexpr IndexLane iq1m_lane(int G) { return IndexLane{G / 2, -1, G % 2 ? 16 : 256}; }

// Formats whose codes are signed bytes built per 32-value chunk (IQ1_*, IQ4_XS, TQ1_0, TQ2_0): the
// chunk is multiplied with dot_i8x32.
struct ChunkIQ1_S {
  using Block = BlockIQ1_S;
  static constexpr bool kIndicesAhead = true;
  static __m256i scales(const Block& b, float& d) {
    d = h2f(b.d) * 0.125f;
    const __m256i qh = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh)));
    return odd_pairs(_mm256_and_si256(_mm256_srli_epi32(qh, 12), _mm256_set1_epi32(7)));
  }
  static constexpr IndexLane lane(int G) { return iq1s_lane(G); }
  static constexpr auto kLanes = index_lanes<2>(iq1s_lane);
  static constexpr int kIndexMask = 0x700;  // delta's sign apart (codes, offset_scales)
  static void prepare(const Block& b, BlockPrep& g) { store_indices<2>(b.qs, b.qh, kLanes, kIndexMask, g); }
  static __m256i codes(const Block& b, const BlockPrep& g, int c, const iq::Tables& t) {
    // 8 * grid + (delta < 0 ? -1 : +1)
    return _mm256_add_epi8(entries_of(t.iq1s, g, c), _mm256_set1_epi8(b.qh[c] & 0x8000 ? -1 : 1));
  }
  // The dot product's codes: 8 * grid + 11 (delta +1, offset 10), whatever delta's sign; the
  // offset and the negative deltas come off through offset_scales.
  static __m256i offset_codes(const Block&, const BlockPrep& g, int c, const iq::Tables& t) { return entries_of(t.iq1s_code, g, c); }
  // Per 16 values (natural order): sub-scale times (10 + 2 if delta is negative).
  static __m256i offset_scales(const Block& b) {
    const __m256i qh = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh)));
    const __m256i s = odd32(_mm256_and_si256(_mm256_srli_epi32(qh, 12), _mm256_set1_epi32(7)));
    const __m256i off = _mm256_add_epi32(_mm256_and_si256(_mm256_srli_epi32(qh, 14), _mm256_set1_epi32(2)), _mm256_set1_epi32(10));
    return pairs16(_mm256_mullo_epi16(s, off));
  }
};
struct ChunkIQ1_M {
  using Block = BlockIQ1_M;
  static constexpr bool kIndicesAhead = true;
  static __m256i scales(const Block& b, float& d) {
    d = h2f(iq1m_d_bits(b)) * 0.125f;
    return iq1m_odd_scales(b);
  }
  // Group G = 4c + k has nibble k % 2 of qh[2c + k / 2]: its 3 low bits extend the index, its top
  // bit (the sign of the delta) lands in bit 11, which picks iq1s_code's half for a negative delta.
  static constexpr IndexLane lane(int G) { return iq1m_lane(G); }
  static constexpr auto kLanes = index_lanes<2>(iq1m_lane);
  static constexpr int kIndexMask = 0xF00;
  static void prepare(const Block& b, BlockPrep& g) { store_indices<2>(b.qs, b.qh, kLanes, kIndexMask, g); }
  static __m256i offset_codes(const Block&, const BlockPrep& g, int c, const iq::Tables& t) { return entries_of(t.iq1s_code, g, c); }
  static __m256i codes(const Block& b, const BlockPrep& g, int c, const iq::Tables& t) {
    return _mm256_sub_epi8(offset_codes(b, g, c, t), _mm256_set1_epi8(10));
  }
  static __m256i offset_scales(const Block& b) { return _mm256_mullo_epi16(iq1m_odd_scales(b), _mm256_set1_epi16(10)); }
};
struct ChunkIQ4_XS {
  using Block = BlockIQ4_XS;
  static __m256i scales(const Block& b, float& d) {
    uint32_t low;
    std::memcpy(&low, b.scales_l, 4);
    uint64_t v = 0;
    for (int ib = 0; ib < 8; ++ib)
      v |= static_cast<uint64_t>(((low >> (4 * ib)) & 0xF) | (((b.scales_h >> (2 * ib)) & 3) << 4)) << (8 * ib);
    d = h2f(b.d);
    return _mm256_sub_epi16(dup8(v), _mm256_set1_epi16(32));
  }
  static __m256i codes(const Block& b, int c, const iq::Tables&) {
    const __m128i t128 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
    return _mm256_shuffle_epi8(_mm256_set_m128i(t128, t128), nibbles32(b.qs + 16 * c));
  }
};
// The ternary formats: one factor per block, every sub-scale 1.
template <typename B>
struct TernaryScales {
  using Block = B;
  static __m256i scales(const Block& b, float& d) {
    d = h2f(b.d);
    return _mm256_set1_epi16(1);
  }
};
struct ChunkTQ2_0 : TernaryScales<BlockTQ2_0> {
  static __m256i codes(const Block& b, int c, const iq::Tables&) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * (c / 4)));
    const __m256i two = _mm256_and_si256(_mm256_srlv_epi32(v, _mm256_set1_epi32(2 * (c % 4))), _mm256_set1_epi8(3));
    return _mm256_sub_epi8(two, _mm256_set1_epi8(1));
  }
};

// TQ1_0's base-3 digits as in unpack_tq1_0 (digit k of byte x is ((x * 3^k mod 256) * 3) >> 8),
// here on the even and odd bytes' 16-bit lanes, with one multiplier 3^k per lane (m).
inline __m256i base3_digits(__m256i v, __m256i m) {
  const __m256i low = _mm256_set1_epi16(0x00FF), three = _mm256_set1_epi16(3);
  __m256i e = _mm256_and_si256(_mm256_mullo_epi16(_mm256_and_si256(v, low), m), low);
  __m256i o = _mm256_and_si256(_mm256_mullo_epi16(_mm256_srli_epi16(v, 8), m), low);
  e = _mm256_srli_epi16(_mm256_mullo_epi16(e, three), 8);
  o = _mm256_srli_epi16(_mm256_mullo_epi16(o, three), 8);
  return _mm256_or_si256(e, _mm256_slli_epi16(o, 8));
}
struct ChunkTQ1_0 : TernaryScales<BlockTQ1_0> {
  // Values 32k + j (k < 5) are digit k of qs[j]; 160 + 16k + j are digit k of qs[32 + j];
  // 240 + 4k + j are digit k of qh[j].
  static __m256i codes(const Block& b, int c, const iq::Tables&) {
    __m256i v, m;
    if (c < 5) {
      v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
      m = _mm256_set1_epi16(kTq1Pow3[c]);
    } else {
      const __m128i tail = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 32));
      if (c == 7) {
        uint32_t h;
        std::memcpy(&h, b.qh, 4);
        v = _mm256_set_m128i(_mm_set1_epi32(static_cast<int>(h)), tail);
        m = _mm256_set_m128i(_mm_setr_epi16(1, 1, 3, 3, 9, 9, 27, 27), _mm_set1_epi16(81));
      } else {
        v = _mm256_set_m128i(tail, tail);
        m = c == 5 ? _mm256_set_m128i(_mm_set1_epi16(3), _mm_set1_epi16(1))
                   : _mm256_set_m128i(_mm_set1_epi16(27), _mm_set1_epi16(9));
      }
    }
    return _mm256_sub_epi8(base3_digits(v, m), _mm256_set1_epi8(1));
  }
};

// K-quants with 2-bit codes: chunk c holds bits 2*(c % 4) of the 32 bytes of half c / 4.
inline __m256i two_bits(const uint8_t* qs, int c) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (c / 4)));
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(2 * (c % 4))), _mm256_set1_epi8(3));
}
struct ChunkQ3_K {
  using Block = BlockQ3_K;
  // The 16 6-bit scales (minus 32), as q3k_unpack_scales lays them out: the low nibbles of bytes
  // 0-7, then their high nibbles, each with 2 bits of word 2 (bits 2k, 2k + 1 of each byte for
  // the 32-bit word k of the result) on top.
  static __m256i scales(const Block& b, float& d) {
    uint64_t lo8;
    uint32_t top;
    std::memcpy(&lo8, b.scales, 8);
    std::memcpy(&top, b.scales + 8, 4);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m128i x = _mm_cvtsi64_si128(static_cast<long long>(lo8));
    const __m128i low = _mm_unpacklo_epi64(_mm_and_si128(x, m4), _mm_and_si128(_mm_srli_epi16(x, 4), m4));
    const __m128i two = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(static_cast<int>(top)), _mm_setr_epi32(0, 2, 4, 6)),
                                      _mm_set1_epi8(3));
    d = h2f(b.d);
    return _mm256_cvtepi8_epi16(_mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi32(two, 4)), _mm_set1_epi8(32)));
  }
  static __m256i codes(const Block& b, int c, const iq::Tables&) {
    // code = low 2 bits - 4 unless bit c of the high mask is set
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask));
    const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(c)), _mm256_set1_epi8(1));
    const __m256i minus4 = _mm256_and_si256(_mm256_cmpeq_epi8(hb, _mm256_setzero_si256()), _mm256_set1_epi8(4));
    return _mm256_sub_epi8(two_bits(b.qs, c), minus4);
  }
};
// Q2_K: value = d * (s & 15) * code - dmin * (s >> 4); the min part is a dot of the 4-bit mins
// with the activations' per-16 sums (Q8_K's bsums).
struct ChunkQ2_K {
  using Block = BlockQ2_K;
  static __m256i scales(const Block& b, float& d) {
    d = h2f(b.d);
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    return _mm256_cvtepu8_epi16(_mm_and_si128(sc, _mm_set1_epi8(0x0F)));
  }
  static constexpr bool kUnsignedCodes = true;  // 0..3: maddubs takes them as they are
  static __m256i codes(const Block& b, int c, const iq::Tables&) { return two_bits(b.qs, c); }
  static float min_scale(const Block& b) { return h2f(b.dmin); }
  static int min_of(const Block& b, int g) { return b.scales[g] >> 4; }  // of values 16g..16g+15
  // The 16 mins (at most 15) times the activations' 16-value sums (at most 16 * 127 in magnitude):
  // exact in madd's 32-bit pairs.
  static float min_term(const Block& b, const BlockQ8_K& y) {
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(0x0F)));
    const __m256i sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums));
    return min_scale(b) * static_cast<float>(hsum_i32(_mm256_madd_epi16(mins, sums)));
  }
};

// One 32-value chunk as unsigned magnitudes and a sign source: the grid formats give them
// directly (g: the block made ready by F::prepare); the others give signed codes q, whose
// magnitudes are |q| and whose signs are q's.
template <typename F>
constexpr bool has_prepare = requires(const typename F::Block& b, BlockPrep& g) { F::prepare(b, g); };
template <typename F>
constexpr bool is_grid = requires(const typename F::Block& b, const BlockPrep& g, const iq::Tables& t) { F::grid(b, g, 0, t); };
template <typename F>
inline void magnitudes_and_signs(const typename F::Block& b, int c, const iq::Tables& t, const BlockPrep& g, __m256i& a,
                                 __m256i& s) {
  if constexpr (is_grid<F>) {
    a = F::grid(b, g, c, t);
    s = g.groups.signs(c);
  } else {
    if constexpr (has_prepare<F>) s = F::codes(b, g, c, t);
    else s = F::codes(b, c, t);
    if constexpr (requires { F::kUnsignedCodes; }) a = s;
    else a = _mm256_sign_epi8(s, s);
  }
}
// Activations with the chunk's signs on them (none to apply where the codes are unsigned).
template <typename F>
inline __m256i signed_activations(__m256i y, __m256i s) {
  if constexpr (requires { F::kUnsignedCodes; }) return y;
  else return _mm256_sign_epi8(y, s);
}
// IQ1: codes offset to unsigned bytes (offset_codes) go into maddubs as they are, with no signs
// to move onto the activations; the offset times each 16 values' activation sum (Q8_K bsums)
// comes off the block's integer total (offset_scales: the sub-scale times the offset), so the
// total, and the result's bits, are those of the signed codes.
template <typename F>
constexpr bool has_offset_codes = requires(const typename F::Block& b, const BlockPrep& g, const iq::Tables& t) {
  F::offset_codes(b, g, 0, t);
  F::offset_scales(b);
};
// The stored indices are read back a block after they were written, so the store, its reload and
// the table loads behind it no longer form one chain inside the block (Zen 3, Matvec MV_KIB=512
// MV_COLS=1024, three alternated rounds, ms: IQ2_S 0.144, 0.253, 0.133 -> 0.129, 0.136, 0.125,
// IQ3_S 0.178, 0.200, 0.166 -> 0.161, 0.171, 0.151).
template <typename F>
constexpr bool kIndicesAhead = requires { F::kIndicesAhead; };
template <typename F>
inline void prepare_block(const typename F::Block& b, BlockPrep& g) {
  if constexpr (has_prepare<F>) F::prepare(b, g);
}

// One float multiply-add per block and activation row, on the block's exact integer total: the
// 8-row decoded kernel below does the same per lane, so both give the same bits.
inline float block_step(float d, float yd, int total, float acc) { return std::fma(d * yd, static_cast<float>(total), acc); }

// The driver of every 256-value format with one integer sub-scale per 16 values (the i-quants,
// TQ1_0, TQ2_0, Q2_K, Q3_K): NR weight rows (ws bytes apart) against NT activation rows (xs bytes
// apart), out[NT * r + t]. Per chunk, maddubs(magnitudes, activations signed by the sign source),
// then madd with the sub-scales; per block and pair of rows, the integer total times the block
// factors. Every (r, t) pair has the same arithmetic whatever NR and NT are, so the same bits:
// prefill and batched decode take NT activation rows (dotq_multi); decode takes NR weight rows,
// which share each activation load and give the out-of-order core independent chains (dotq_rows).
// Each running sum pinned to a register at every step: left to itself, GCC adds the chunks'
// products up as trees whose partial sums spill to the stack. Zen 3, Matvec MV_KIB=512
// MV_COLS=1024, best of three alternated rounds, ms, before -> pinned: IQ2_XXS 0.194 -> 0.164,
// IQ2_XS 0.156 -> 0.136, IQ2_S 0.143 -> 0.124, IQ3_XXS 0.166 -> 0.154, IQ3_S 0.162 -> 0.156.
template <typename F>
constexpr bool kKeepSums = is_grid<F> || has_offset_codes<F>;
template <typename F, int NR, int NT>
void dotq_codes_tile(int n, const uint8_t* w, size_t ws, const uint8_t* xq, size_t xs, float* out) {
  using Block = typename F::Block;
  const iq::Tables& tab = iq::tables();
  auto act = [&](int t, int i) -> const BlockQ8_K& { return reinterpret_cast<const BlockQ8_K*>(xq + t * xs)[i]; };
  auto block = [&](int r, int i) -> const Block& { return reinterpret_cast<const Block*>(w + r * ws)[i]; };
  float acc[NR][NT] = {}, mins[NR][NT] = {}, prev_d[NR] = {}, prev_yd[NT] = {};
  // A block's float step runs after the next block's products: its inputs are then ready, so
  // the horizontal sum's latency no longer holds up the instructions behind it (Dot/Q3_K, best
  // of 12 alternated runs: 523 ns with the step in place, 403 ns deferred).
  __m256i prev[NR][NT];
  STRATA_UNROLL for (int r = 0; r < NR; ++r) STRATA_UNROLL for (int t = 0; t < NT; ++t) prev[r][t] = _mm256_setzero_si256();
  const int nb = n / 256;
  // Formats whose table indices go through memory prepare each block one block ahead.
  constexpr bool kAhead = kIndicesAhead<F>;
  BlockPrep prep[kAhead ? 2 : 1][NR];
  if constexpr (kAhead)
    if (nb > 0) STRATA_UNROLL for (int r = 0; r < NR; ++r) prepare_block<F>(block(r, 0), prep[0][r]);
  for (int i = 0; i <= nb; ++i) {
    __m256i sum[NR][NT];
    STRATA_UNROLL for (int r = 0; r < NR; ++r) STRATA_UNROLL for (int t = 0; t < NT; ++t) sum[r][t] = _mm256_setzero_si256();
    float d[NR] = {};
    if (i < nb) {
      STRATA_UNROLL for (int r = 0; r < NR; ++r) prefetch_codes_ahead(&block(r, i));
      __m256i scales[NR];
      BlockPrep* sg = prep[kAhead ? i & 1 : 0];
      if constexpr (kAhead) {
        if (i + 1 < nb) STRATA_UNROLL for (int r = 0; r < NR; ++r) prepare_block<F>(block(r, i + 1), prep[(i + 1) & 1][r]);
      }
      STRATA_UNROLL for (int r = 0; r < NR; ++r) {
        scales[r] = block_scales(F::scales(block(r, i), d[r]));
        if constexpr (!kAhead) prepare_block<F>(block(r, i), sg[r]);
      }
      // Unrolled: each chunk's scale shuffle becomes a constant (IQ2_XXS, IQ1_M -20 % time per row).
      STRATA_UNROLL for (int c = 0; c < 8; ++c) {
        __m256i a[NR], s[NR];
        STRATA_UNROLL for (int r = 0; r < NR; ++r) {
          if constexpr (has_offset_codes<F>) a[r] = s[r] = F::offset_codes(block(r, i), sg[r], c, tab);
          else magnitudes_and_signs<F>(block(r, i), c, tab, sg[r], a[r], s[r]);
        }
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          const __m256i y = load32(act(t, i).qs + 32 * c);
          STRATA_UNROLL for (int r = 0; r < NR; ++r) {
            __m256i p;
            if constexpr (has_offset_codes<F>) p = _mm256_maddubs_epi16(a[r], y);
            else p = _mm256_maddubs_epi16(a[r], signed_activations<F>(y, s[r]));
            sum[r][t] = _mm256_add_epi32(sum[r][t], _mm256_madd_epi16(p, scale_pair(scales[r], c)));
            if constexpr (kKeepSums<F>) STRATA_KEEP(sum[r][t]);
          }
        }
      }
      if constexpr (has_offset_codes<F>) {
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act(t, i).bsums));
          STRATA_UNROLL for (int r = 0; r < NR; ++r)
            sum[r][t] = _mm256_sub_epi32(sum[r][t], _mm256_madd_epi16(bsums, F::offset_scales(block(r, i))));
        }
      }
    }
    STRATA_UNROLL for (int r = 0; r < NR; ++r) STRATA_UNROLL for (int t = 0; t < NT; ++t) {
      if (i > 0) acc[r][t] = block_step(prev_d[r], prev_yd[t], hsum_i32(prev[r][t]), acc[r][t]);
      if (i == nb) continue;
      if constexpr (requires { F::min_term(block(r, i), act(t, i)); })
        mins[r][t] += act(t, i).d * F::min_term(block(r, i), act(t, i));
      prev[r][t] = sum[r][t];
    }
    if (i == nb) break;
    STRATA_UNROLL for (int r = 0; r < NR; ++r) prev_d[r] = d[r];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) prev_yd[t] = act(t, i).d;
  }
  STRATA_UNROLL for (int r = 0; r < NR; ++r) STRATA_UNROLL for (int t = 0; t < NT; ++t) out[NT * r + t] = acc[r][t] - mins[r][t];
}

// Decode: weight rows two at a time, an odd last one alone.
template <typename F>
void dotq_codes_rows(int n, const uint8_t* w, size_t row_stride, int nrows, const uint8_t* xq, float* out) {
  int r = 0;
  for (; r + 2 <= nrows; r += 2) dotq_codes_tile<F, 2, 1>(n, w + r * row_stride, row_stride, xq, 0, out + r);
  if (r < nrows) dotq_codes_tile<F, 1, 1>(n, w + r * row_stride, row_stride, xq, 0, out + r);
}

// ---- IQ1_S and IQ1_M decode (matrix-vector) ----
// The generic driver above spends most of an IQ1 block on vector loads and shuffles (Zen 3 takes
// two of each per cycle): per 32 values, four table entries merged into one register and a
// shuffle for the sub-scales. Here the eight entry registers of a block are laid out so that
// their sub-scales need no shuffle per register: register k holds in its 64-bit lane q the group
// G(k, q) = 16 (k / 4) + 4 q + k % 4, so lane q always covers sub-block q (IQ1_S: registers 0-3)
// or q + 4 (4-7), and IQ1_M's 16-value halves repeat every two registers. The activations are
// put in the same order once per call (gkq_permute_block), for every row. Codes are the
// offset ones (iq1s_code: 8 g + delta + 10), the offset taken off through the Q8_K sums as in the
// generic driver, so each block's integer total, and the result's bits, are the same.
constexpr int gkq_group(int E) {
  const int k = E / 4, q = E % 4;
  return 16 * (k / 4) + 4 * q + k % 4;
}
// Activation block i, 64-bit groups in G(k, q) order: register k = lane k of the natural chunk
// registers 4 (k / 4) .. 4 (k / 4) + 3, a 4 x 4 transpose of 64-bit lanes.
inline void gkq_permute_block(const BlockQ8_K& y, int8_t* out) {
  for (int h = 0; h < 2; ++h) {
    const __m256i y0 = load32(y.qs + 128 * h), y1 = load32(y.qs + 128 * h + 32), y2 = load32(y.qs + 128 * h + 64),
                  y3 = load32(y.qs + 128 * h + 96);
    const __m256i t0 = _mm256_unpacklo_epi64(y0, y1), t1 = _mm256_unpackhi_epi64(y0, y1);
    const __m256i t2 = _mm256_unpacklo_epi64(y2, y3), t3 = _mm256_unpackhi_epi64(y2, y3);
    auto* o = reinterpret_cast<__m256i*>(out + 128 * h);
    _mm256_storeu_si256(o + 0, _mm256_permute2x128_si256(t0, t2, 0x20));
    _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(t1, t3, 0x20));
    _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(t0, t2, 0x31));
    _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(t1, t3, 0x31));
  }
}
// The 32 indices of a block in G(k, q) order (entry E = 4k + q) as 16-bit values: the code
// bytes picked per lane from qs, the high bits as in store_indices (C: ChunkIQ1_S or ChunkIQ1_M).
template <class C>
inline void iq1_indices(const typename C::Block& b, uint16_t* idx) {
  alignas(32) static constexpr auto kCodePick = [] {
    std::array<int8_t, 32> p{};
    for (int j = 0; j < 32; ++j) p[j] = j % 2 ? -1 : static_cast<int8_t>(gkq_group(j / 2));  // 16-bit lane j / 2
    return p;
  }();
  static constexpr auto kLanes = index_lanes<2>([](int E) { return C::lane(gkq_group(E)); });
  const __m256i qh2 = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh)));
  const __m256i m = _mm256_set1_epi16(static_cast<int16_t>(C::kIndexMask));
  const __m256i pick = _mm256_load_si256(reinterpret_cast<const __m256i*>(kCodePick.data()));
  for (int g = 0; g < 2; ++g) {
    // entries 16g .. 16g + 15: groups 16g .. 16g + 15, all in qs[16g .. 16g + 16)
    const __m256i codes = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(load16(b.qs + 16 * g)), pick);
    const __m256i h = _mm256_shuffle_epi8(qh2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLanes[g].pick.data())));
    const __m256i mul = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLanes[g].mul.data()));
    _mm256_store_si256(reinterpret_cast<__m256i*>(idx + 16 * g), _mm256_or_si256(codes, _mm256_and_si256(_mm256_mullo_epi16(h, mul), m)));
  }
}
// Entry register k: four indices from one 64-bit load.
inline __m256i iq1_entries(const uint64_t* tab, const uint16_t* idx, int k) {
  uint64_t q;
  std::memcpy(&q, idx + 4 * k, 8);
  const unsigned e[4] = {static_cast<unsigned>(q & 0xFFFF), static_cast<unsigned>((q >> 16) & 0xFFFF),
                         static_cast<unsigned>((q >> 32) & 0xFFFF), static_cast<unsigned>(q >> 48)};
  return entries4x64(tab, e);
}
// The layout of each format's sub-scales (the natural ones of Chunk::scales) over the entry
// registers: register k takes sc[scale_reg(k)], one sub-scale per 64-bit lane.
// One sub-scale per 32 values (IQ1_S, IQ2_XXS, IQ3_XXS, IQ3_S).
struct ScalesPer32 {
  static constexpr int kScaleRegs = 2;
  static constexpr int scale_reg(int k) { return k / 4; }  // lane q: sub-block q + 4 (k / 4)
  // s: 32-bit lane j holds sub-block j's scale in both halves
  static void scale_regs(__m256i s, __m256i* sc) {
    sc[0] = _mm256_permutevar8x32_epi32(s, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
    sc[1] = _mm256_permutevar8x32_epi32(s, _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7));
  }
};
// One per 16 values (IQ1_M, IQ2_XS, IQ2_S).
struct ScalesPer16 {
  static constexpr int kScaleRegs = 4;
  // register k, lane q: group 16 (k / 4) + 4q + k % 4, half 8 (k / 4) + 2q + (k % 4) / 2
  static constexpr int scale_reg(int k) { return k / 2; }
  // s: 16-bit lane h holds half h's scale
  static void scale_regs(__m256i s, __m256i* sc) {
    const __m128i even = _mm_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
    const __m128i odd = _mm_setr_epi8(2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15);
    const __m256i de = _mm256_shuffle_epi8(s, _mm256_set_m128i(even, even));  // dword j: half 2j twice
    const __m256i dd = _mm256_shuffle_epi8(s, _mm256_set_m128i(odd, odd));    // dword j: half 2j + 1 twice
    const __m256i lo = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3), hi = _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7);
    sc[0] = _mm256_permutevar8x32_epi32(de, lo);
    sc[1] = _mm256_permutevar8x32_epi32(dd, lo);
    sc[2] = _mm256_permutevar8x32_epi32(de, hi);
    sc[3] = _mm256_permutevar8x32_epi32(dd, hi);
  }
};
struct Iq1S : ScalesPer32 {
  using Chunk = ChunkIQ1_S;
};
struct Iq1M : ScalesPer16 {
  using Chunk = ChunkIQ1_M;
};

// NR weight rows against one activation row (y, and yp its blocks in G(k, q) order).
template <class F, int NR>
void iq1_rows_tile(int n, const uint8_t* w, size_t ws, const BlockQ8_K* y, const int8_t* yp, float* out) {
  using C = typename F::Chunk;
  using Block = typename C::Block;
  const uint64_t* tab = iq::tables().iq1s_code;
  auto block = [&](int r, int i) -> const Block& { return reinterpret_cast<const Block*>(w + r * ws)[i]; };
  const int nb = n / 256;
  float acc[NR] = {}, prev_d[NR] = {}, prev_yd = 0.f;
  __m256i prev[NR];
  STRATA_UNROLL for (int r = 0; r < NR; ++r) prev[r] = _mm256_setzero_si256();
  // Each block's indices are made one block ahead, so their stores are done before they are read.
  alignas(32) uint16_t idx[2][NR][32];
  if (nb > 0) STRATA_UNROLL for (int r = 0; r < NR; ++r) iq1_indices<C>(block(r, 0), idx[0][r]);
  for (int i = 0; i < nb; ++i) {
    const uint16_t(*ix)[32] = idx[i & 1];
    STRATA_UNROLL for (int r = 0; r < NR; ++r) prefetch_codes_ahead(&block(r, i));
    if (i + 1 < nb) STRATA_UNROLL for (int r = 0; r < NR; ++r) iq1_indices<C>(block(r, i + 1), idx[(i + 1) & 1][r]);
    __m256i sc[NR][F::kScaleRegs], sum[NR];
    float d[NR];
    STRATA_UNROLL for (int r = 0; r < NR; ++r) {
      F::scale_regs(C::scales(block(r, i), d[r]), sc[r]);
      sum[r] = _mm256_setzero_si256();
    }
    const int8_t* yk = yp + 256 * i;
    STRATA_UNROLL for (int k = 0; k < 8; ++k) {
      const __m256i yv = load32(yk + 32 * k);
      STRATA_UNROLL for (int r = 0; r < NR; ++r) {
        const __m256i p = _mm256_maddubs_epi16(iq1_entries(tab, ix[r], k), yv);
        sum[r] = _mm256_add_epi32(sum[r], _mm256_madd_epi16(p, sc[r][F::scale_reg(k)]));
        STRATA_KEEP(sum[r]);
      }
    }
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums));
    STRATA_UNROLL for (int r = 0; r < NR; ++r) {
      sum[r] = _mm256_sub_epi32(sum[r], _mm256_madd_epi16(bsums, C::offset_scales(block(r, i))));
      // the previous block's float step, now that its total is ready (as in dotq_codes_tile)
      if (i > 0) acc[r] = block_step(prev_d[r], prev_yd, hsum_i32(prev[r]), acc[r]);
      prev[r] = sum[r];
      prev_d[r] = d[r];
    }
    prev_yd = y[i].d;
  }
  STRATA_UNROLL for (int r = 0; r < NR; ++r) {
    if (nb > 0) acc[r] = block_step(prev_d[r], prev_yd, hsum_i32(prev[r]), acc[r]);
    out[r] = acc[r];
  }
}

// A call's nb blocks of Q8_K values permuted as the i-quant kernels read them (gkq_permute_block).
const int8_t* gkq_permuted(const BlockQ8_K* y, int nb) {
  auto* permuted = static_cast<int8_t*>(thread_scratch(ScratchSlot::IqPermutedActivations, static_cast<size_t>(nb) * 256));
  for (int i = 0; i < nb; ++i) gkq_permute_block(y[i], permuted + 256 * i);
  return permuted;
}

template <class F>
void iq1_rows(int n, const uint8_t* w, size_t row_stride, int nrows, const uint8_t* xq, float* out) {
  const auto* y = reinterpret_cast<const BlockQ8_K*>(xq);
  const int nb = n / 256;
  const int8_t* yp = gkq_permuted(y, nb);
  int r = 0;
  for (; r + 2 <= nrows; r += 2) iq1_rows_tile<F, 2>(n, w + r * row_stride, row_stride, y, yp, out + r);
  if (r < nrows) iq1_rows_tile<F, 1>(n, w + r * row_stride, row_stride, y, yp, out + r);
}

// ---- Grid i-quant decode (matrix-vector) in the same G(k, q) order ----
// IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S as the IQ1 kernel lays them out: entry register k
// holds groups G(k, q) (C::grid_gkq), their sign sources come from one register of the block's
// sign bytes with one shuffle each as before (gkq_signs), and the sub-scales are made once per block
// (S::scale_regs) in place of one shuffle per 32 values. The activations are permuted once per
// call. Each register's products and 32-bit lane sums are those of dotq_codes_tile's chunks in
// another order, so each block's integer total, and the result's bits, are the same.
// Formats with 8-value entries and indices worked out per block (IQ2_S) store them in G(k, q)
// order as the IQ1 kernel does, so each register's four come from one 64-bit load.
template <class C>
constexpr bool kGkqTable = requires(const iq::Tables& t) { C::gkq_table(t); };
template <class C>
inline void gkq_indices(const typename C::Block& b, BlockPrep& g) {
  if constexpr (kGkqTable<C>) {
    iq1_indices<C>(b, g.idx);
    g.indices_stored();
  } else {
    C::indices(b, g);
  }
}
template <class C, class S, int NR>
void grid_rows_tile(int n, const uint8_t* w, size_t ws, const BlockQ8_K* y, const int8_t* yp, float* out) {
  using Block = typename C::Block;
  const iq::Tables& tab = iq::tables();
  auto block = [&](int r, int i) -> const Block& { return reinterpret_cast<const Block*>(w + r * ws)[i]; };
  const int nb = n / 256;
  float acc[NR] = {}, prev_d[NR] = {}, prev_yd = 0.f;
  __m256i prev[NR];
  STRATA_UNROLL for (int r = 0; r < NR; ++r) prev[r] = _mm256_setzero_si256();
  constexpr bool kAhead = kIndicesAhead<C>;  // as in dotq_codes_tile
  BlockPrep prep[kAhead ? 2 : 1][NR];
  if constexpr (kAhead)
    if (nb > 0) STRATA_UNROLL for (int r = 0; r < NR; ++r) gkq_indices<C>(block(r, 0), prep[0][r]);
  for (int i = 0; i < nb; ++i) {
    STRATA_UNROLL for (int r = 0; r < NR; ++r) prefetch_codes_ahead(&block(r, i));
    BlockPrep* g = prep[kAhead ? i & 1 : 0];
    if constexpr (kAhead)
      if (i + 1 < nb) STRATA_UNROLL for (int r = 0; r < NR; ++r) gkq_indices<C>(block(r, i + 1), prep[(i + 1) & 1][r]);
    __m256i gs[NR];
    STRATA_UNROLL for (int r = 0; r < NR; ++r) gs[r] = C::sign_bytes_gkq(block(r, i));
    __m256i sc[NR][S::kScaleRegs], sum[NR];
    float d[NR];
    STRATA_UNROLL for (int r = 0; r < NR; ++r) {
      S::scale_regs(C::scales(block(r, i), d[r]), sc[r]);
      sum[r] = _mm256_setzero_si256();
    }
    const int8_t* yk = yp + 256 * i;
    STRATA_UNROLL for (int k = 0; k < 8; ++k) {
      const __m256i yv = load32(yk + 32 * k);
      STRATA_UNROLL for (int r = 0; r < NR; ++r) {
        __m256i a;
        if constexpr (kGkqTable<C>) a = iq1_entries(C::gkq_table(tab), g[r].idx, k);
        else a = C::grid_gkq(block(r, i), g[r], k, tab);
        const __m256i p = _mm256_maddubs_epi16(a, _mm256_sign_epi8(yv, gkq_signs(gs[r], k)));
        sum[r] = _mm256_add_epi32(sum[r], _mm256_madd_epi16(p, sc[r][S::scale_reg(k)]));
        STRATA_KEEP(sum[r]);
      }
    }
    STRATA_UNROLL for (int r = 0; r < NR; ++r) {
      if (i > 0) acc[r] = block_step(prev_d[r], prev_yd, hsum_i32(prev[r]), acc[r]);
      prev[r] = sum[r];
      prev_d[r] = d[r];
    }
    prev_yd = y[i].d;
  }
  STRATA_UNROLL for (int r = 0; r < NR; ++r) {
    if (nb > 0) acc[r] = block_step(prev_d[r], prev_yd, hsum_i32(prev[r]), acc[r]);
    out[r] = acc[r];
  }
}

template <class C, class S>
void grid_rows(int n, const uint8_t* w, size_t row_stride, int nrows, const uint8_t* xq, float* out) {
  const auto* y = reinterpret_cast<const BlockQ8_K*>(xq);
  const int nb = n / 256;
  const int8_t* yp = gkq_permuted(y, nb);
  int r = 0;
  for (; r + 2 <= nrows; r += 2) grid_rows_tile<C, S, 2>(n, w + r * row_stride, row_stride, y, yp, out + r);
  if (r < nrows) grid_rows_tile<C, S, 1>(n, w + r * row_stride, row_stride, y, yp, out + r);
}

// Prefill of these formats: 8 weight rows decoded once per matmul into DecodedX8Block
// (quant/gemm_x8.h), so every broadcast activation word feeds 8 rows.

// Formats with a min term (Q2_K) carry their mins into the decoded rows.
template <typename F>
constexpr bool has_min = requires(const typename F::Block& b) { F::min_scale(b); };

template <typename F>
void decode_rows8_codes(int n, const uint8_t* rows, size_t row_stride, int nrows, uint8_t* out) {
  auto* db = reinterpret_cast<DecodedX8Block*>(out);
  auto pair16 = [](int lo, int hi) {
    return static_cast<int32_t>((static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16) | static_cast<uint16_t>(lo));
  };
  const iq::Tables& tab = iq::tables();
  for (int i = 0; i < n / 256; ++i) {
    const typename F::Block* b[8];
    for (int r = 0; r < nrows; ++r) b[r] = reinterpret_cast<const typename F::Block*>(rows + r * row_stride) + i;
    for (int r = 0; r < 8; ++r) {
      alignas(32) int16_t sub[16] = {};
      float d = 0.f;
      if (r < nrows) _mm256_store_si256(reinterpret_cast<__m256i*>(sub), F::scales(*b[r], d));
      db[i].d[r] = d;
      for (int j = 0; j < 16; ++j) db[i].sc[j][r] = pair16(sub[j], sub[j]);
      db[i].dmin[r] = 0.f;
      for (int p = 0; p < 8; ++p) db[i].mn[p][r] = 0;
      if constexpr (has_min<F>)
        if (r < nrows) {
          db[i].dmin[r] = F::min_scale(*b[r]);
          for (int p = 0; p < 8; ++p) db[i].mn[p][r] = pair16(F::min_of(*b[r], 2 * p), F::min_of(*b[r], 2 * p + 1));
        }
    }
    BlockPrep sg[8];
    for (int r = 0; r < nrows; ++r) prepare_block<F>(*b[r], sg[r]);
    for (int c = 0; c < 8; ++c) {
      __m256i v[8];
      for (int r = 0; r < 8; ++r) {
        v[r] = _mm256_setzero_si256();
        if (r >= nrows) continue;
        __m256i a, s;
        magnitudes_and_signs<F>(*b[r], c, tab, sg[r], a, s);
        v[r] = _mm256_sign_epi8(a, s);
      }
      transpose8x8_epi32(v);
      for (int g = 0; g < 8; ++g) _mm256_storeu_si256(reinterpret_cast<__m256i*>(db[i].v[8 * c + g]), v[g]);
    }
  }
}

// Values up to 63 in magnitude (the largest, IQ3's grid, reaches 62): two maddubs results
// (each pair below 2*63*128) sum exactly in 16 bits before madd applies the sub-scale. With
// kMin (Q2_K), the min term of dotq_codes_tile, lane by lane.
// kOff >= 0: every value v satisfies 0 <= u = v + kOff <= kMaxU <= 63 (DecodedRange below), so
// maddubs takes u as its unsigned operand with the activations as they are (no sign steps per
// token), and kOff * (the sub-scaled 16-value activation sums) comes off the block's integer
// total: the same total, so the same bits. kOff < 0: |v| and the activations signed by v.
template <int NT, bool kMin, int kOff, int kMaxU>
void gemm_decoded8_n(int n, const uint8_t* w, const uint8_t* xq, size_t xs, const Q8BlockInfo*, size_t, float* out) {
  const auto* b = reinterpret_cast<const DecodedX8Block*>(w);
  __m256 acc[NT], mins[NT];
  STRATA_UNROLL for (int t = 0; t < NT; ++t) acc[t] = mins[t] = _mm256_setzero_ps();
  for (int ib = 0; ib < n / 256; ++ib) {
    const DecodedX8Block& B = b[ib];
    const BlockQ8_K* y[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(xq + xs * t) + ib;
    __m256i isum[NT];
    STRATA_UNROLL for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
    for (int j = 0; j < 16; ++j) {
      const __m256i scv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(B.sc[j]));
      if constexpr (kOff >= 0) {
        // u <= 31: a sub-block's four maddubs results (each pair below 2*31*128) sum exactly in
        // 16 bits before one madd applies its sub-scale; u <= 63: two at a time.
        constexpr int kPerMadd = kMaxU <= 31 ? 4 : 2;
        const __m256i off = _mm256_set1_epi8(static_cast<char>(kOff));
        STRATA_UNROLL for (int k0 = 0; k0 < 4; k0 += kPerMadd) {
          __m256i u[kPerMadd];
          STRATA_UNROLL for (int k = 0; k < kPerMadd; ++k) u[k] = _mm256_add_epi8(load32(B.v[4 * j + k0 + k]), off);
          STRATA_UNROLL for (int t = 0; t < NT; ++t) {
            const int8_t* x = y[t]->qs + 16 * j + 4 * k0;
            __m256i s16 = _mm256_maddubs_epi16(u[0], bcast4(x));
            STRATA_UNROLL for (int k = 1; k < kPerMadd; ++k) s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(u[k], bcast4(x + 4 * k)));
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16, scv));
            STRATA_KEEP(isum[t]);
          }
        }
        continue;
      }
      STRATA_UNROLL for (int h = 0; h < 2; ++h) {
        const int G = 4 * j + 2 * h;
        const __m256i c0 = load32(B.v[G]), c1 = load32(B.v[G + 1]);
        const __m256i a0 = _mm256_sign_epi8(c0, c0), a1 = _mm256_sign_epi8(c1, c1);
        STRATA_UNROLL for (int t = 0; t < NT; ++t) {
          const __m256i p0 = _mm256_maddubs_epi16(a0, _mm256_sign_epi8(bcast4(y[t]->qs + 4 * G), c0));
          const __m256i p1 = _mm256_maddubs_epi16(a1, _mm256_sign_epi8(bcast4(y[t]->qs + 4 * G + 4), c1));
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_add_epi16(p0, p1), scv));
          STRATA_KEEP(isum[t]);
        }
      }
    }
    if constexpr (kOff > 0) {
      __m256i sc_pairs[8];  // sub-scales of values 32p.. and 32p + 16.. of each row, as a madd pair
      for (int p = 0; p < 8; ++p)
        sc_pairs[p] = _mm256_blend_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(B.sc[2 * p])),
                                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(B.sc[2 * p + 1])), 0xAA);
      STRATA_UNROLL for (int t = 0; t < NT; ++t) {
        const int16_t* bs = y[t]->bsums;
        __m256i s32 = _mm256_setzero_si256();
        for (int p = 0; p < 8; ++p) s32 = _mm256_add_epi32(s32, _mm256_madd_epi16(sc_pairs[p], bcast4(bs + 2 * p)));
        isum[t] = _mm256_sub_epi32(isum[t], _mm256_mullo_epi32(s32, _mm256_set1_epi32(kOff)));
      }
    }
    const __m256 dw = _mm256_loadu_ps(B.d);
    STRATA_UNROLL for (int t = 0; t < NT; ++t)
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(y[t]->d)), _mm256_cvtepi32_ps(isum[t]), acc[t]);
    if constexpr (kMin) {
      const __m256 dm = _mm256_loadu_ps(B.dmin);
      STRATA_UNROLL for (int t = 0; t < NT; ++t) {
        const int16_t* bs = y[t]->bsums;
        __m256i m32 = _mm256_setzero_si256();
        for (int p = 0; p < 8; ++p)
          m32 = _mm256_add_epi32(m32, _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(B.mn[p])),
                                                        bcast4(bs + 2 * p)));
        mins[t] = _mm256_add_ps(mins[t], _mm256_mul_ps(_mm256_set1_ps(y[t]->d), _mm256_mul_ps(dm, _mm256_cvtepi32_ps(m32))));
      }
    }
  }
  STRATA_UNROLL for (int t = 0; t < NT; ++t) _mm256_storeu_ps(out + 8 * t, _mm256_sub_ps(acc[t], mins[t]));
}

template <bool kMin, int kOff, int kMaxU>
void gemm_decoded8(int n, const uint8_t* w, const uint8_t* xq, size_t xs, const Q8BlockInfo* xi, size_t xis, int ntok,
                   float* out) {
  switch (ntok) {
    case 1: gemm_decoded8_n<1, kMin, kOff, kMaxU>(n, w, xq, xs, xi, xis, out); break;
    case 2: gemm_decoded8_n<2, kMin, kOff, kMaxU>(n, w, xq, xs, xi, xis, out); break;
    case 3: gemm_decoded8_n<3, kMin, kOff, kMaxU>(n, w, xq, xs, xi, xis, out); break;
    default: gemm_decoded8_n<4, kMin, kOff, kMaxU>(n, w, xq, xs, xi, xis, out); break;
  }
}

// The offset that puts a format's decoded values in 0..63 and their largest then (gemm_decoded8_n's
// kOff, kMaxU); off -1 where none does: the IQ2 grids (up to 43) and IQ3_XXS's (up to 62) reach
// too far.
struct DecodedRange {
  int off, max_u;
};
template <typename F>
constexpr DecodedRange decoded_range() {
  if constexpr (std::is_same_v<F, ChunkQ3_K>) return {4, 7};                                          // -4..3
  else if constexpr (std::is_same_v<F, ChunkIQ3_S>) return {15, 30};                                  // +-(1..15)
  else if constexpr (std::is_same_v<F, ChunkIQ1_S> || std::is_same_v<F, ChunkIQ1_M>) return {9, 18};  // 8g + delta
  else if constexpr (std::is_same_v<F, ChunkTQ1_0> || std::is_same_v<F, ChunkTQ2_0>) return {1, 2};   // -1..1
  else if constexpr (std::is_same_v<F, ChunkQ2_K>) return {0, 3};                                      // codes 0..3
  else return {-1, 0};
}

template <typename F>
float dotq_codes(int n, const void* w, const void* xq) {
  float out;
  dotq_codes_tile<F, 1, 1>(n, static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(xq), 0, &out);
  return out;
}

template <typename F>
void dotq_codes_multi(int n, const void* w, const uint8_t* xq, size_t stride, int ntok, float* out) {
  const auto* b = static_cast<const uint8_t*>(w);
  switch (ntok) {
    case 1: dotq_codes_tile<F, 1, 1>(n, b, 0, xq, stride, out); break;
    case 2: dotq_codes_tile<F, 1, 2>(n, b, 0, xq, stride, out); break;
    case 3: dotq_codes_tile<F, 1, 3>(n, b, 0, xq, stride, out); break;
    default: dotq_codes_tile<F, 1, 4>(n, b, 0, xq, stride, out); break;
  }
}

}  // namespace

void fill_avx2_int_kernels(KernelTable& t) {
  auto set = [&](GgmlType ty, QDotFn f) { t.dotq[static_cast<int>(ty)] = f; };
  set(GgmlType::Q8_0, dotq_q8_0);
  set(GgmlType::Q4_0, dotq_q4_0);
  set(GgmlType::Q5_0, dotq_q5_0);
  set(GgmlType::IQ4_NL, dotq_iq4_nl);
  set(GgmlType::Q4_1, dotq_q41_q51<BlockQ4_1, false>);
  set(GgmlType::Q5_1, dotq_q41_q51<BlockQ5_1, true>);
  set(GgmlType::Q4_K, dotq_q45_k<BlockQ4_K, false>);
  set(GgmlType::Q5_K, dotq_q45_k<BlockQ5_K, true>);
  set(GgmlType::Q6_K, dotq_q6_k);
  t.dotq_multi[static_cast<int>(GgmlType::Q8_0)] = dotq_multi<BlockQ8_0, UnpackQ8_0>;
  t.dotq_multi[static_cast<int>(GgmlType::Q4_0)] = dotq_multi<BlockQ4_0, UnpackQ4_0>;
  t.dotq_multi[static_cast<int>(GgmlType::Q5_0)] = dotq_multi<BlockQ5_0, UnpackQ5_0>;
  t.dotq_multi[static_cast<int>(GgmlType::IQ4_NL)] = dotq_multi<BlockIQ4_NL, UnpackIQ4_NL>;
  t.dotq_multi[static_cast<int>(GgmlType::Q4_K)] = dotq_q45_k_multi<BlockQ4_K, false>;
  t.dotq_multi[static_cast<int>(GgmlType::Q5_K)] = dotq_q45_k_multi<BlockQ5_K, true>;
  t.dotq_multi[static_cast<int>(GgmlType::Q6_K)] = dotq_q6_k_multi;
  // The 256-value formats whose codes are built per 32-value chunk.
#define STRATA_CODES(T)                                                  \
  t.dotq[static_cast<int>(GgmlType::T)] = dotq_codes<Chunk##T>;          \
  t.dotq_multi[static_cast<int>(GgmlType::T)] = dotq_codes_multi<Chunk##T>;
  STRATA_CODES(IQ2_XXS) STRATA_CODES(IQ2_XS) STRATA_CODES(IQ2_S) STRATA_CODES(IQ3_XXS) STRATA_CODES(IQ3_S)
  STRATA_CODES(IQ1_S) STRATA_CODES(IQ1_M) STRATA_CODES(IQ4_XS) STRATA_CODES(TQ1_0) STRATA_CODES(TQ2_0) STRATA_CODES(Q2_K) STRATA_CODES(Q3_K)
#undef STRATA_CODES
  // Decode two weight rows per call where that measured faster (Matvec/<format>, MV_KIB=256,
  // MV_COLS=1024 and 3072, GB/s one row -> two rows: IQ2_XS 3.16 -> 3.53 and 3.56 -> 3.71,
  // IQ2_XXS 2.54 -> 2.88, TQ2_0 4.96 -> 6.56; after the vector scales, µs at 1024 and 4096
  // columns: Q3_K 42 -> 35, 40 -> 33, Q2_K 46 -> 41-46, 41 -> 41). The grid i-quants decode two
  // rows at a time in G(k, q) order (grid_rows; Zen 3, Matvec MV_KIB=512 MV_COLS=1024, best of
  // eight alternated rounds, ms, dotq_codes_rows -> grid_rows: IQ2_XXS 0.162 -> 0.135, IQ2_XS
  // 0.135 -> 0.125, IQ2_S 0.127 -> 0.123, IQ3_XXS 0.152 -> 0.141, IQ3_S, one row at a time
  // before, 0.150 -> 0.127).
#define STRATA_ROWS(T) t.dotq_rows[static_cast<int>(GgmlType::T)] = dotq_codes_rows<Chunk##T>;
  STRATA_ROWS(TQ1_0) STRATA_ROWS(TQ2_0) STRATA_ROWS(Q2_K) STRATA_ROWS(Q3_K)
#undef STRATA_ROWS
  t.dotq_rows[static_cast<int>(GgmlType::IQ2_XXS)] = grid_rows<ChunkIQ2_XXS, ScalesPer32>;
  t.dotq_rows[static_cast<int>(GgmlType::IQ2_XS)] = grid_rows<ChunkIQ2_XS, ScalesPer16>;
  t.dotq_rows[static_cast<int>(GgmlType::IQ2_S)] = grid_rows<ChunkIQ2_S, ScalesPer16>;
  t.dotq_rows[static_cast<int>(GgmlType::IQ3_XXS)] = grid_rows<ChunkIQ3_XXS, ScalesPer32>;
  t.dotq_rows[static_cast<int>(GgmlType::IQ3_S)] = grid_rows<ChunkIQ3_S, ScalesPer32>;
  t.dotq_rows[static_cast<int>(GgmlType::IQ1_S)] = iq1_rows<Iq1S>;
  t.dotq_rows[static_cast<int>(GgmlType::IQ1_M)] = iq1_rows<Iq1M>;
  // Prefill of the lookup-bound formats: 8 rows decoded at once.
#define STRATA_DECODED(T)                                                         \
  t.decode_rows8[static_cast<int>(GgmlType::T)] = decode_rows8_codes<Chunk##T>; \
  t.gemm_decoded8[static_cast<int>(GgmlType::T)] =                               \
      gemm_decoded8<has_min<Chunk##T>, decoded_range<Chunk##T>().off, decoded_range<Chunk##T>().max_u>;
  STRATA_DECODED(IQ2_XXS) STRATA_DECODED(IQ2_XS) STRATA_DECODED(IQ2_S) STRATA_DECODED(IQ3_XXS) STRATA_DECODED(IQ3_S)
  STRATA_DECODED(IQ1_S) STRATA_DECODED(IQ1_M) STRATA_DECODED(TQ1_0) STRATA_DECODED(TQ2_0) STRATA_DECODED(Q3_K) STRATA_DECODED(Q2_K)
#undef STRATA_DECODED
  // Packed Q6_K decoded (gemm_x8_avx2.cpp: decode_packed8): the same integer totals and final
  // multiply-add per block as its packed kernel.
  t.gemm_decoded8[static_cast<int>(GgmlType::Q6_K)] = gemm_decoded8<false, 32, 63>;  // codes 0..63
}

}  // namespace strata
