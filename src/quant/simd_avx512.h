// Small AVX-512 helpers shared by the AVX-512 kernel files. Internal linkage on purpose, as in
// simd_avx2_blocks.h: each file gets its own copy with its own flags.
#pragma once
#include <immintrin.h>

#include <cmath>

#include "quant/simd_avx2_blocks.h"  // STRATA_UNROLL

namespace strata {
namespace {

// Eight block totals summed by one shuffle tree instead of a tree per block (a build without the
// per-block trees and float steps ran IQ2_XS's decode 27 % faster; one tree per eight ran the
// grid decodes 0-6 % faster), fed as they come so that only partial sums stay live (keeping all
// eight until the end spilled): put(k, x) takes total k (0..7, in order); after put(7, ...),
// lanes() gives the sums as 32-bit lanes, total k's in lane lane(k) (the others: partial sums).
class SumLanes8 {
 public:
  void put(int k, __m512i x) {
    if (k % 2 == 0) {
      pending_ = x;
      return;
    }
    const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(pending_, x), _mm512_unpackhi_epi32(pending_, x));
    if (k % 4 == 1) {
      a_ = a;
      return;
    }
    // in every 128-bit lane, 32-bit lane p holds a partial sum of total 4 (k / 4) + p
    c_[k / 4] = _mm512_add_epi32(_mm512_unpacklo_epi64(a_, a), _mm512_unpackhi_epi64(a_, a));
  }
  __m512i lanes() const {
    const __m512i e = _mm512_add_epi32(_mm512_shuffle_i64x2(c_[0], c_[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_i64x2(c_[0], c_[1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_epi32(e, _mm512_shuffle_i64x2(e, e, _MM_SHUFFLE(2, 3, 0, 1)));
  }
  static constexpr int lane(int k) { return k < 4 ? k : k + 4; }

 private:
  __m512i pending_, a_, c_[2];
};

// out[r] = the sum over blocks i < nb, in order, of fma(dy, total, ...) for each of NR rows, where
// block(i, tot, dy) gives block i's integer totals (as 32-bit lanes to add) and float factors:
// 8 / NR blocks per shuffle tree, the last few one by one (the same integers and float steps).
template <int NR, class BlockFn>
inline void sum_blocks(int nb, const BlockFn& block, float* out) {
  float acc[NR] = {};
  constexpr int kBlocks = 8 / NR;
  int i = 0;
  for (; i + kBlocks <= nb; i += kBlocks) {
    SumLanes8 sums;
    float dy[8];
    STRATA_UNROLL for (int j = 0; j < kBlocks; ++j) {
      __m512i tot[NR];
      block(i + j, tot, dy + NR * j);
      STRATA_UNROLL for (int r = 0; r < NR; ++r) sums.put(NR * j + r, tot[r]);
    }
    alignas(64) float t[16];
    _mm512_store_ps(t, _mm512_cvtepi32_ps(sums.lanes()));  // int to float as static_cast does
    STRATA_UNROLL for (int k = 0; k < 8; ++k) acc[k % NR] = std::fma(dy[k], t[SumLanes8::lane(k)], acc[k % NR]);
  }
  for (; i < nb; ++i) {
    __m512i tot[NR];
    float dy[NR];
    block(i, tot, dy);
    for (int r = 0; r < NR; ++r) acc[r] = std::fma(dy[r], static_cast<float>(_mm512_reduce_add_epi32(tot[r])), acc[r]);
  }
  for (int r = 0; r < NR; ++r) out[r] = acc[r];
}

// The same for kernels that give one vector per block for two rows, row r's totals in 32-bit
// lanes 8r .. 8r + 7 (block(i, tot, dy)): four blocks per shuffle tree; NR = 1 drops row 1.
template <int NR, class PairFn>
inline void sum_pairs(int nb, const PairFn& block, float* out) {
  float acc[2] = {};
  int i = 0;
  for (; i + 4 <= nb; i += 4) {
    __m512i v[4];
    float dy[8];
    STRATA_UNROLL for (int j = 0; j < 4; ++j) block(i + j, v[j], dy + 2 * j);
    // 128-bit lane L of z: the four blocks' sums over lane L of each; lanes 0, 1 are row 0's
    const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(v[0], v[1]), _mm512_unpackhi_epi32(v[0], v[1]));
    const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2], v[3]), _mm512_unpackhi_epi32(v[2], v[3]));
    const __m512i z = _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
    alignas(64) float t[16];  // block j's row r in t[8r + j]
    _mm512_store_ps(t, _mm512_cvtepi32_ps(_mm512_add_epi32(z, _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(2, 3, 0, 1)))));
    STRATA_UNROLL for (int k = 0; k < 2 * 4; ++k)
      if (k % 2 < NR) acc[k % 2] = std::fma(dy[k], t[8 * (k % 2) + k / 2], acc[k % 2]);
  }
  for (; i < nb; ++i) {
    __m512i v;
    float dy[2];
    block(i, v, dy);
    for (int r = 0; r < NR; ++r)
      acc[r] = std::fma(dy[r], static_cast<float>(_mm512_reduce_add_epi32(_mm512_maskz_mov_epi32(static_cast<__mmask16>(0xFF << (8 * r)), v))), acc[r]);
  }
  for (int r = 0; r < NR; ++r) out[r] = acc[r];
}

}  // namespace
}  // namespace strata
