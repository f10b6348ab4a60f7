// Block dequantizers shared by the scalar reference and the SIMD files. Internal linkage on
// purpose: each file compiles its own copy with its own ISA flags.
#pragma once
#include <cstdint>
#include <cstring>

#include "quant/formats.h"
#include "quant/fp16.h"
#include "quant/iq_tables.h"
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

// ---- i-quants and ternary formats ----
// Each unpacks one 256-value block into integer codes q[256] and one float scale per 16 values,
// such that value i is exactly sc[i / 16] * q[i] (the scales are computed in the same float
// operations as the format's reference, so dequantizing this way is bit-exact). Dot kernels use
// the codes directly against Q8_K activations.
static inline void put8(int8_t* q, uint64_t grid, uint8_t signs) {
  for (int j = 0; j < 8; ++j) {
    const int v = static_cast<int8_t>(grid >> (8 * j));
    q[j] = static_cast<int8_t>((signs >> j) & 1 ? -v : v);
  }
}
static inline void fill2(float* sc, int g, float v) { sc[2 * g] = sc[2 * g + 1] = v; }

static inline void unpack_iq2_xxs(const BlockIQ2_XXS& b, int8_t* q, float* sc) {
  const auto& t = iq::tables();
  const float d = fp16_to_fp32(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    const uint32_t idx = b.qs[4 * ib] | static_cast<uint32_t>(b.qs[4 * ib + 1]) << 16;
    const uint32_t aux = b.qs[4 * ib + 2] | static_cast<uint32_t>(b.qs[4 * ib + 3]) << 16;
    fill2(sc, ib, d * (0.5f + static_cast<float>(aux >> 28)) * 0.25f);
    for (int l = 0; l < 4; ++l)
      put8(q + 32 * ib + 8 * l, t.iq2xxs[(idx >> (8 * l)) & 0xFF], t.ksigns[(aux >> (7 * l)) & 127]);
  }
}
static inline void unpack_iq2_xs(const BlockIQ2_XS& b, int8_t* q, float* sc) {
  const auto& t = iq::tables();
  const float d = fp16_to_fp32(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    sc[2 * ib] = d * (0.5f + static_cast<float>(b.scales[ib] & 0xF)) * 0.25f;
    sc[2 * ib + 1] = d * (0.5f + static_cast<float>(b.scales[ib] >> 4)) * 0.25f;
    for (int l = 0; l < 4; ++l) {
      const uint16_t v = b.qs[4 * ib + l];
      put8(q + 32 * ib + 8 * l, t.iq2xs[v & 511], t.ksigns[v >> 9]);
    }
  }
}
static inline void unpack_iq2_s(const BlockIQ2_S& b, int8_t* q, float* sc) {
  const auto& t = iq::tables();
  const float d = fp16_to_fp32(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    sc[2 * ib] = d * (0.5f + static_cast<float>(b.scales[ib] & 0xF)) * 0.25f;
    sc[2 * ib + 1] = d * (0.5f + static_cast<float>(b.scales[ib] >> 4)) * 0.25f;
    for (int l = 0; l < 4; ++l) {
      const int k = 4 * ib + l;
      put8(q + 8 * k, t.iq2s[b.qs[k] | ((b.qh[ib] >> (2 * l)) & 3) << 8], b.signs[k]);
    }
  }
}
static inline void unpack_iq3_xxs(const BlockIQ3_XXS& b, int8_t* q, float* sc) {
  const auto& t = iq::tables();
  const float d = fp16_to_fp32(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    uint32_t aux;
    std::memcpy(&aux, b.scales_signs + 4 * ib, 4);
    fill2(sc, ib, d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f);
    for (int l = 0; l < 4; ++l) {
      const uint64_t grid = t.iq3xxs[b.qs[8 * ib + 2 * l]] | static_cast<uint64_t>(t.iq3xxs[b.qs[8 * ib + 2 * l + 1]]) << 32;
      put8(q + 32 * ib + 8 * l, grid, t.ksigns[(aux >> (7 * l)) & 127]);
    }
  }
}
static inline void unpack_iq3_s(const BlockIQ3_S& b, int8_t* q, float* sc) {
  const auto& t = iq::tables();
  const float d = fp16_to_fp32(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    fill2(sc, ib, d * static_cast<float>(1 + 2 * ((b.scales[ib / 2] >> (4 * (ib % 2))) & 0xF)));
    for (int l = 0; l < 4; ++l) {
      const int k0 = 8 * ib + 2 * l;
      const uint32_t g0 = t.iq3s[b.qs[k0] | ((b.qh[ib] >> (2 * l)) & 1) << 8];
      const uint32_t g1 = t.iq3s[b.qs[k0 + 1] | ((b.qh[ib] >> (2 * l + 1)) & 1) << 8];
      put8(q + 32 * ib + 8 * l, g0 | static_cast<uint64_t>(g1) << 32, b.signs[4 * ib + l]);
    }
  }
}
// IQ1: value = dl * (grid + delta) with grid in {-1, 0, 1} and delta = +-1/8, stored here as
// (dl / 8) * (8 * grid + 8 * delta) so the codes are integers (the table holds 8 * grid).
static inline void put8_iq1(int8_t* q, uint64_t grid8, bool neg_delta) {
  for (int j = 0; j < 8; ++j) q[j] = static_cast<int8_t>(static_cast<int8_t>(grid8 >> (8 * j)) + (neg_delta ? -1 : 1));
}
static inline void unpack_iq1_s(const BlockIQ1_S& b, int8_t* q, float* sc) {
  const auto& t = iq::tables();
  const float d = fp16_to_fp32(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    const uint16_t h = b.qh[ib];
    fill2(sc, ib, d * static_cast<float>(2 * ((h >> 12) & 7) + 1) * 0.125f);
    for (int l = 0; l < 4; ++l)
      put8_iq1(q + 32 * ib + 8 * l, t.iq1s[b.qs[4 * ib + l] | ((h >> (3 * l)) & 7) << 8], h & 0x8000);
  }
}
static inline void unpack_iq1_m(const BlockIQ1_M& b, int8_t* q, float* sc) {
  const auto& t = iq::tables();
  const float d = fp16_to_fp32(iq1m_d_bits(b));
  for (int g = 0; g < 16; ++g)
    sc[g] = d * static_cast<float>(2 * ((b.scales[g / 4] >> (3 * (g % 4))) & 7) + 1) * 0.125f;
  for (int n = 0; n < 32; ++n) {
    const int nib = (b.qh[n / 2] >> (4 * (n % 2))) & 0xF;
    put8_iq1(q + 8 * n, t.iq1s[b.qs[n] | (nib & 7) << 8], nib & 8);
  }
}
static inline void unpack_iq4_xs(const BlockIQ4_XS& b, int8_t* q, float* sc) {
  const float d = fp16_to_fp32(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b.scales_h >> (2 * ib)) & 3) << 4);
    fill2(sc, ib, d * static_cast<float>(ls - 32));
    for (int j = 0; j < 16; ++j) {
      q[32 * ib + j] = kIq4nlValues[b.qs[16 * ib + j] & 0xF];
      q[32 * ib + 16 + j] = kIq4nlValues[b.qs[16 * ib + j] >> 4];
    }
  }
}
// TQ1_0 packs five base-3 digits per byte, read as a fixed-point fraction: digit k is the top
// bits of (byte * 3^k mod 256) * 3.
inline constexpr uint8_t kTq1Pow3[5] = {1, 3, 9, 27, 81};
static inline void unpack_tq1_0(const BlockTQ1_0& b, int8_t* q, float* sc) {
  auto digit = [](uint8_t byte, int k) {
    return static_cast<int8_t>(((static_cast<uint8_t>(byte * kTq1Pow3[k]) * 3) >> 8) - 1);
  };
  const float d = fp16_to_fp32(b.d);
  for (int g = 0; g < 16; ++g) sc[g] = d;
  for (int k = 0; k < 5; ++k)
    for (int j = 0; j < 32; ++j) q[32 * k + j] = digit(b.qs[j], k);
  for (int k = 0; k < 5; ++k)
    for (int j = 0; j < 16; ++j) q[160 + 16 * k + j] = digit(b.qs[32 + j], k);
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 4; ++j) q[240 + 4 * k + j] = digit(b.qh[j], k);
}
static inline void unpack_tq2_0(const BlockTQ2_0& b, int8_t* q, float* sc) {
  const float d = fp16_to_fp32(b.d);
  for (int g = 0; g < 16; ++g) sc[g] = d;
  for (int c = 0; c < 2; ++c)
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 32; ++j) q[128 * c + 32 * k + j] = static_cast<int8_t>(((b.qs[32 * c + j] >> (2 * k)) & 3) - 1);
}

template <typename Block, void (*Unpack)(const Block&, int8_t*, float*)>
static inline void deq_unpacked(const Block* b, float* y, int64_t nb) {
  int8_t q[256];
  float sc[16];
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    Unpack(b[i], q, sc);
    for (int j = 0; j < 256; ++j) y[j] = sc[j / 16] * static_cast<float>(q[j]);
  }
}

}  // namespace
}  // namespace strata
