// Prefill on AMX-INT8 tiles (Sapphire Rapids and later): one tdpbssd multiplies 16 activation
// rows by 16 weight rows over 32 columns (8192 byte products) where vpdpbusd does 64, so the
// integer work of a prompt nearly vanishes and what is left is each block's float step.
//
// Roles: tile A holds the activations as they are quantized (16 tokens x the 32 codes of one
// block, straight from the Q8_0 rows, a row stride apart); tile B the weights of two packed
// groups (16 rows), staged once per call into the layout tdpbssd wants: B row g = codes
// 4g..4g+3 of each of the 16 rows, which is the packed layout's 4-codes-per-row word with the two
// groups side by side. C row t then holds token t's exact integer block sum for each of the 16
// rows, and the float step is the packed kernels' own, one fma per block in block order, so the
// outputs are bit-identical to them (and to the scalar reference).
//
// Tiles are configured per call and released at its end; the OS grants the tile state to the
// process once (amx_usable).
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cpuid.h>

#include <vector>

#include "quant/gemm_x8_simd.h"

namespace strata {
namespace {

// Tile registers: C (block sums of nt tokens x 16 rows) in 0 and 1, A in 2 and 3, B in 4 and 5;
// even blocks use the first of each pair, odd blocks the second, so consecutive blocks overlap.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

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

// Two packed groups (the second absent when ngroups is 1: zero weights) as B tiles, block after
// block, and the 16 rows' block factors as floats.
template <typename F>
void stage_blocks32(int nb, const uint8_t* w, size_t gs, int ngroups, int8_t* wt, float* dw) {
  using Block = typename F::Block;
  const auto* b0 = reinterpret_cast<const Block*>(w);
  const auto* b1 = reinterpret_cast<const Block*>(w + gs);
  for (int ib = 0; ib < nb; ++ib) {
    const __m256 d0 = load_d8(b0[ib].d);
    const __m256 d1 = ngroups > 1 ? load_d8(b1[ib].d) : _mm256_setzero_ps();
    _mm256_storeu_ps(dw + 16 * ib, d0);
    _mm256_storeu_ps(dw + 16 * ib + 8, d1);
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

// acc[t] += (row factors * token t's factor) * sum[t] for the nt tokens.
template <bool kFull>
inline void float_step(__m512* acc, const int32_t (*sum)[16], __m512 dw, const Q8BlockInfo* xi, size_t xis, int nt) {
  STRATA_UNROLL for (int t = 0; t < kTileTokens; ++t) {
    if (kFull || t < nt) {
      const __m512 s = _mm512_cvtepi32_ps(_mm512_load_si512(sum[t]));
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(xi[xis * t].d)), s, acc[t]);
    }
  }
}

// nt (up to 16) tokens from activation row xq (Q8_0, xs bytes apart) through the staged rows.
template <bool kFull>
void token_tile32(int nb, const int8_t* wt, const float* dw, const uint8_t* xq, size_t xs, const Q8BlockInfo* xi,
                  size_t xis, int nt, int nrows, float* y, size_t ys) {
  alignas(64) int32_t sums[2][kTileTokens][16];
  __m512 acc[kTileTokens];
  STRATA_UNROLL for (int t = 0; t < kTileTokens; ++t) acc[t] = _mm512_setzero_ps();
  const uint8_t* a = xq + offsetof(BlockQ8_0, qs);
  int ib = 0;
  for (; ib + 1 < nb; ib += 2) {
    block_sums<0>(a + sizeof(BlockQ8_0) * ib, xs, wt + kStagedBlock32 * ib, sums[0]);
    block_sums<1>(a + sizeof(BlockQ8_0) * (ib + 1), xs, wt + kStagedBlock32 * (ib + 1), sums[1]);
    float_step<kFull>(acc, sums[0], _mm512_loadu_ps(dw + 16 * ib), xi + ib, xis, nt);
    float_step<kFull>(acc, sums[1], _mm512_loadu_ps(dw + 16 * (ib + 1)), xi + ib + 1, xis, nt);
  }
  if (ib < nb) {
    block_sums<0>(a + sizeof(BlockQ8_0) * ib, xs, wt + kStagedBlock32 * ib, sums[0]);
    float_step<kFull>(acc, sums[0], _mm512_loadu_ps(dw + 16 * ib), xi + ib, xis, nt);
  }
  const __mmask16 rows = static_cast<__mmask16>((1u << nrows) - 1);
  for (int t = 0; t < nt; ++t) _mm512_mask_storeu_ps(y + ys * t, rows, acc[t]);
}

// GemmAmxFn for the 32-value formats with one factor per block on Q8_0 activations.
template <typename F>
void gemm_amx_blocks32(int n, const uint8_t* w, size_t gs, int ngroups, const uint8_t* xq, size_t xs,
                       const Q8BlockInfo* xi, size_t xis, int ntok, float* y, size_t ys) {
  const int nb = n / 32;
  thread_local std::vector<int8_t> staged;
  thread_local std::vector<float> factors;
  staged.resize(kStagedBlock32 * nb);
  factors.resize(16 * static_cast<size_t>(nb));
  stage_blocks32<F>(nb, w, gs, ngroups, staged.data(), factors.data());
  const int nrows = kPackRows * ngroups;
  int configured = 0;
  for (int t0 = 0; t0 < ntok; t0 += kTileTokens) {
    const int nt = std::min(kTileTokens, ntok - t0);
    if (nt != configured) configure_tiles(configured = nt);
    const uint8_t* x = xq + xs * t0;
    if (nt == kTileTokens)
      token_tile32<true>(nb, staged.data(), factors.data(), x, xs, xi + xis * t0, xis, nt, nrows, y + ys * t0, ys);
    else
      token_tile32<false>(nb, staged.data(), factors.data(), x, xs, xi + xis * t0, xis, nt, nrows, y + ys * t0, ys);
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
  t.gemm_amx[static_cast<int>(GgmlType::Q8_0)] = gemm_amx_blocks32<Q8_0x8>;
  t.gemm_amx[static_cast<int>(GgmlType::Q4_0)] = gemm_amx_blocks32<Q4_0x8>;
  t.gemm_amx[static_cast<int>(GgmlType::Q5_0)] = gemm_amx_blocks32<Q5_0x8>;
  t.gemm_amx[static_cast<int>(GgmlType::IQ4_NL)] = gemm_amx_blocks32<IQ4_NLx8>;
}

}  // namespace strata
