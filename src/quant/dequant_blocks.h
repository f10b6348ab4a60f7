// Block dequantizers shared by the scalar reference and the SIMD files. Internal linkage on
// purpose: each file compiles its own copy with its own ISA flags.
#pragma once
#include <cstdint>
#include <cstring>

#include "quant/formats.h"
#include "quant/fp16.h"
#include "quant/quant.h"

namespace strata {
namespace {

static inline void deq_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = ((b[i].qs[j] & 0xF) - 8) * d;
      y[j + 16] = ((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}
static inline void deq_q4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    float d = fp16_to_fp32(b[i].d), m = fp16_to_fp32(b[i].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = (b[i].qs[j] & 0xF) * d + m;
      y[j + 16] = (b[i].qs[j] >> 4) * d + m;
    }
  }
}
static inline void deq_q5_0(const BlockQ5_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    float d = fp16_to_fp32(b[i].d);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int j = 0; j < 16; ++j) {
      int h0 = ((qh >> j) << 4) & 0x10;
      int h1 = (qh >> (j + 12)) & 0x10;
      y[j] = (((b[i].qs[j] & 0xF) | h0) - 16) * d;
      y[j + 16] = (((b[i].qs[j] >> 4) | h1) - 16) * d;
    }
  }
}
static inline void deq_q5_1(const BlockQ5_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    float d = fp16_to_fp32(b[i].d), m = fp16_to_fp32(b[i].m);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int j = 0; j < 16; ++j) {
      int h0 = ((qh >> j) << 4) & 0x10;
      int h1 = (qh >> (j + 12)) & 0x10;
      y[j] = ((b[i].qs[j] & 0xF) | h0) * d + m;
      y[j + 16] = ((b[i].qs[j] >> 4) | h1) * d + m;
    }
  }
}
static inline void deq_q8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < 32; ++j) y[j] = b[i].qs[j] * d;
  }
}
static inline void deq_iq4_nl(const BlockIQ4_NL* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * kIq4nlValues[b[i].qs[j] & 0xF];
      y[j + 16] = d * kIq4nlValues[b[i].qs[j] >> 4];
    }
  }
}
static inline void deq_q2_k(const BlockQ2_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    int is = 0;
    for (int n = 0; n < 256; n += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        uint8_t sc = b[i].scales[is++];
        float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l] >> shift) & 3) - ml;
        sc = b[i].scales[is++];
        dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l + 16] >> shift) & 3) - ml;
        shift += 2;
      }
      q += 32;
    }
  }
}
static inline void deq_q3_k(const BlockQ3_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float d_all = fp16_to_fp32(b[i].d);
    int8_t scales[16];
    q3k_unpack_scales(b[i].scales, scales);
    const uint8_t* q = b[i].qs;
    const uint8_t* hm = b[i].hmask;
    int is = 0;
    uint8_t m = 1;
    for (int n = 0; n < 256; n += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        float dl = d_all * scales[is++];
        for (int l = 0; l < 16; ++l) *y++ = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
        dl = d_all * scales[is++];
        for (int l = 0; l < 16; ++l) *y++ = dl * (((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
        shift += 2;
        m <<= 1;
      }
      q += 32;
    }
  }
}
static inline void deq_q4_k(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    int is = 0;
    for (int j = 0; j < 256; j += 64) {
      uint8_t sc, m;
      get_scale_min_k4(is, b[i].scales, sc, m);
      float d1 = d * sc, m1 = dmin * m;
      get_scale_min_k4(is + 1, b[i].scales, sc, m);
      float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
      q += 32;
      is += 2;
    }
  }
}
static inline void deq_q5_k(const BlockQ5_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
    const uint8_t* ql = b[i].qs;
    const uint8_t* qh = b[i].qh;
    int is = 0;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < 256; j += 64) {
      uint8_t sc, m;
      get_scale_min_k4(is, b[i].scales, sc, m);
      float d1 = d * sc, m1 = dmin * m;
      get_scale_min_k4(is + 1, b[i].scales, sc, m);
      float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      ql += 32;
      is += 2;
      u1 <<= 2;
      u2 <<= 2;
    }
  }
}
static inline void deq_q6_k(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = fp16_to_fp32(b[i].d);
    const uint8_t* ql = b[i].ql;
    const uint8_t* qh = b[i].qh;
    const int8_t* sc = b[i].scales;
    for (int n = 0; n < 256; n += 128) {
      for (int l = 0; l < 32; ++l) {
        int is = l / 16;
        int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}
static inline void deq_q8_k(const BlockQ8_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i)
    for (int j = 0; j < 256; ++j) *y++ = b[i].d * b[i].qs[j];
}

}  // namespace
}  // namespace strata
