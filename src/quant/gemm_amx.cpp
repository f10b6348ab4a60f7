// Prefill on AMX-INT8 tiles (Sapphire Rapids and later): one tdpbssd multiplies 16 activation
// rows by 16 weight rows over up to 64 columns, exactly in int32, where vpdpbusd takes 64 byte
// products. Two kernels, both bit-identical to the packed and decoded kernels they replace:
//
// - 32-value formats with one float factor per block (Q8_0, Q4_0, Q5_0, IQ4_NL): tile A holds the
//   activations as they are quantized (16 tokens x the 32 codes of one block, straight from the
//   Q8_0 rows, a row stride apart); tile B the weights of two packed groups (16 rows), staged
//   once per call as B row g = codes 4g..4g+3 of each of the 16 rows (the packed layout's word of
//   4 codes per row, two groups side by side). C row t holds token t's exact block sum for each
//   row, and the float step is the packed kernels' own, one fma per block in block order.
// - 256-value formats decoded 8 rows at a time (DecodedX8Block): the sub-scales go into the
//   weights and the products into two byte tiles (StagedK below), so a whole block sums inside
//   the tiles and one C pair leaves per block.
//
// C can only leave a tile through memory, and on the hosts measured the tile work itself (loads,
// tdpbssd, stores) is what bounds both kernels, not the float steps around it (README).
// Tiles are configured per call and released at its end; the OS grants the tile state to the
// process once (amx_usable).
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cpuid.h>

#include <algorithm>
#include <cstddef>

#include "backend/thread_scratch.h"
#include "quant/gemm_x8_simd.h"

namespace strata {
namespace {

// ldtilecfg's operand (palette 1): each tile's rows and bytes per row.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// Tile registers of the 32-value kernel: C (block sums of nt tokens x 16 rows) in 0 and 1, A in 2
// and 3, B in 4 and 5; even blocks use the first of each pair, odd blocks the second, so a block
// does not wait for the previous one's C to be stored.
void configure_tiles(int nt) {
  TileConfig c;
  for (int i = 0; i < 2; ++i) {
    c.rows[i] = static_cast<uint8_t>(nt), c.colsb[i] = 64;      // C: nt x 16 int32
    c.rows[2 + i] = static_cast<uint8_t>(nt), c.colsb[2 + i] = 32;  // A: nt x 32 bytes
    c.rows[4 + i] = 8, c.colsb[4 + i] = 64;                     // B: 8 x (16 rows x 4 bytes)
  }
  _tile_loadconfig(&c);
}

constexpr int kTileTokens = 16;
constexpr size_t kStagedBlock32 = 8 * 64;  // B tile of one 32-column block

// Signed codes of group g (values 4g..4g+3 of each row): the packed kernels' codes less the
// format's offset (8 for Q4_0, 16 for Q5_0), which takes the offset term out exactly.
template <typename F>
inline __m256i signed_group(const typename F::Block& b, int g) {
  const __m256i c = F::code(b, g);
  if constexpr (requires { F::kShift; }) return _mm256_sub_epi8(c, _mm256_set1_epi8(static_cast<char>(1 << F::kShift)));
  else return c;
}

// Q4_1 and Q5_1: each row's block offset m, whose term m * (the activation block's code sum) is a
// second multiply-add per block.
template <typename F>
constexpr bool kHasMin = requires(const typename F::Block& b) { b.m; };

// Two packed groups (the second absent when ngroups is 1: zero weights) as B tiles, block after
// block, and the 16 rows' block factors (and offsets) as floats.
template <typename F>
void stage_blocks32(int nb, const uint8_t* w, size_t gs, int ngroups, int8_t* wt, float* dw, float* mw) {
  using Block = typename F::Block;
  const auto* b0 = reinterpret_cast<const Block*>(w);
  const auto* b1 = reinterpret_cast<const Block*>(w + gs);
  for (int ib = 0; ib < nb; ++ib) {
    const __m256 d0 = load_d8(b0[ib].d);
    const __m256 d1 = ngroups > 1 ? load_d8(b1[ib].d) : _mm256_setzero_ps();
    _mm256_storeu_ps(dw + 16 * ib, d0);
    _mm256_storeu_ps(dw + 16 * ib + 8, d1);
    if constexpr (kHasMin<F>) {
      _mm256_storeu_ps(mw + 16 * ib, load_d8(b0[ib].m));
      _mm256_storeu_ps(mw + 16 * ib + 8, ngroups > 1 ? load_d8(b1[ib].m) : _mm256_setzero_ps());
    }
    STRATA_UNROLL for (int g = 0; g < 8; ++g) {
      const __m256i lo = signed_group<F>(b0[ib], g);
      const __m256i hi = ngroups > 1 ? signed_group<F>(b1[ib], g) : _mm256_setzero_si256();
      _mm512_storeu_si512(wt + kStagedBlock32 * ib + 64 * g, _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
    }
  }
}

// One block's tile product into C tile `C`: A from the activations, B from the staged weights.
// (The tile intrinsics take register numbers as literals.)
template <int C>
inline void block_sums(const uint8_t* a, size_t xs, const int8_t* b, int32_t (*out)[16]) {
  if constexpr (C == 0) {
    _tile_loadd(2, a, static_cast<long>(xs));
    _tile_loadd(4, b, 64);
    _tile_zero(0);
    _tile_dpbssd(0, 2, 4);
    _tile_stored(0, out, 64);
  } else {
    _tile_loadd(3, a, static_cast<long>(xs));
    _tile_loadd(5, b, 64);
    _tile_zero(1);
    _tile_dpbssd(1, 3, 5);
    _tile_stored(1, out, 64);
  }
}

// acc[t] += (row factors * token t's factor) * sum[t] for the nt tokens (then, with offsets,
// += (row offsets * token t's factor) * token t's code sum).
template <bool kFull, bool kMin>
inline void float_step(__m512* acc, const int32_t (*sum)[16], __m512 dw, __m512 mw, const Q8BlockInfo* xi, size_t xis,
                       int nt) {
  STRATA_UNROLL for (int t = 0; t < kTileTokens; ++t) {
    if (kFull || t < nt) {
      const Q8BlockInfo& x = xi[xis * t];
      const __m512 s = _mm512_cvtepi32_ps(_mm512_load_si512(sum[t]));
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(x.d)), s, acc[t]);
      if constexpr (kMin)
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(mw, _mm512_set1_ps(x.d)), _mm512_set1_ps(static_cast<float>(x.sum)), acc[t]);
    }
  }
}

// nt (up to 16) tokens from activation row xq (Q8_0, xs bytes apart) through the staged rows.
template <bool kFull, bool kMin>
void token_tile32(int nb, const int8_t* wt, const float* dw, const float* mw, const uint8_t* xq, size_t xs,
                  const Q8BlockInfo* xi, size_t xis, int nt, int nrows, float* y, size_t ys) {
  alignas(64) int32_t sums[2][kTileTokens][16];
  __m512 acc[kTileTokens];
  STRATA_UNROLL for (int t = 0; t < kTileTokens; ++t) acc[t] = _mm512_setzero_ps();
  const uint8_t* a = xq + offsetof(BlockQ8_0, qs);
  auto step = [&](int ib, const int32_t(*sum)[16]) {
    const __m512 m = kMin ? _mm512_loadu_ps(mw + 16 * ib) : _mm512_setzero_ps();
    float_step<kFull, kMin>(acc, sum, _mm512_loadu_ps(dw + 16 * ib), m, xi + ib, xis, nt);
  };
  int ib = 0;
  for (; ib + 1 < nb; ib += 2) {
    block_sums<0>(a + sizeof(BlockQ8_0) * ib, xs, wt + kStagedBlock32 * ib, sums[0]);
    block_sums<1>(a + sizeof(BlockQ8_0) * (ib + 1), xs, wt + kStagedBlock32 * (ib + 1), sums[1]);
    step(ib, sums[0]);
    step(ib + 1, sums[1]);
  }
  if (ib < nb) {
    block_sums<0>(a + sizeof(BlockQ8_0) * ib, xs, wt + kStagedBlock32 * ib, sums[0]);
    step(ib, sums[0]);
  }
  const __mmask16 rows = static_cast<__mmask16>((1u << nrows) - 1);
  for (int t = 0; t < nt; ++t) _mm512_mask_storeu_ps(y + ys * t, rows, acc[t]);
}

// GemmAmxFn for the 32-value formats with one factor (and Q4_1, Q5_1: one offset) per block on
// Q8_0 activations.
template <typename F>
void gemm_amx_blocks32(int n, const uint8_t* w, size_t gs, int ngroups, const uint8_t* xq, size_t xs,
                       const Q8BlockInfo* xi, size_t xis, int ntok, float* y, size_t ys) {
  constexpr bool kMin = kHasMin<F>;
  const int nb = n / 32;
  auto* staged = static_cast<int8_t*>(thread_scratch(ScratchSlot::AmxStagedBlocks, kStagedBlock32 * nb));
  auto* factors = static_cast<float*>(thread_scratch(ScratchSlot::AmxStagedFactors, (kMin ? 32 : 16) * sizeof(float) * nb));
  float* dw = factors;
  float* mw = dw + 16 * static_cast<size_t>(nb);
  stage_blocks32<F>(nb, w, gs, ngroups, staged, dw, mw);
  const int nrows = kPackRows * ngroups;
  int configured = 0;
  for (int t0 = 0; t0 < ntok; t0 += kTileTokens) {
    const int nt = std::min(kTileTokens, ntok - t0);
    if (nt != configured) configure_tiles(configured = nt);
    const uint8_t* x = xq + xs * t0;
    if (nt == kTileTokens)
      token_tile32<true, kMin>(nb, staged, dw, mw, x, xs, xi + xis * t0, xis, nt, nrows, y + ys * t0, ys);
    else
      token_tile32<false, kMin>(nb, staged, dw, mw, x, xs, xi + xis * t0, xis, nt, nrows, y + ys * t0, ys);
  }
  _tile_release();
}

// ---- 256-column formats, from rows decoded 8 at a time (DecodedX8Block) ----
// Their scales are integers per 16 values, so they go into the weights: w = sc * value (at most
// 4096 in magnitude over every format), split as w = 128 * hi + lo with lo in [-64, 63] and hi in
// [-32, 32], both bytes. Two tile products per 64 columns (lo and hi) then sum a whole block in
// the tiles, and the block total lo + 128 * hi is exactly the integer sum of sub-scale times
// sub-block dot product that every other kernel forms; only one C pair leaves per block.
struct StagedK {
  int8_t lo[4][16][64];  // [64-column step][B row: values 4q..4q+3 of the step][16 rows x 4 bytes]
  int8_t hi[4][16][64];
  float d[16], dmin[16];
  int32_t mn[8][16];  // DecodedX8Block::mn of the 16 rows (the mins' 16-bit pairs)
};

// 16-bit lanes 4r..4r+3 = the sub-scale of row r (8 rows), from DecodedX8Block::sc[j].
inline __m512i scale_words(const int32_t* sc8) {
  const __m512i v = _mm512_cvtepu32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc8)));
  return _mm512_or_si512(v, _mm512_slli_epi64(v, 32));
}
// 32 values (4 of each of 8 rows) times their row's scale, split into the lo and hi bytes.
inline void split_scaled(const int8_t* v, __m512i sc, __m256i& lo, __m256i& hi) {
  const __m512i w = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v))), sc);
  const __m512i l = _mm512_sub_epi16(_mm512_and_si512(_mm512_add_epi16(w, _mm512_set1_epi16(64)), _mm512_set1_epi16(127)),
                                     _mm512_set1_epi16(64));
  lo = _mm512_cvtepi16_epi8(l);
  hi = _mm512_cvtepi16_epi8(_mm512_srai_epi16(_mm512_sub_epi16(w, l), 7));
}
inline void store_join(int8_t* p, __m256i a, __m256i b) {
  _mm512_storeu_si512(p, _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1));
}

// Rows 0..7 from d0, 8..15 from d1 (absent: zero weights), block after block.
void stage_decoded(int nb, const DecodedX8Block* d0, const DecodedX8Block* d1, StagedK* out) {
  for (int ib = 0; ib < nb; ++ib) {
    const DecodedX8Block& A = d0[ib];
    StagedK& S = out[ib];
    std::memcpy(S.d, A.d, sizeof A.d);
    std::memcpy(S.dmin, A.dmin, sizeof A.dmin);
    for (int q = 0; q < 8; ++q) std::memcpy(S.mn[q], A.mn[q], sizeof A.mn[q]);
    if (d1) {
      const DecodedX8Block& B = d1[ib];
      std::memcpy(S.d + 8, B.d, sizeof B.d);
      std::memcpy(S.dmin + 8, B.dmin, sizeof B.dmin);
      for (int q = 0; q < 8; ++q) std::memcpy(S.mn[q] + 8, B.mn[q], sizeof B.mn[q]);
    } else {
      std::fill(S.d + 8, S.d + 16, 0.f);
      std::fill(S.dmin + 8, S.dmin + 16, 0.f);
      for (int q = 0; q < 8; ++q) std::fill(S.mn[q] + 8, S.mn[q] + 16, 0);
    }
    for (int j = 0; j < 16; ++j) {
      const __m512i sa = scale_words(A.sc[j]);
      const __m512i sb = d1 ? scale_words(d1[ib].sc[j]) : _mm512_setzero_si512();
      STRATA_UNROLL for (int g = 0; g < 4; ++g) {
        const int G = 4 * j + g;
        __m256i la, ha, lb = _mm256_setzero_si256(), hb = _mm256_setzero_si256();
        split_scaled(A.v[G], sa, la, ha);
        if (d1) split_scaled(d1[ib].v[G], sb, lb, hb);
        store_join(S.lo[G / 16][G % 16], la, lb);
        store_join(S.hi[G / 16][G % 16], ha, hb);
      }
    }
  }
}

// Tiles for the 256-column kernel: C lo and hi in 0 and 1, A in 2, B lo and hi in 3 and 4.
void configure_tiles_k(int nt) {
  TileConfig c;
  c.rows[0] = c.rows[1] = static_cast<uint8_t>(nt), c.colsb[0] = c.colsb[1] = 64;
  c.rows[2] = static_cast<uint8_t>(nt), c.colsb[2] = 64;
  c.rows[3] = c.rows[4] = 16, c.colsb[3] = c.colsb[4] = 64;
  _tile_loadconfig(&c);
}

// How each format takes its mins (gemm_decoded_bands' BandMins): none; per block in the chain
// (Q4_K, Q5_K); summed apart and subtracted at the end (Q2_K).
enum class KMins { kNone, kPerBlock, kSummedApart };

// The 16 rows' sums of mins times the token's 16-value code sums (the K-quants' min term), as
// gemm_decoded_bands forms them: exact integers.
inline __m512i min_sums(const StagedK& S, const BlockQ8_K& X) {
  __m512i m32 = _mm512_setzero_si512();
  STRATA_UNROLL for (int q = 0; q < 8; ++q) {
    int32_t pair;
    std::memcpy(&pair, X.bsums + 2 * q, 4);
    m32 = _mm512_dpwssd_epi32(m32, _mm512_set1_epi32(pair), _mm512_loadu_si512(S.mn[q]));
  }
  return m32;
}

// One token's step for one block: acc + (row factors * token factor) * (lo + 128 * hi), then the
// min term as the format takes it (kSummedApart: into `mins`, subtracted at the end).
template <KMins kMins>
inline __m512 block_step_k(__m512 acc, const int32_t* lo, const int32_t* hi, __m512 dw, const StagedK& S,
                           const BlockQ8_K& X, float* mins) {
  const __m512i total = _mm512_add_epi32(_mm512_load_si512(lo), _mm512_slli_epi32(_mm512_load_si512(hi), 7));
  const __m512 dy = _mm512_set1_ps(X.d);
  acc = _mm512_fmadd_ps(_mm512_mul_ps(dw, dy), _mm512_cvtepi32_ps(total), acc);
  if constexpr (kMins != KMins::kNone) {
    const __m512 m = _mm512_cvtepi32_ps(min_sums(S, X));
    const __m512 dm = _mm512_loadu_ps(S.dmin);
    if constexpr (kMins == KMins::kSummedApart)
      _mm512_store_ps(mins, _mm512_add_ps(_mm512_load_ps(mins), _mm512_mul_ps(dy, _mm512_mul_ps(dm, m))));
    else
      acc = _mm512_fnmadd_ps(_mm512_mul_ps(dm, dy), m, acc);
  }
  return acc;
}

template <KMins kMins, bool kFull>
void token_tile_k(int nb, const StagedK* w, const uint8_t* xq, size_t xs, int nt, int nrows, float* y, size_t ys) {
  alignas(64) int32_t lo[kTileTokens][16], hi[kTileTokens][16];
  alignas(64) float mins[kTileTokens][16] = {};
  __m512 acc[kTileTokens];
  STRATA_UNROLL for (int t = 0; t < kTileTokens; ++t) acc[t] = _mm512_setzero_ps();
  for (int ib = 0; ib < nb; ++ib) {
    const StagedK& S = w[ib];
    const uint8_t* x = xq + sizeof(BlockQ8_K) * ib;
    _tile_zero(0);
    _tile_zero(1);
    STRATA_UNROLL for (int s = 0; s < 4; ++s) {
      _tile_loadd(2, x + offsetof(BlockQ8_K, qs) + 64 * s, static_cast<long>(xs));
      _tile_loadd(3, S.lo[s], 64);
      _tile_loadd(4, S.hi[s], 64);
      _tile_dpbssd(0, 2, 3);
      _tile_dpbssd(1, 2, 4);
    }
    _tile_stored(0, lo, 64);
    _tile_stored(1, hi, 64);
    const __m512 dw = _mm512_loadu_ps(S.d);
    STRATA_UNROLL for (int t = 0; t < kTileTokens; ++t) {
      if (!kFull && t >= nt) continue;
      acc[t] = block_step_k<kMins>(acc[t], lo[t], hi[t], dw, S, *reinterpret_cast<const BlockQ8_K*>(x + xs * t), mins[t]);
    }
  }
  const __mmask16 rows = static_cast<__mmask16>((1u << nrows) - 1);
  for (int t = 0; t < nt; ++t) _mm512_mask_storeu_ps(y + ys * t, rows, _mm512_sub_ps(acc[t], _mm512_load_ps(mins[t])));
}

// Two full tiles of tokens (32) at once, sharing each B load: C lo and hi of the first 16 tokens
// in tiles 0 and 1, of the second in 2 and 3, A in 4 and 5, B lo and hi in 6 and 7, all 16 x 64
// bytes. The accumulators (32 tokens x 16 rows) stay in memory; each takes one step per block.
void configure_tiles_k2() {
  TileConfig c;
  for (int i = 0; i < 8; ++i) c.rows[i] = 16, c.colsb[i] = 64;
  _tile_loadconfig(&c);
}

template <KMins kMins>
void token_pair_k(int nb, const StagedK* w, const uint8_t* xq, size_t xs, int nrows, float* y, size_t ys) {
  constexpr int kT = 2 * kTileTokens;
  alignas(64) int32_t sums[4][kTileTokens][16];  // lo, hi of the first tile; lo, hi of the second
  alignas(64) float acc[kT][16] = {}, mins[kT][16] = {};
  const uint8_t* x1 = xq + xs * kTileTokens;
  for (int ib = 0; ib < nb; ++ib) {
    const StagedK& S = w[ib];
    const size_t at = sizeof(BlockQ8_K) * ib + offsetof(BlockQ8_K, qs);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    STRATA_UNROLL for (int s = 0; s < 4; ++s) {
      _tile_loadd(4, xq + at + 64 * s, static_cast<long>(xs));
      _tile_loadd(5, x1 + at + 64 * s, static_cast<long>(xs));
      _tile_loadd(6, S.lo[s], 64);
      _tile_loadd(7, S.hi[s], 64);
      _tile_dpbssd(0, 4, 6);
      _tile_dpbssd(1, 4, 7);
      _tile_dpbssd(2, 5, 6);
      _tile_dpbssd(3, 5, 7);
    }
    _tile_stored(0, sums[0], 64);
    _tile_stored(1, sums[1], 64);
    _tile_stored(2, sums[2], 64);
    _tile_stored(3, sums[3], 64);
    const __m512 dw = _mm512_loadu_ps(S.d);
    for (int t = 0; t < kT; ++t) {
      const auto& X = *reinterpret_cast<const BlockQ8_K*>(xq + xs * t + sizeof(BlockQ8_K) * ib);
      const int h = t / kTileTokens, r = t % kTileTokens;
      _mm512_store_ps(acc[t], block_step_k<kMins>(_mm512_load_ps(acc[t]), sums[2 * h][r], sums[2 * h + 1][r], dw, S, X, mins[t]));
    }
  }
  const __mmask16 rows = static_cast<__mmask16>((1u << nrows) - 1);
  for (int t = 0; t < kT; ++t)
    _mm512_mask_storeu_ps(y + ys * t, rows, _mm512_sub_ps(_mm512_load_ps(acc[t]), _mm512_load_ps(mins[t])));
}

// GemmAmxDecodedFn: the decoded rows of one or two groups times every token.
template <KMins kMins>
void gemm_amx_decoded(int n, const uint8_t* dec0, const uint8_t* dec1, int nrows, const uint8_t* xq, size_t xs, int ntok,
                      float* y, size_t ys) {
  const int nb = n / 256;
  auto* staged = static_cast<StagedK*>(thread_scratch(ScratchSlot::AmxStagedDecoded, sizeof(StagedK) * nb));
  stage_decoded(nb, reinterpret_cast<const DecodedX8Block*>(dec0), reinterpret_cast<const DecodedX8Block*>(dec1), staged);
  int t0 = 0;
  if (ntok >= 2 * kTileTokens) {
    configure_tiles_k2();
    for (; t0 + 2 * kTileTokens <= ntok; t0 += 2 * kTileTokens)
      token_pair_k<kMins>(nb, staged, xq + xs * t0, xs, nrows, y + ys * t0, ys);
  }
  int configured = 0;
  for (; t0 < ntok; t0 += kTileTokens) {
    const int nt = std::min(kTileTokens, ntok - t0);
    if (nt != configured) configure_tiles_k(configured = nt);
    if (nt == kTileTokens)
      token_tile_k<kMins, true>(nb, staged, xq + xs * t0, xs, nt, nrows, y + ys * t0, ys);
    else
      token_tile_k<kMins, false>(nb, staged, xq + xs * t0, xs, nt, nrows, y + ys * t0, ys);
  }
  _tile_release();
}

}  // namespace

bool amx_usable() {
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool tile = (d >> 24) & 1, int8 = (d >> 25) & 1;
    if (!tile || !int8) return false;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1)) return false;  // OSXSAVE
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if (((lo >> 17) & 3) != 3) return false;  // XTILECFG and XTILEDATA enabled by the OS
    // Linux hands out the tile data state only on request (ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA).
    constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
  }();
  return ok;
}

void fill_amx_kernels(KernelTable& t) {
  // From how many tokens on the tiles are faster than the kernel they replace: each call stages
  // its 16 rows once, which few tokens do not repay. `strata bench -p N -n 0 -t 2 -r 5`, two
  // rounds, tok/s without -> with the tiles: q2-Q8_0 at 8 tokens 214.8, 201.3 -> 208.4, 180.4, at
  // 12 tokens 227.7, 225.0 -> 234.1, 249.6; q3-Q4_K_M (its packed Q4_K kernel decodes nothing;
  // the tiles need Q4_K decoded) at 32 tokens 269.2, 267.1 -> 279.8, 197.3, at 48 tokens 259.9,
  // 210.9 -> 296.6, 260.9. The formats that decode for the token bands anyway take the tiles as
  // soon as they would take the bands.
  auto set = [&](GgmlType ty, GemmAmxFn f) {
    t.gemm_amx[static_cast<int>(ty)] = f;
    t.amx_min_tokens[static_cast<int>(ty)] = 12;
  };
  set(GgmlType::Q8_0, gemm_amx_blocks32<Q8_0x8>);
  set(GgmlType::Q4_0, gemm_amx_blocks32<Q4_0x8>);
  set(GgmlType::Q5_0, gemm_amx_blocks32<Q5_0x8>);
  set(GgmlType::IQ4_NL, gemm_amx_blocks32<IQ4_NLx8>);
  set(GgmlType::Q4_1, gemm_amx_blocks32<Q4_1x8>);
  set(GgmlType::Q5_1, gemm_amx_blocks32<Q5_1x8>);
  // Every format that prefills from decoded rows (packed or file layout), and Q4_K.
  for (int i = 0; i < kMaxTypes; ++i)
    if (t.gemm_decoded_bands[i]) t.gemm_amx_decoded[i] = gemm_amx_decoded<KMins::kNone>;
  t.gemm_amx_decoded[static_cast<int>(GgmlType::Q2_K)] = gemm_amx_decoded<KMins::kSummedApart>;
  t.gemm_amx_decoded[static_cast<int>(GgmlType::Q5_K)] = gemm_amx_decoded<KMins::kPerBlock>;
  t.gemm_amx_decoded[static_cast<int>(GgmlType::Q4_K)] = gemm_amx_decoded<KMins::kPerBlock>;
  t.amx_min_tokens[static_cast<int>(GgmlType::Q4_K)] = 48;
  t.decode_packed8[static_cast<int>(GgmlType::Q4_K)] = decode_packed8_q45_k<BlockQ4_Kx8>;
}

}  // namespace strata
