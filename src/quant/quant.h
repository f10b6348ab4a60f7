// Scalar reference dequantizers and quantizers for every supported block format.
#pragma once
#include <cstdint>

#include "quant/formats.h"

namespace strata {

// dst[0..n) = values of the n elements stored in src (n a multiple of the block size).
void dequantize_row_ref(GgmlType type, const void* src, float* dst, int64_t n);

// Encodes n floats into blocks of `type`. Supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0, IQ4_NL, IQ4_XS, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, TQ1_0, TQ2_0, and the lattice
// i-quants IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S (a grid search, quantize_iq.cpp).
// Throws for others.
void quantize_row(GgmlType type, const float* src, void* dst, int64_t n);
// The model quantizer (strata quantize, synth): the same, except that Q4_0, Q5_0, IQ4_NL and IQ4_XS
// search their scales here where quantize_row (also used for the KV cache) takes the min/max rule.
// importance (optional, one value per element: an importance matrix row) weights the error of the
// formats uses_importance names; the others ignore it.
void quantize_row_best(GgmlType type, const float* src, void* dst, int64_t n, const float* importance = nullptr);
bool uses_importance(GgmlType type);
// w[j] *= importance[j] relative to the mean over the n values, plus a 1 % floor so columns the
// activations never reach still count a little; unchanged when the mean is not positive. The
// error weighting every importance-aware quantizer shares.
void weight_by_importance(const float* importance, int n, float* w);
bool can_quantize(GgmlType type);

// Reference dot product of one weight row with float activations (dequantize, then sum in double).
float dot_row_ref(GgmlType type, int n, const void* w, const float* x);

// Helpers of the K-quant layouts, shared by dequantizers and SIMD kernels.
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t& d, uint8_t& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}
// The 16 signed 6-bit scales of a Q3_K block, unpacked from its 12 bytes.
void q3k_unpack_scales(const uint8_t packed[12], int8_t out[16]);

}  // namespace strata
