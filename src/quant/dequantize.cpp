// Scalar reference dequantizers: the definition of each format's values.
#include <cstring>

#include "common.h"
#include "quant/fp16.h"
#include "quant/quant.h"
#include "quant/dequant_blocks.h"

namespace strata {

void q3k_unpack_scales(const uint8_t packed[12], int8_t out[16]) {
  uint32_t aux[4];
  std::memcpy(aux, packed, 12);
  constexpr uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  uint8_t u[16];
  std::memcpy(u, aux, 16);
  for (int k = 0; k < 16; ++k) out[k] = static_cast<int8_t>(u[k] - 32);
}

void dequantize_row_ref(GgmlType type, const void* src, float* y, int64_t n) {
  const auto& ti = type_info(type);
  if (!ti.known || n % ti.block_size != 0) throw Error("dequantize: bad row length for " + type_name(type));
  int64_t nb = n / ti.block_size;
  switch (type) {
    case GgmlType::F32: std::memcpy(y, src, n * 4); break;
    case GgmlType::F16: {
      auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(h[i]);
      break;
    }
    case GgmlType::BF16: {
      auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_fp32(h[i]);
      break;
    }
    case GgmlType::Q4_0: deq_q4_0(static_cast<const BlockQ4_0*>(src), y, nb); break;
    case GgmlType::Q4_1: deq_q4_1(static_cast<const BlockQ4_1*>(src), y, nb); break;
    case GgmlType::Q5_0: deq_q5_0(static_cast<const BlockQ5_0*>(src), y, nb); break;
    case GgmlType::Q5_1: deq_q5_1(static_cast<const BlockQ5_1*>(src), y, nb); break;
    case GgmlType::Q8_0: deq_q8_0(static_cast<const BlockQ8_0*>(src), y, nb); break;
    case GgmlType::IQ4_NL: deq_iq4_nl(static_cast<const BlockIQ4_NL*>(src), y, nb); break;
    case GgmlType::Q2_K: deq_q2_k(static_cast<const BlockQ2_K*>(src), y, nb); break;
    case GgmlType::Q3_K: deq_q3_k(static_cast<const BlockQ3_K*>(src), y, nb); break;
    case GgmlType::Q4_K: deq_q4_k(static_cast<const BlockQ4_K*>(src), y, nb); break;
    case GgmlType::Q5_K: deq_q5_k(static_cast<const BlockQ5_K*>(src), y, nb); break;
    case GgmlType::Q6_K: deq_q6_k(static_cast<const BlockQ6_K*>(src), y, nb); break;
    case GgmlType::Q8_K: deq_q8_k(static_cast<const BlockQ8_K*>(src), y, nb); break;
#define STRATA_IQ(T, f) \
    case GgmlType::T: deq_unpacked<Block##T, unpack_##f>(static_cast<const Block##T*>(src), y, nb); break;
    STRATA_IQ(IQ2_XXS, iq2_xxs) STRATA_IQ(IQ2_XS, iq2_xs) STRATA_IQ(IQ2_S, iq2_s) STRATA_IQ(IQ3_XXS, iq3_xxs)
    STRATA_IQ(IQ3_S, iq3_s) STRATA_IQ(IQ1_S, iq1_s) STRATA_IQ(IQ1_M, iq1_m) STRATA_IQ(IQ4_XS, iq4_xs)
    STRATA_IQ(TQ1_0, tq1_0) STRATA_IQ(TQ2_0, tq2_0)
#undef STRATA_IQ
    default: throw Error("tensor type " + type_name(type) + " is not supported by this build");
  }
}

float dot_row_ref(GgmlType type, int n, const void* w, const float* x) {
  // Dequantize one block group at a time so the reference needs no large buffer.
  const auto& ti = type_info(type);
  const int bs = ti.block_size == 1 ? 256 : ti.block_size;
  float buf[256];
  double sum = 0;
  const auto* p = static_cast<const uint8_t*>(w);
  for (int i = 0; i < n; i += bs) {
    int len = n - i < bs ? n - i : bs;
    dequantize_row_ref(type, p, buf, len);
    p += row_bytes(type, len);
    for (int j = 0; j < len; ++j) sum += static_cast<double>(buf[j]) * x[i + j];
  }
  return static_cast<float>(sum);
}

}  // namespace strata
