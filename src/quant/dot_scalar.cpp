// Portable kernels: dequantize a block group, then multiply-add in float.
#include "quant/dequant_blocks.h"
#include "quant/kernels.h"

namespace strata {

namespace {

template <GgmlType T>
float dot_generic(int n, const void* w, const float* x) {
  constexpr int bs = 256;  // a multiple of every block size
  float buf[bs];
  float sum = 0;
  const auto* p = static_cast<const uint8_t*>(w);
  for (int i = 0; i < n; i += bs) {
    int len = n - i < bs ? n - i : bs;
    dequantize_row_ref(T, p, buf, len);
    p += row_bytes(T, len);
    for (int j = 0; j < len; ++j) sum += buf[j] * x[i + j];
  }
  return sum;
}

float dot_f32(int n, const void* w, const float* x) {
  const float* a = static_cast<const float*>(w);
  float s = 0;
  for (int i = 0; i < n; ++i) s += a[i] * x[i];
  return s;
}

float dot_f16(int n, const void* w, const float* x) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  const float* lut = fp16_table();
  float s = 0;
  for (int i = 0; i < n; ++i) s += lut[a[i]] * x[i];
  return s;
}

template <GgmlType T>
void deq(const void* src, float* dst, int64_t n) { dequantize_row_ref(T, src, dst, n); }

}  // namespace

void fill_scalar_kernels(KernelTable& t) {
  t.isa = "scalar";
#define STRATA_K(T)                                                   \
  t.dot[static_cast<int>(GgmlType::T)] = dot_generic<GgmlType::T>;    \
  t.dequant[static_cast<int>(GgmlType::T)] = deq<GgmlType::T>;
  STRATA_K(F32) STRATA_K(F16) STRATA_K(BF16) STRATA_K(Q4_0) STRATA_K(Q4_1) STRATA_K(Q5_0) STRATA_K(Q5_1)
  STRATA_K(Q8_0) STRATA_K(IQ4_NL) STRATA_K(Q2_K) STRATA_K(Q3_K) STRATA_K(Q4_K) STRATA_K(Q5_K) STRATA_K(Q6_K)
  STRATA_K(IQ2_XXS) STRATA_K(IQ2_XS) STRATA_K(IQ2_S) STRATA_K(IQ3_XXS) STRATA_K(IQ3_S) STRATA_K(IQ1_S)
  STRATA_K(IQ1_M) STRATA_K(IQ4_XS) STRATA_K(TQ1_0) STRATA_K(TQ2_0)
#undef STRATA_K
  t.dot[static_cast<int>(GgmlType::F32)] = dot_f32;
  t.dot[static_cast<int>(GgmlType::F16)] = dot_f16;
}

}  // namespace strata
