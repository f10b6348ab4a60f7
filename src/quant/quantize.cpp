// Reference quantizers. Most produce valid blocks with round-to-nearest codes and a min/max scale
// choice. The K-quants (Q2_K to Q6_K) search their sub-block scales for the least weighted squared
// error (block_weights, times the column importance when an importance matrix is given); so do Q4_0,
// Q4_1, Q5_0, Q5_1, IQ4_NL and IQ4_XS in quantize_row_best (model quantization), while their
// quantize_row keeps the fast min/max rule for the KV cache. The round-trip tests bound their error.
#include <algorithm>
#include <cmath>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common.h"
#include "quant/fp16.h"
#include "quant/quant.h"
#include "quant/quantize_iq.h"

namespace strata {

namespace {

// Round half to even (the default rounding mode), inline: lrintf is a library call here.
inline int nearest_int(float v) {
#if defined(__SSE2__)
  return _mm_cvtss_si32(_mm_set_ss(v));
#else
  return static_cast<int>(std::lrintf(v));
#endif
}

// The value with the largest magnitude, sign kept.
float signed_absmax(const float* x, int n) {
  float amax = 0, max = 0;
  for (int j = 0; j < n; ++j)
    if (std::fabs(x[j]) > amax) { amax = std::fabs(x[j]); max = x[j]; }
  return max;
}

// Asymmetric sub-block (scale, min) with codes 0..nmax, used by Q2_K, Q4_K, Q5_K.
void subblock_scale_min(const float* x, int n, int nmax, float& scale, float& min) {
  float mn = std::min(0.f, *std::min_element(x, x + n));
  float mx = *std::max_element(x, x + n);
  scale = mx > mn ? (mx - mn) / nmax : 0.f;
  min = -mn;  // stored positive, subtracted on dequantize
}

// Error weights of an n-value block: sqrt(mean(x^2) + x^2), times the importance when given
// (weight_by_importance). (On the synthetic model's KL, the square root did better for these
// formats than the lattice search's mean(x^2) + x^2 and than equal weights.)
void block_weights(const float* x, const float* importance, float* w, int n = 256) {
  double sum2 = 0;
  for (int j = 0; j < n; ++j) sum2 += static_cast<double>(x[j]) * x[j];
  const float sigma2 = static_cast<float>(sum2 / n);
  for (int j = 0; j < n; ++j) w[j] = std::sqrt(sigma2 + x[j] * x[j]);
  if (importance) weight_by_importance(importance, n, w);
}

// Weighted least squares for x ~ scale * L - min (codes L in 0..nmax, min >= 0): inverse scales
// around nmax / (max - min) are tried, the codes rounded at each, (scale, min) refitted to them,
// and the fit with the least weighted squared error kept (the min/max rule is the first candidate).
// signed_min: min may take either sign (Q4_1, Q5_1 store the offset as a float; the K-quants'
// 6-bit mins cannot be negative).
void fit_scale_min(const float* x, const float* w, int n, int nmax, float& scale, float& min, bool signed_min = false) {
  if (signed_min) {
    const float mn = *std::min_element(x, x + n), mx = *std::max_element(x, x + n);
    scale = (mx - mn) / nmax, min = -mn;
  } else {
    subblock_scale_min(x, n, nmax, scale, min);
  }
  const float lo = -min, range = scale * nmax;
  if (range <= 0) return;
  auto error = [&](float a, float m) {
    double e = 0;
    const float ia = 1 / a;
    for (int j = 0; j < n; ++j) {
      const int q = std::clamp(nearest_int((x[j] + m) * ia), 0, nmax);
      const double r = a * q - m - x[j];
      e += w[j] * r * r;
    }
    return e;
  };
  double best = error(scale, min);
  for (int k = -4; k <= 4; ++k) {
    const float iscale = (static_cast<float>(nmax) + 0.25f * static_cast<float>(k)) / range;
    double sw = 0, sl = 0, sll = 0, sx = 0, slx = 0;
    for (int j = 0; j < n; ++j) {
      const int q = std::clamp(nearest_int((x[j] - lo) * iscale), 0, nmax);
      sw += w[j], sl += w[j] * q, sll += w[j] * q * q, sx += w[j] * x[j], slx += w[j] * q * x[j];
    }
    const double det = sw * sll - sl * sl;
    if (det <= 0) continue;
    double a = (sw * slx - sl * sx) / det, off = (sll * sx - sl * slx) / det;  // x ~ a * q + off
    if (off > 0 && !signed_min) off = 0, a = sll > 0 ? slx / sll : 0;  // the stored min cannot be negative
    if (!(a > 0)) continue;
    const double e = error(static_cast<float>(a), static_cast<float>(-off));
    if (e < best) best = e, scale = static_cast<float>(a), min = static_cast<float>(-off);
  }
}

// The same for symmetric codes -nmax-1..nmax (x ~ scale * L), starting from the signed absmax rule.
float fit_scale_sym(const float* x, const float* w, int n, int nmax) {
  const float max = signed_absmax(x, n);
  if (max == 0) return 0;
  const float base = max / -(nmax + 1);
  auto error = [&](float a) {
    double e = 0;
    const float ia = 1 / a;
    for (int j = 0; j < n; ++j) {
      const int q = std::clamp(nearest_int(x[j] * ia), -nmax - 1, nmax);
      const double r = a * q - x[j];
      e += w[j] * r * r;
    }
    return e;
  };
  float scale = base;
  double best = error(base);
  for (int k = -4; k <= 4; ++k) {
    const float iscale = -(static_cast<float>(nmax + 1) + 0.25f * static_cast<float>(k)) / max;
    double slx = 0, sll = 0;
    for (int j = 0; j < n; ++j) {
      const int q = std::clamp(nearest_int(x[j] * iscale), -nmax - 1, nmax);
      slx += w[j] * q * x[j], sll += w[j] * q * q;
    }
    if (sll <= 0) continue;
    const float a = static_cast<float>(slx / sll);
    if (a == 0) continue;
    const double e = error(a);
    if (e < best) best = e, scale = a;
  }
  return scale;
}

// The same for the IQ4_NL levels (x ~ scale * level[L]): scales putting the largest magnitude near
// the outer levels are tried, each element takes its nearest level, the scale is refitted.
int iq4nl_index(float v) {
  int best = 0;
  for (int k = 1; k < 16; ++k)
    if (std::fabs(v - kIq4nlValues[k]) < std::fabs(v - kIq4nlValues[best])) best = k;
  return best;
}
float fit_scale_levels(const float* x, const float* w, int n) {
  const float max = signed_absmax(x, n);
  if (max == 0) return 0;
  auto error = [&](float a, double& e) {
    e = 0;
    double sv = 0, svv = 0;
    const float ia = 1 / a;
    for (int j = 0; j < n; ++j) {
      const float v = kIq4nlValues[iq4nl_index(x[j] * ia)];
      const double r = a * v - x[j];
      e += w[j] * r * r, sv += w[j] * v * x[j], svv += w[j] * v * v;
    }
    return svv > 0 ? static_cast<float>(sv / svv) : a;  // the least-squares scale for these levels
  };
  float scale = max / kIq4nlValues[0];
  double best;
  error(scale, best);
  for (int k = -8; k <= 8; ++k) {
    const float a0 = max / (static_cast<float>(kIq4nlValues[0]) + static_cast<float>(k));
    double e0, e1;
    const float a1 = error(a0, e0);
    if (a1 == 0) continue;
    error(a1, e1);
    if (e0 < best) best = e0, scale = a0;
    if (e1 < best) best = e1, scale = a1;
  }
  return scale;
}

void q_q8_0(const float* x, BlockQ8_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    // id = 127/amax rather than 1/d, and ties to even: the values ggml's activation quantizer gives.
    float d = amax / 127.f, id = amax != 0.f ? 127.f / amax : 0.f;
    b[i].d = fp32_to_fp16(d);
    for (int j = 0; j < 32; ++j) b[i].qs[j] = static_cast<int8_t>(nearest_int(x[j] * id));
  }
}
// search: the weighted scale search (model quantization); without it the min/max rule, which the
// q4_0 KV cache and the activation paths keep for speed. The same split for Q5_0, IQ4_NL, IQ4_XS.
void q_q4_0(const float* x, BlockQ4_0* b, int64_t nb, bool search, const float* importance) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float w[32];
    if (search) block_weights(x, importance ? importance + 32 * i : nullptr, w, 32);
    const float d = search ? fit_scale_sym(x, w, 32, 7) : signed_absmax(x, 32) / -8, id = d ? 1.f / d : 0.f;
    b[i].d = fp32_to_fp16(d);
    for (int j = 0; j < 16; ++j) {
      int a = std::min(15, std::max(0, static_cast<int>(x[j] * id + 8.5f)));
      int c = std::min(15, std::max(0, static_cast<int>(x[j + 16] * id + 8.5f)));
      b[i].qs[j] = static_cast<uint8_t>(a | (c << 4));
    }
  }
}
// Q4_1, Q5_1: value = d * code + m. search: the weighted fit of (d, m) (fit_scale_min with a
// signed offset), the codes rounded at the stored half-precision d and m; else the min/max rule.
template <typename Block, int kNmax>
void q_offset_block(const float* x, Block& b, bool search, const float* importance, int* codes) {
  float d, m;
  if (search) {
    float w[32], negm;
    block_weights(x, importance, w, 32);
    fit_scale_min(x, w, 32, kNmax, d, negm, true);
    b.d = fp32_to_fp16(d);
    b.m = fp32_to_fp16(-negm);
    d = fp16_to_fp32(b.d), m = fp16_to_fp32(b.m);
    const float id = d ? 1.f / d : 0.f;
    for (int j = 0; j < 32; ++j) codes[j] = std::clamp(nearest_int((x[j] - m) * id), 0, kNmax);
    return;
  }
  m = *std::min_element(x, x + 32);
  const float mx = *std::max_element(x, x + 32);
  d = (mx - m) / kNmax;
  const float id = d ? 1.f / d : 0.f;
  b.d = fp32_to_fp16(d);
  b.m = fp32_to_fp16(m);
  for (int j = 0; j < 32; ++j) codes[j] = std::min(kNmax, static_cast<int>((x[j] - m) * id + 0.5f));
}
void q_q4_1(const float* x, BlockQ4_1* b, int64_t nb, bool search, const float* importance) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    int q[32];
    q_offset_block<BlockQ4_1, 15>(x, b[i], search, importance ? importance + 32 * i : nullptr, q);
    for (int j = 0; j < 16; ++j) b[i].qs[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
  }
}
void q_q5_0(const float* x, BlockQ5_0* b, int64_t nb, bool search, const float* importance) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float w[32];
    if (search) block_weights(x, importance ? importance + 32 * i : nullptr, w, 32);
    const float d = search ? fit_scale_sym(x, w, 32, 15) : signed_absmax(x, 32) / -16, id = d ? 1.f / d : 0.f;
    b[i].d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      int a = std::min(31, std::max(0, static_cast<int>(x[j] * id + 16.5f)));
      int c = std::min(31, std::max(0, static_cast<int>(x[j + 16] * id + 16.5f)));
      b[i].qs[j] = static_cast<uint8_t>((a & 0xF) | ((c & 0xF) << 4));
      qh |= static_cast<uint32_t>((a & 0x10) >> 4) << j;
      qh |= static_cast<uint32_t>((c & 0x10) >> 4) << (j + 16);
    }
    std::memcpy(b[i].qh, &qh, 4);
  }
}
void q_q5_1(const float* x, BlockQ5_1* b, int64_t nb, bool search, const float* importance) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    int q[32];
    q_offset_block<BlockQ5_1, 31>(x, b[i], search, importance ? importance + 32 * i : nullptr, q);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      b[i].qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
      qh |= static_cast<uint32_t>((q[j] & 0x10) >> 4) << j;
      qh |= static_cast<uint32_t>((q[j + 16] & 0x10) >> 4) << (j + 16);
    }
    std::memcpy(b[i].qh, &qh, 4);
  }
}
void q_iq4_nl(const float* x, BlockIQ4_NL* b, int64_t nb, bool search, const float* importance) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float w[32];
    if (search) block_weights(x, importance ? importance + 32 * i : nullptr, w, 32);
    const float d = search ? fit_scale_levels(x, w, 32) : signed_absmax(x, 32) / kIq4nlValues[0], id = d ? 1.f / d : 0.f;
    b[i].d = fp32_to_fp16(d);
    for (int j = 0; j < 16; ++j)
      b[i].qs[j] = static_cast<uint8_t>(iq4nl_index(x[j] * id) | (iq4nl_index(x[j + 16] * id) << 4));
  }
}
void q_q8_k(const float* x, BlockQ8_K* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    float max = signed_absmax(x, 256);
    if (max == 0) {
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    float iscale = -127.f / max;
    for (int j = 0; j < 256; ++j) b[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += b[i].qs[g * 16 + j];
      b[i].bsums[g] = static_cast<int16_t>(s);
    }
    b[i].d = 1 / iscale;
  }
}

void q_q2_k(const float* x, BlockQ2_K* b, int64_t nb, const float* importance) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    float sc[16], mn[16], max_sc = 0, max_mn = 0, w[256];
    block_weights(x, importance ? importance + 256 * i : nullptr, w);
    for (int s = 0; s < 16; ++s) {
      fit_scale_min(x + 16 * s, w + 16 * s, 16, 3, sc[s], mn[s]);
      max_sc = std::max(max_sc, sc[s]);
      max_mn = std::max(max_mn, mn[s]);
    }
    float d = max_sc / 15, dmin = max_mn / 15;
    b[i].d = fp32_to_fp16(d);
    b[i].dmin = fp32_to_fp16(dmin);
    float dq = fp16_to_fp32(b[i].d), dmq = fp16_to_fp32(b[i].dmin);
    uint8_t L[256];
    for (int s = 0; s < 16; ++s) {
      int ls = dq ? std::min(15, nearest_int(sc[s] / dq)) : 0;
      int lm = dmq ? std::min(15, nearest_int(mn[s] / dmq)) : 0;
      b[i].scales[s] = static_cast<uint8_t>(ls | (lm << 4));
      float dl = dq * ls, ml = dmq * lm;
      for (int j = 0; j < 16; ++j) {
        int q = dl ? nearest_int((x[16 * s + j] + ml) / dl) : 0;
        L[16 * s + j] = static_cast<uint8_t>(std::clamp(q, 0, 3));
      }
    }
    for (int n = 0; n < 256; n += 128)
      for (int l = 0; l < 32; ++l)
        b[i].qs[n / 4 + l] = static_cast<uint8_t>(L[n + l] | (L[n + l + 32] << 2) | (L[n + l + 64] << 4) | (L[n + l + 96] << 6));
  }
}

void q_q3_k(const float* x, BlockQ3_K* b, int64_t nb, const float* importance) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    float sc[16], max_sc = 0, amax_sc = 0, w[256];
    block_weights(x, importance ? importance + 256 * i : nullptr, w);
    for (int s = 0; s < 16; ++s) {
      sc[s] = fit_scale_sym(x + 16 * s, w + 16 * s, 16, 3);  // codes -4..3
      if (std::fabs(sc[s]) > amax_sc) { amax_sc = std::fabs(sc[s]); max_sc = sc[s]; }
    }
    std::memset(b[i].hmask, 0, 32);
    float iscale = max_sc ? -32.f / max_sc : 0.f;
    uint8_t u[16];
    for (int s = 0; s < 16; ++s) u[s] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * sc[s]), -32, 31) + 32);
    float d = iscale ? 1.f / iscale : 0.f;
    b[i].d = fp32_to_fp16(d);
    for (int k = 0; k < 8; ++k) b[i].scales[k] = static_cast<uint8_t>((u[k] & 0xF) | ((u[k + 8] & 0xF) << 4));
    for (int k = 0; k < 4; ++k)
      b[i].scales[8 + k] = static_cast<uint8_t>((u[k] >> 4) | ((u[k + 4] >> 4) << 2) | ((u[k + 8] >> 4) << 4) | ((u[k + 12] >> 4) << 6));
    float dq = fp16_to_fp32(b[i].d);
    uint8_t L[256];
    for (int s = 0; s < 16; ++s) {
      float dl = dq * (static_cast<int>(u[s]) - 32);
      for (int j = 0; j < 16; ++j) {
        int q = dl ? nearest_int(x[16 * s + j] / dl) : 0;
        L[16 * s + j] = static_cast<uint8_t>(std::clamp(q, -4, 3) + 4);
      }
    }
    for (int n = 0; n < 256; n += 128)
      for (int l = 0; l < 32; ++l) {
        b[i].qs[n / 4 + l] = static_cast<uint8_t>((L[n + l] & 3) | ((L[n + l + 32] & 3) << 2) |
                                                  ((L[n + l + 64] & 3) << 4) | ((L[n + l + 96] & 3) << 6));
        for (int j = 0; j < 4; ++j)
          if (L[n + 32 * j + l] > 3) b[i].hmask[l] |= static_cast<uint8_t>(1 << (4 * (n / 128) + j));
      }
  }
}

// Packs 8 (scale, min) 6-bit pairs the way get_scale_min_k4 reads them.
void pack_k4_scales(const uint8_t ls[8], const uint8_t lm[8], uint8_t out[12]) {
  std::memset(out, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      out[j] |= ls[j] & 63;
      out[j + 4] |= lm[j] & 63;
    } else {
      out[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      out[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      out[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

template <typename Block, int kMax>
void q_q45_k(const float* x, Block* b, int64_t nb, const float* importance) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    float sc[8], mn[8], max_sc = 0, max_mn = 0, w[256];
    block_weights(x, importance ? importance + 256 * i : nullptr, w);
    for (int s = 0; s < 8; ++s) {
      fit_scale_min(x + 32 * s, w + 32 * s, 32, kMax, sc[s], mn[s]);
      max_sc = std::max(max_sc, sc[s]);
      max_mn = std::max(max_mn, mn[s]);
    }
    b[i].d = fp32_to_fp16(max_sc / 63);
    b[i].dmin = fp32_to_fp16(max_mn / 63);
    float dq = fp16_to_fp32(b[i].d), dmq = fp16_to_fp32(b[i].dmin);
    uint8_t ls[8], lm[8], L[256];
    for (int s = 0; s < 8; ++s) {
      ls[s] = static_cast<uint8_t>(dq ? std::min(63, nearest_int(sc[s] / dq)) : 0);
      lm[s] = static_cast<uint8_t>(dmq ? std::min(63, nearest_int(mn[s] / dmq)) : 0);
      float dl = dq * ls[s], ml = dmq * lm[s];
      for (int j = 0; j < 32; ++j) {
        int q = dl ? nearest_int((x[32 * s + j] + ml) / dl) : 0;
        L[32 * s + j] = static_cast<uint8_t>(std::clamp(q, 0, kMax));
      }
    }
    pack_k4_scales(ls, lm, b[i].scales);
    if constexpr (kMax == 31) std::memset(b[i].qh, 0, 32);
    for (int j = 0; j < 4; ++j)  // 64 elements per step: low nibble first 32, high nibble next 32
      for (int l = 0; l < 32; ++l) {
        uint8_t lo = L[64 * j + l], hi = L[64 * j + 32 + l];
        b[i].qs[32 * j + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
        if constexpr (kMax == 31) {
          if (lo & 16) b[i].qh[l] |= static_cast<uint8_t>(1 << (2 * j));
          if (hi & 16) b[i].qh[l] |= static_cast<uint8_t>(2 << (2 * j));
        }
      }
  }
}

void q_q6_k(const float* x, BlockQ6_K* b, int64_t nb, const float* importance) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    float sc[16], max_sc = 0, amax_sc = 0, w[256];
    block_weights(x, importance ? importance + 256 * i : nullptr, w);
    for (int s = 0; s < 16; ++s) {
      sc[s] = fit_scale_sym(x + 16 * s, w + 16 * s, 16, 31);
      if (std::fabs(sc[s]) > amax_sc) { amax_sc = std::fabs(sc[s]); max_sc = sc[s]; }
    }
    float iscale = max_sc ? -128.f / max_sc : 0.f;
    b[i].d = fp32_to_fp16(iscale ? 1.f / iscale : 0.f);
    float dq = fp16_to_fp32(b[i].d);
    uint8_t L[256];
    for (int s = 0; s < 16; ++s) {
      b[i].scales[s] = static_cast<int8_t>(std::min(127, nearest_int(iscale * sc[s])));
      float dl = dq * b[i].scales[s];
      for (int j = 0; j < 16; ++j) {
        int q = dl ? nearest_int(x[16 * s + j] / dl) : 0;
        L[16 * s + j] = static_cast<uint8_t>(std::clamp(q, -32, 31) + 32);
      }
    }
    for (int n = 0; n < 256; n += 128)
      for (int l = 0; l < 32; ++l) {
        const uint8_t* Ln = L + n;
        b[i].ql[n / 2 + l] = static_cast<uint8_t>((Ln[l] & 0xF) | ((Ln[l + 64] & 0xF) << 4));
        b[i].ql[n / 2 + l + 32] = static_cast<uint8_t>((Ln[l + 32] & 0xF) | ((Ln[l + 96] & 0xF) << 4));
        b[i].qh[n / 4 + l] = static_cast<uint8_t>((Ln[l] >> 4) | ((Ln[l + 32] >> 4) << 2) | ((Ln[l + 64] >> 4) << 4) |
                                                  ((Ln[l + 96] >> 4) << 6));
      }
  }
}


// IQ4_XS: IQ4_NL's levels with one fp16 scale per 256 values and a signed 6-bit scale per 32.
void q_iq4_xs(const float* x, BlockIQ4_XS* b, int64_t nb, bool search, const float* importance) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    float sub[8], amax = 0, max_scale = 0, w[256];
    if (search) block_weights(x, importance ? importance + 256 * i : nullptr, w);
    for (int ib = 0; ib < 8; ++ib) {
      sub[ib] = search ? fit_scale_levels(x + 32 * ib, w + 32 * ib, 32) : signed_absmax(x + 32 * ib, 32) / kIq4nlValues[0];
      if (std::fabs(sub[ib]) > amax) amax = std::fabs(sub[ib]), max_scale = sub[ib];
    }
    std::memset(&b[i], 0, sizeof(BlockIQ4_XS));
    if (amax == 0) continue;
    const float d = -max_scale / 32, id = 1 / d;
    b[i].d = fp32_to_fp16(d);
    const float dq = fp16_to_fp32(b[i].d);
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = std::clamp(nearest_int(id * sub[ib]), -32, 31);
      b[i].scales_l[ib / 2] |= static_cast<uint8_t>(((ls + 32) & 0xF) << (4 * (ib % 2)));
      b[i].scales_h |= static_cast<uint16_t>(((ls + 32) >> 4) << (2 * ib));
      const float dl = dq * static_cast<float>(ls), idl = dl ? 1 / dl : 0.f;
      for (int j = 0; j < 16; ++j)
        b[i].qs[16 * ib + j] = static_cast<uint8_t>(iq4nl_index(x[32 * ib + j] * idl) | (iq4nl_index(x[32 * ib + 16 + j] * idl) << 4));
    }
  }
}
// Ternary: round(x / absmax) in {-1, 0, 1}, stored as 0..2.
void ternary_codes(const float* x, uint8_t* q, float& d) {
  d = 0;
  for (int j = 0; j < 256; ++j) d = std::max(d, std::fabs(x[j]));
  const float id = d ? 1 / d : 0.f;
  for (int j = 0; j < 256; ++j) q[j] = static_cast<uint8_t>(static_cast<int>(std::round(x[j] * id)) + 1);
}
void q_tq2_0(const float* x, BlockTQ2_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    uint8_t q[256];
    float d;
    ternary_codes(x, q, d);
    for (int c = 0; c < 2; ++c)
      for (int j = 0; j < 32; ++j) {
        uint8_t v = 0;
        for (int k = 0; k < 4; ++k) v |= static_cast<uint8_t>(q[128 * c + 32 * k + j] << (2 * k));
        b[i].qs[32 * c + j] = v;
      }
    b[i].d = fp32_to_fp16(d);
  }
}
// TQ1_0: five base-3 digits per byte (four in the last 4 bytes), first digit most significant,
// stored as the fraction ceil(value * 256 / 243) so a digit is read back with one multiply.
void q_tq1_0(const float* x, BlockTQ1_0* b, int64_t nb) {
  static constexpr int w[5] = {81, 27, 9, 3, 1};
  auto pack = [](int v) { return static_cast<uint8_t>((v * 256 + 242) / 243); };
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    uint8_t q[256];
    float d;
    ternary_codes(x, q, d);
    for (int j = 0; j < 32; ++j) {
      int v = 0;
      for (int k = 0; k < 5; ++k) v += q[32 * k + j] * w[k];
      b[i].qs[j] = pack(v);
    }
    for (int j = 0; j < 16; ++j) {
      int v = 0;
      for (int k = 0; k < 5; ++k) v += q[160 + 16 * k + j] * w[k];
      b[i].qs[32 + j] = pack(v);
    }
    for (int j = 0; j < 4; ++j) {
      int v = 0;
      for (int k = 0; k < 4; ++k) v += q[240 + 4 * k + j] * w[k];
      b[i].qh[j] = pack(v);
    }
    b[i].d = fp32_to_fp16(d);
  }
}
}  // namespace

bool can_quantize(GgmlType t) {
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16: case GgmlType::Q4_0: case GgmlType::Q4_1:
    case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q8_0: case GgmlType::IQ4_NL: case GgmlType::Q2_K:
    case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K: case GgmlType::Q8_K:
    case GgmlType::IQ4_XS: case GgmlType::TQ1_0: case GgmlType::TQ2_0:
      return true;
    default: return is_lattice_iquant(t);
  }
}

void quantize_row(GgmlType type, const float* x, void* dst, int64_t n) {
  const auto& ti = type_info(type);
  if (!can_quantize(type) || n % ti.block_size != 0)
    throw Error("cannot quantize a row of " + std::to_string(n) + " to " + type_name(type));
  int64_t nb = n / ti.block_size;
  switch (type) {
    case GgmlType::F32: std::memcpy(dst, x, n * 4); break;
    case GgmlType::F16: for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = fp32_to_fp16(x[i]); break;
    case GgmlType::BF16: for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = fp32_to_bf16(x[i]); break;
    case GgmlType::Q4_0: q_q4_0(x, static_cast<BlockQ4_0*>(dst), nb, false, nullptr); break;
    case GgmlType::Q4_1: q_q4_1(x, static_cast<BlockQ4_1*>(dst), nb, false, nullptr); break;
    case GgmlType::Q5_0: q_q5_0(x, static_cast<BlockQ5_0*>(dst), nb, false, nullptr); break;
    case GgmlType::Q5_1: q_q5_1(x, static_cast<BlockQ5_1*>(dst), nb, false, nullptr); break;
    case GgmlType::Q8_0: q_q8_0(x, static_cast<BlockQ8_0*>(dst), nb); break;
    case GgmlType::IQ4_NL: q_iq4_nl(x, static_cast<BlockIQ4_NL*>(dst), nb, false, nullptr); break;
    case GgmlType::Q2_K: q_q2_k(x, static_cast<BlockQ2_K*>(dst), nb, nullptr); break;
    case GgmlType::Q3_K: q_q3_k(x, static_cast<BlockQ3_K*>(dst), nb, nullptr); break;
    case GgmlType::Q4_K: q_q45_k<BlockQ4_K, 15>(x, static_cast<BlockQ4_K*>(dst), nb, nullptr); break;
    case GgmlType::Q5_K: q_q45_k<BlockQ5_K, 31>(x, static_cast<BlockQ5_K*>(dst), nb, nullptr); break;
    case GgmlType::Q6_K: q_q6_k(x, static_cast<BlockQ6_K*>(dst), nb, nullptr); break;
    case GgmlType::Q8_K: q_q8_k(x, static_cast<BlockQ8_K*>(dst), nb); break;
    case GgmlType::IQ4_XS: q_iq4_xs(x, static_cast<BlockIQ4_XS*>(dst), nb, false, nullptr); break;
    case GgmlType::TQ1_0: q_tq1_0(x, static_cast<BlockTQ1_0*>(dst), nb); break;
    case GgmlType::TQ2_0: q_tq2_0(x, static_cast<BlockTQ2_0*>(dst), nb); break;
    default: quantize_lattice(type, x, dst, nb); break;
  }
}

void weight_by_importance(const float* importance, int n, float* w) {
  double mean = 0;
  for (int j = 0; j < n; ++j) mean += importance[j];
  mean /= n;
  if (mean > 0 && std::isfinite(mean))
    for (int j = 0; j < n; ++j) w[j] *= static_cast<float>(std::max(0.0, importance[j] / mean) + 0.01);
}

// Formats whose quantize_row keeps the min/max rule (see q_q4_0) while quantize_row_best searches.
bool is_fast_rule_format(GgmlType type) {
  return type == GgmlType::Q4_0 || type == GgmlType::Q4_1 || type == GgmlType::Q5_0 || type == GgmlType::Q5_1 ||
         type == GgmlType::IQ4_NL || type == GgmlType::IQ4_XS;
}

bool uses_importance(GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS:
      return true;
    default: return is_lattice_iquant(type);
  }
}

void quantize_row_best(GgmlType type, const float* x, void* dst, int64_t n, const float* importance) {
  if (!uses_importance(type) || (!importance && !is_fast_rule_format(type))) return quantize_row(type, x, dst, n);
  if (n % type_info(type).block_size != 0)
    throw Error("cannot quantize a row of " + std::to_string(n) + " to " + type_name(type));
  const int64_t nb = n / type_info(type).block_size;
  switch (type) {
    case GgmlType::Q4_0: q_q4_0(x, static_cast<BlockQ4_0*>(dst), nb, true, importance); break;
    case GgmlType::Q4_1: q_q4_1(x, static_cast<BlockQ4_1*>(dst), nb, true, importance); break;
    case GgmlType::Q5_0: q_q5_0(x, static_cast<BlockQ5_0*>(dst), nb, true, importance); break;
    case GgmlType::Q5_1: q_q5_1(x, static_cast<BlockQ5_1*>(dst), nb, true, importance); break;
    case GgmlType::IQ4_NL: q_iq4_nl(x, static_cast<BlockIQ4_NL*>(dst), nb, true, importance); break;
    case GgmlType::IQ4_XS: q_iq4_xs(x, static_cast<BlockIQ4_XS*>(dst), nb, true, importance); break;
    case GgmlType::Q2_K: q_q2_k(x, static_cast<BlockQ2_K*>(dst), nb, importance); break;
    case GgmlType::Q3_K: q_q3_k(x, static_cast<BlockQ3_K*>(dst), nb, importance); break;
    case GgmlType::Q4_K: q_q45_k<BlockQ4_K, 15>(x, static_cast<BlockQ4_K*>(dst), nb, importance); break;
    case GgmlType::Q5_K: q_q45_k<BlockQ5_K, 31>(x, static_cast<BlockQ5_K*>(dst), nb, importance); break;
    case GgmlType::Q6_K: q_q6_k(x, static_cast<BlockQ6_K*>(dst), nb, importance); break;
    default: quantize_lattice(type, x, dst, nb, importance); break;
  }
}

}  // namespace strata
