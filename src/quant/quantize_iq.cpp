// Quantizers of the lattice i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M).
//
// These formats store each group of 4 or 8 values as an index into a fixed grid: a subset of the
// points whose coordinates take one of 3 (IQ1, IQ2) or 8 (IQ3) levels. Encoding is a search:
//  1. Signs come first (IQ1's grid is signed and skips this). Where only 7 sign bits are stored
//     the count of minus signs in 8 values must be even; if it is odd, the value whose flip costs
//     least (smallest weighted square) is represented with the wrong sign.
//  2. For each scale sub-block, candidate scales around max|x| / top level are tried. At a scale,
//     each group is rounded coordinate-wise to the nearest lattice point and the best grid entry is
//     taken among the K grid entries nearest that point (precomputed per lattice point). The
//     least-squares scale for the chosen entries is computed and the search repeated from it.
//  3. The fp16 block scale is set so the largest sub-block scale gets the top scale code; each
//     sub-block then tries the nearest codes and keeps the one with the least error after
//     re-choosing its entries at that exact (quantized) scale.
// Errors are weighted by w = mean(x^2) + x^2, favouring the large weights that dominate a
// matrix-vector product without ignoring the small ones. With an importance matrix (the mean
// square of each input column's activations over calibration text, `strata imatrix`), w is also
// multiplied by the column's importance relative to the block's mean, plus a 1 % floor, so
// columns the activations never reach still count a little.
#include "quant/quantize_iq.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "quant/fp16.h"
#include "quant/iq_tables.h"
#include "quant/quant.h"

namespace strata {

namespace {

constexpr int kCandidates = 8;

// A grid with, for every lattice point, its nearest grid entries.
struct Lattice {
  int group = 0;              // values per grid entry: 8 or 4
  int nlev = 0;               // levels per coordinate
  float level[8] = {};        // value of each level, ascending
  float mid[7] = {};          // midpoints between neighbouring levels
  int n_entries = 0;
  std::vector<float> value;   // n_entries * group
  std::vector<uint16_t> near; // for each lattice point, kCandidates entries, nearest first

  Lattice(const uint16_t* packed, int n, int group_, int shift, const std::vector<int>& levels)
      : group(group_), nlev(static_cast<int>(levels.size())), n_entries(n) {
    for (int l = 0; l < nlev; ++l) level[l] = static_cast<float>(levels[l]);
    for (int l = 0; l + 1 < nlev; ++l) mid[l] = 0.5f * (level[l] + level[l + 1]);
    value.resize(static_cast<size_t>(n) * group);
    const int mask = (1 << shift) - 1;
    for (int e = 0; e < n; ++e)
      for (int j = 0; j < group; ++j) value[e * group + j] = level[(packed[e] >> (j * shift)) & mask];
    int points = 1;
    for (int j = 0; j < group; ++j) points *= nlev;
    near.resize(static_cast<size_t>(points) * kCandidates);
    std::vector<std::pair<float, int>> dist(n);
    for (int p = 0; p < points; ++p) {
      float coord[8];
      for (int j = 0, r = p; j < group; ++j, r /= nlev) coord[j] = level[r % nlev];
      for (int e = 0; e < n; ++e) {
        float s = 0;
        for (int j = 0; j < group; ++j) s += (coord[j] - value[e * group + j]) * (coord[j] - value[e * group + j]);
        dist[e] = {s, e};
      }
      std::partial_sort(dist.begin(), dist.begin() + kCandidates, dist.end());
      for (int k = 0; k < kCandidates; ++k) near[static_cast<size_t>(p) * kCandidates + k] = static_cast<uint16_t>(dist[k].second);
    }
  }

  // The level nearest u: how many midpoints between neighbouring levels lie below it.
  int nearest_level(float u) const {
    int l = 0;
    for (int m = 0; m + 1 < nlev; ++m) l += u > mid[m];
    return l;
  }
  const float* entry(int e) const { return value.data() + static_cast<size_t>(e) * group; }

  // Best entry for targets t (weights w) at values scale * (entry + delta); returns it and sets
  // the weighted squared error.
  int best(const float* t, const float* w, float scale, float delta, float& err) const {
    int p = 0;
    const float inv = scale != 0.f ? 1.f / scale : 0.f;
    for (int j = group - 1; j >= 0; --j) p = p * nlev + nearest_level(t[j] * inv - delta);
    const uint16_t* cand = near.data() + static_cast<size_t>(p) * kCandidates;
    int best_e = cand[0];
    err = INFINITY;
    for (int k = 0; k < kCandidates; ++k) {
      const float* v = entry(cand[k]);
      float e = 0;
      for (int j = 0; j < group; ++j) {
        const float r = t[j] - scale * (v[j] + delta);
        e += w[j] * r * r;
      }
      if (e < err) err = e, best_e = cand[k];
    }
    return best_e;
  }
};

template <size_t N>
std::vector<int> levels(const int8_t (&l)[N]) {
  return {l, l + N};
}

const Lattice& lattice(GgmlType t) {
  switch (t) {
    case GgmlType::IQ2_XXS: { static const Lattice l(iq::kIq2xxsGridPacked, 256, 8, 2, levels(iq::kIq2Levels)); return l; }
    case GgmlType::IQ2_XS: { static const Lattice l(iq::kIq2xsGridPacked, 512, 8, 2, levels(iq::kIq2Levels)); return l; }
    case GgmlType::IQ2_S: { static const Lattice l(iq::kIq2sGridPacked, 1024, 8, 2, levels(iq::kIq2Levels)); return l; }
    case GgmlType::IQ3_XXS: { static const Lattice l(iq::kIq3xxsGridPacked, 256, 4, 4, levels(iq::kIq3xxsLevels)); return l; }
    case GgmlType::IQ3_S: { static const Lattice l(iq::kIq3sGridPacked, 512, 4, 4, levels(iq::kIq3sLevels)); return l; }
    default: { static const Lattice l(iq::kIq1sGridPacked, 2048, 8, 2, {-1, 0, 1}); return l; }
  }
}

enum class Signs { Parity, Free, InGrid };  // 7 stored bits per 8 values, 8 bits, or none (IQ1)
enum class Delta { None, PerSubBlock, PerGroup };  // IQ1's +-1/8 offset

// How a format spends its bits around the grid.
struct Spec {
  const Lattice* lat;
  int sub;         // values per scale code
  int ls_max;      // largest scale code
  float ma, mb;    // sub-block scale = d * ma * (code + mb)
  Signs signs;
  Delta delta;
};
Spec spec_of(GgmlType t) {
  const Lattice* l = &lattice(t);
  switch (t) {
    case GgmlType::IQ2_XXS: return {l, 32, 15, 0.25f, 0.5f, Signs::Parity, Delta::None};
    case GgmlType::IQ2_XS: return {l, 16, 15, 0.25f, 0.5f, Signs::Parity, Delta::None};
    case GgmlType::IQ2_S: return {l, 16, 15, 0.25f, 0.5f, Signs::Free, Delta::None};
    case GgmlType::IQ3_XXS: return {l, 32, 15, 0.5f, 0.5f, Signs::Parity, Delta::None};
    case GgmlType::IQ3_S: return {l, 32, 15, 2.f, 0.5f, Signs::Free, Delta::None};
    case GgmlType::IQ1_S: return {l, 32, 7, 2.f, 0.5f, Signs::InGrid, Delta::PerSubBlock};
    default: return {l, 16, 7, 2.f, 0.5f, Signs::InGrid, Delta::PerGroup};  // IQ1_M
  }
}
constexpr float kIq1Delta = 0.125f;

// The codes of one 256-value block.
struct BlockFit {
  uint16_t d = 0;
  uint8_t ls[16] = {};
  uint16_t idx[64] = {};   // one per grid group
  uint8_t sign[32] = {};   // one byte per 8 values, bit j set = value j negative
  bool neg_delta[32] = {}; // IQ1: per group of 8
};

struct SubChoice {
  float err = INFINITY;
  uint16_t idx[8] = {};
  bool neg_delta[4] = {};
};

// Entries for a sub-block of n targets at a fixed scale; accumulates the least-squares sums.
float choose_at(const Spec& s, const float* t, const float* w, int n, float scale, bool sub_neg_delta,
                SubChoice& c, double* num, double* den) {
  const Lattice& L = *s.lat;
  const int G = L.group;
  float total = 0;
  if (num) *num = 0, *den = 0;
  for (int g = 0; g < n / G; ++g) {
    float err;
    int e;
    bool neg = sub_neg_delta;
    if (s.delta == Delta::PerGroup) {
      float err_neg;
      const int e_pos = L.best(t + g * G, w + g * G, scale, kIq1Delta, err);
      const int e_neg = L.best(t + g * G, w + g * G, scale, -kIq1Delta, err_neg);
      neg = err_neg < err;
      e = neg ? e_neg : e_pos;
      err = neg ? err_neg : err;
    } else {
      const float delta = s.delta == Delta::None ? 0.f : (neg ? -kIq1Delta : kIq1Delta);
      e = L.best(t + g * G, w + g * G, scale, delta, err);
    }
    c.idx[g] = static_cast<uint16_t>(e);
    if (s.delta == Delta::PerGroup) c.neg_delta[g] = neg;
    total += err;
    if (num) {
      const float delta = s.delta == Delta::None ? 0.f : (neg ? -kIq1Delta : kIq1Delta);
      const float* v = L.entry(e);
      for (int j = 0; j < G; ++j) {
        const double vj = v[j] + delta;
        *num += static_cast<double>(w[g * G + j]) * t[g * G + j] * vj;
        *den += static_cast<double>(w[g * G + j]) * vj * vj;
      }
    }
  }
  c.err = total;
  return total;
}

// The best float scale of one sub-block (step 2 above).
float fit_sub_scale(const Spec& s, const float* t, const float* w, int n, bool& neg_delta) {
  float amax = 0;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(t[j]));
  if (amax == 0) return 0;
  const float top = s.lat->level[s.lat->nlev - 1] + (s.delta == Delta::None ? 0.f : kIq1Delta);
  double wt2 = 0;
  for (int j = 0; j < n; ++j) wt2 += static_cast<double>(w[j]) * t[j] * t[j];
  float best_scale = amax / top, best_err = INFINITY;
  bool best_neg = false;
  // The least-squares scale of the entries chosen at `scale`, and its error.
  auto try_scale = [&](float scale, bool neg) {
    SubChoice c;
    double num, den;
    choose_at(s, t, w, n, scale, neg, c, &num, &den);
    if (den <= 0 || num <= 0) return false;
    const float err = static_cast<float>(wt2 - num * num / den);
    if (err >= best_err) return false;
    best_err = err, best_scale = static_cast<float>(num / den), best_neg = neg;
    return true;
  };
  const int n_delta = s.delta == Delta::PerSubBlock ? 2 : 1;
  for (int dn = 0; dn < n_delta; ++dn)
    for (int k = -4; k <= 4; ++k) try_scale(amax / top * (1.f + 0.1f * static_cast<float>(k)), dn == 1);
  // Re-choose the entries at the best least-squares scale while that improves.
  for (int iter = 0; iter < 3; ++iter)
    if (!try_scale(best_scale, best_neg)) break;
  neg_delta = best_neg;
  return best_scale;
}

void fit_block(const Spec& s, const float* x, const float* importance, BlockFit& f) {
  const Lattice& L = *s.lat;
  constexpr int n = 256;
  float t[n], w[n];
  double sum2 = 0;
  for (int j = 0; j < n; ++j) sum2 += static_cast<double>(x[j]) * x[j];
  const float sigma2 = static_cast<float>(sum2 / n);
  for (int j = 0; j < n; ++j) w[j] = sigma2 + x[j] * x[j];
  if (importance) weight_by_importance(importance, n, w);
  f = BlockFit{};
  if (sum2 == 0) return;

  // 1. Signs.
  for (int k = 0; k < n / 8; ++k) {
    uint8_t sb = 0;
    for (int j = 0; j < 8; ++j) {
      const float v = x[8 * k + j];
      if (s.signs == Signs::InGrid) {
        t[8 * k + j] = v;
      } else {
        t[8 * k + j] = std::fabs(v);
        if (v < 0) sb |= static_cast<uint8_t>(1 << j);
      }
    }
    if (s.signs == Signs::Parity && (std::popcount(static_cast<unsigned>(sb)) & 1)) {
      int m = 0;
      for (int j = 1; j < 8; ++j)
        if (w[8 * k + j] * t[8 * k + j] * t[8 * k + j] < w[8 * k + m] * t[8 * k + m] * t[8 * k + m]) m = j;
      sb ^= static_cast<uint8_t>(1 << m);
      t[8 * k + m] = -t[8 * k + m];
    }
    f.sign[k] = sb;
  }

  // 2. A float scale per sub-block.
  const int nsub = n / s.sub;
  float scale[16];
  bool sub_neg[16] = {};
  float max_scale = 0;
  for (int b = 0; b < nsub; ++b) {
    scale[b] = fit_sub_scale(s, t + b * s.sub, w + b * s.sub, s.sub, sub_neg[b]);
    max_scale = std::max(max_scale, scale[b]);
  }
  if (max_scale == 0) return;

  // 3. The block scale, then each sub-block's code and entries at its quantized scale.
  f.d = fp32_to_fp16(max_scale / (s.ma * (static_cast<float>(s.ls_max) + s.mb)));
  const float d = fp16_to_fp32(f.d);
  const int per_sub = s.sub / L.group;
  for (int b = 0; b < nsub; ++b) {
    const int guess = std::clamp(static_cast<int>(std::lrintf(scale[b] / (d * s.ma) - s.mb)), 0, s.ls_max);
    SubChoice best;
    int best_ls = guess;
    for (int ls = std::max(0, guess - 1); ls <= std::min(s.ls_max, guess + 1); ++ls) {
      const float dl = d * s.ma * (static_cast<float>(ls) + s.mb);
      const int n_delta = s.delta == Delta::PerSubBlock ? 2 : 1;
      for (int dn = 0; dn < n_delta; ++dn) {
        SubChoice c;
        choose_at(s, t + b * s.sub, w + b * s.sub, s.sub, dl, dn == 1, c, nullptr, nullptr);
        if (s.delta == Delta::PerSubBlock)
          for (bool& v : c.neg_delta) v = dn == 1;
        if (c.err < best.err) best = c, best_ls = ls;
      }
    }
    f.ls[b] = static_cast<uint8_t>(best_ls);
    for (int g = 0; g < per_sub; ++g) f.idx[b * per_sub + g] = best.idx[g];
    // Groups of 8 values carrying a delta sign (IQ1): per sub-block or per group.
    if (s.delta != Delta::None)
      for (int g = 0; g < s.sub / 8; ++g) f.neg_delta[b * (s.sub / 8) + g] = best.neg_delta[s.delta == Delta::PerGroup ? g : 0];
  }
}

uint32_t sign7(uint8_t sb) { return sb & 127u; }  // the 8th bit is implied by even parity

void encode(GgmlType type, const BlockFit& f, void* dst) {
  switch (type) {
    case GgmlType::IQ2_XXS: {
      auto& b = *static_cast<BlockIQ2_XXS*>(dst);
      b.d = f.d;
      for (int ib = 0; ib < 8; ++ib) {
        const uint32_t idx = f.idx[4 * ib] | f.idx[4 * ib + 1] << 8 | f.idx[4 * ib + 2] << 16 | static_cast<uint32_t>(f.idx[4 * ib + 3]) << 24;
        uint32_t aux = static_cast<uint32_t>(f.ls[ib]) << 28;
        for (int l = 0; l < 4; ++l) aux |= sign7(f.sign[4 * ib + l]) << (7 * l);
        b.qs[4 * ib] = static_cast<uint16_t>(idx), b.qs[4 * ib + 1] = static_cast<uint16_t>(idx >> 16);
        b.qs[4 * ib + 2] = static_cast<uint16_t>(aux), b.qs[4 * ib + 3] = static_cast<uint16_t>(aux >> 16);
      }
      break;
    }
    case GgmlType::IQ2_XS: {
      auto& b = *static_cast<BlockIQ2_XS*>(dst);
      b.d = f.d;
      for (int k = 0; k < 32; ++k) b.qs[k] = static_cast<uint16_t>(f.idx[k] | sign7(f.sign[k]) << 9);
      for (int ib = 0; ib < 8; ++ib) b.scales[ib] = static_cast<uint8_t>(f.ls[2 * ib] | f.ls[2 * ib + 1] << 4);
      break;
    }
    case GgmlType::IQ2_S: {
      auto& b = *static_cast<BlockIQ2_S*>(dst);
      std::memset(&b, 0, sizeof b);
      b.d = f.d;
      for (int k = 0; k < 32; ++k) {
        b.qs[k] = static_cast<uint8_t>(f.idx[k]);
        b.qh[k / 4] |= static_cast<uint8_t>((f.idx[k] >> 8) << (2 * (k % 4)));
        b.signs[k] = f.sign[k];
      }
      for (int ib = 0; ib < 8; ++ib) b.scales[ib] = static_cast<uint8_t>(f.ls[2 * ib] | f.ls[2 * ib + 1] << 4);
      break;
    }
    case GgmlType::IQ3_XXS: {
      auto& b = *static_cast<BlockIQ3_XXS*>(dst);
      b.d = f.d;
      for (int k = 0; k < 64; ++k) b.qs[k] = static_cast<uint8_t>(f.idx[k]);
      for (int ib = 0; ib < 8; ++ib) {
        uint32_t aux = static_cast<uint32_t>(f.ls[ib]) << 28;
        for (int l = 0; l < 4; ++l) aux |= sign7(f.sign[4 * ib + l]) << (7 * l);
        std::memcpy(b.scales_signs + 4 * ib, &aux, 4);
      }
      break;
    }
    case GgmlType::IQ3_S: {
      auto& b = *static_cast<BlockIQ3_S*>(dst);
      std::memset(&b, 0, sizeof b);
      b.d = f.d;
      for (int k = 0; k < 64; ++k) {
        b.qs[k] = static_cast<uint8_t>(f.idx[k]);
        b.qh[k / 8] |= static_cast<uint8_t>((f.idx[k] >> 8) << (k % 8));
      }
      for (int k = 0; k < 32; ++k) b.signs[k] = f.sign[k];
      for (int ib = 0; ib < 8; ++ib) b.scales[ib / 2] |= static_cast<uint8_t>(f.ls[ib] << (4 * (ib % 2)));
      break;
    }
    case GgmlType::IQ1_S: {
      auto& b = *static_cast<BlockIQ1_S*>(dst);
      b.d = f.d;
      for (int ib = 0; ib < 8; ++ib) {
        uint16_t h = static_cast<uint16_t>(f.ls[ib] << 12 | (f.neg_delta[4 * ib] ? 0x8000 : 0));
        for (int l = 0; l < 4; ++l) {
          b.qs[4 * ib + l] = static_cast<uint8_t>(f.idx[4 * ib + l]);
          h = static_cast<uint16_t>(h | (f.idx[4 * ib + l] >> 8) << (3 * l));
        }
        b.qh[ib] = h;
      }
      break;
    }
    default: {  // IQ1_M
      auto& b = *static_cast<BlockIQ1_M*>(dst);
      std::memset(&b, 0, sizeof b);
      for (int k = 0; k < 32; ++k) {
        b.qs[k] = static_cast<uint8_t>(f.idx[k]);
        const int nib = (f.idx[k] >> 8) | (f.neg_delta[k] ? 8 : 0);
        b.qh[k / 2] |= static_cast<uint8_t>(nib << (4 * (k % 2)));
      }
      for (int g = 0; g < 16; ++g) b.scales[g / 4] = static_cast<uint16_t>(b.scales[g / 4] | f.ls[g] << (3 * (g % 4)));
      for (int k = 0; k < 4; ++k) b.scales[k] = static_cast<uint16_t>(b.scales[k] | ((f.d >> (4 * k)) & 0xF) << 12);
      break;
    }
  }
}

}  // namespace

bool is_lattice_iquant(GgmlType t) {
  switch (t) {
    case GgmlType::IQ2_XXS: case GgmlType::IQ2_XS: case GgmlType::IQ2_S: case GgmlType::IQ3_XXS:
    case GgmlType::IQ3_S: case GgmlType::IQ1_S: case GgmlType::IQ1_M:
      return true;
    default: return false;
  }
}

void quantize_lattice(GgmlType type, const float* x, void* dst, int64_t nb, const float* importance) {
  const Spec s = spec_of(type);
  const size_t bytes = type_info(type).type_size;
  BlockFit f;
  for (int64_t i = 0; i < nb; ++i) {
    fit_block(s, x + 256 * i, importance ? importance + 256 * i : nullptr, f);
    encode(type, f, static_cast<uint8_t*>(dst) + bytes * static_cast<size_t>(i));
  }
}

}  // namespace strata
