// Packing into the 8-row layouts, and the scalar reference kernels on them.
#include "quant/gemm_x8.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "common.h"
#include "quant/dequant_blocks.h"
#include "quant/fp16.h"
#include "quant/iq_tables.h"
#include "quant/kernels.h"

namespace strata {

bool packable(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0: case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q4_1: case GgmlType::Q5_1:
    case GgmlType::IQ4_NL: case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K:
    case GgmlType::Q6_K: case GgmlType::IQ4_XS: case GgmlType::TQ2_0: case GgmlType::F16: case GgmlType::BF16:
    case GgmlType::IQ2_XXS: case GgmlType::IQ2_XS: case GgmlType::IQ2_S: case GgmlType::IQ3_XXS: case GgmlType::IQ3_S:
    case GgmlType::IQ1_S: case GgmlType::IQ1_M: case GgmlType::TQ1_0:
      return true;
    default:
      return false;
  }
}

bool packing_grows(GgmlType t) {
  return t == GgmlType::IQ2_XXS || t == GgmlType::IQ2_XS || t == GgmlType::IQ2_S || t == GgmlType::IQ3_XXS ||
         t == GgmlType::IQ3_S || t == GgmlType::IQ1_S || t == GgmlType::IQ1_M || t == GgmlType::TQ1_0;
}


size_t packed_group_bytes(GgmlType t, int64_t cols) {
  const size_t n = static_cast<size_t>(cols);
  switch (t) {
    case GgmlType::Q8_0: return n / 32 * sizeof(BlockQ8_0x8);
    case GgmlType::Q4_0: return n / 32 * sizeof(BlockQ4_0x8);
    case GgmlType::Q5_0: return n / 32 * sizeof(BlockQ5_0x8);
    case GgmlType::Q4_1: return n / 32 * sizeof(BlockQ4_1x8);
    case GgmlType::Q5_1: return n / 32 * sizeof(BlockQ5_1x8);
    case GgmlType::IQ4_NL: return n / 32 * sizeof(BlockIQ4_NLx8);
    case GgmlType::Q2_K: return n / 256 * sizeof(BlockQ2_Kx8);
    case GgmlType::Q3_K: return n / 256 * sizeof(BlockQ3_Kx8);
    case GgmlType::TQ2_0: case GgmlType::TQ1_0: return n / 256 * sizeof(BlockTQ2_0x8);
    case GgmlType::Q4_K: return n / 256 * sizeof(BlockQ4_Kx8);
    case GgmlType::Q5_K: return n / 256 * sizeof(BlockQ5_Kx8);
    case GgmlType::Q6_K: return n / 256 * sizeof(BlockQ6_Kx8);
    case GgmlType::IQ4_XS: return n / 256 * sizeof(BlockIQ4_XSx8);
    case GgmlType::IQ2_XXS: return n / 256 * sizeof(BlockIQ2XXSLevelsx8);
    case GgmlType::IQ2_XS: case GgmlType::IQ2_S: return n / 256 * sizeof(BlockIQ2Levelsx8);
    case GgmlType::IQ1_S: case GgmlType::IQ1_M: return n / 256 * sizeof(BlockIQ1Codesx8);
    case GgmlType::IQ3_XXS: case GgmlType::IQ3_S: return n / 256 * sizeof(BlockIQ3Levelsx8);
    case GgmlType::F16: case GgmlType::BF16: return n * 8 * sizeof(uint16_t);
    default: throw Error("no packed layout for " + type_name(t));
  }
}

namespace {

// The interleave every layout shares: 4-byte group g of a row's bytes `src` goes to
// dst[g*32 + r*4 ...] (8 rows of 4 bytes per 32-byte vector).
void interleave4(uint8_t* dst, const void* src, int r, int groups) {
  for (int g = 0; g < groups; ++g) std::memcpy(dst + g * 32 + r * 4, static_cast<const uint8_t*>(src) + 4 * g, 4);
}

template <typename Block>
const Block& file_block(const uint8_t* rows, size_t stride, int r, int64_t ib) {
  return reinterpret_cast<const Block*>(rows + stride * r)[ib];
}

// Bits 0, 4, ..., 28 of x as bits 0..7.
inline uint8_t every_fourth_bit(uint32_t x) {
  x &= 0x11111111u;
  x = (x | x >> 3) & 0x03030303u;  // pairs in the low 2 bits of each byte
  x = (x | x >> 6) & 0x000F000Fu;  // fours in the low nibble of each half
  return static_cast<uint8_t>(x | x >> 12);
}

// The 32-value formats (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL): scales (and offsets) side by side,
// code bytes interleaved 4 at a time, and the fifth bits regrouped so that bit g of qh[r*4 + i]
// belongs to code 4g+i.
template <typename Block, typename Packed>
void pack_32_rows8(const uint8_t* rows, size_t stride, int64_t cols, uint8_t* dst) {
  auto* out = reinterpret_cast<Packed*>(dst);
  for (int64_t ib = 0; ib < cols / 32; ++ib)
    for (int r = 0; r < 8; ++r) {
      const auto& b = file_block<Block>(rows, stride, r, ib);
      out[ib].d[r] = b.d;
      if constexpr (requires { b.m; }) out[ib].m[r] = b.m;
      interleave4(reinterpret_cast<uint8_t*>(out[ib].qs), b.qs, r, sizeof(b.qs) / 4);
      if constexpr (requires { b.qh; }) {
        uint32_t qh;
        std::memcpy(&qh, b.qh, 4);
        for (int i = 0; i < 4; ++i) out[ib].qh[r * 4 + i] = every_fourth_bit(qh >> i);
      }
    }
}

// Q4_K, Q5_K: scales and mins unpacked to bytes, codes interleaved (and Q5_K's high-bit bytes).
template <typename Block, typename Packed>
void pack_k_rows8(const uint8_t* rows, size_t stride, int64_t cols, uint8_t* dst) {
  auto* out = reinterpret_cast<Packed*>(dst);
  for (int64_t ib = 0; ib < cols / 256; ++ib)
    for (int r = 0; r < 8; ++r) {
      const auto& b = file_block<Block>(rows, stride, r, ib);
      out[ib].d[r] = b.d;
      out[ib].dmin[r] = b.dmin;
      for (int s = 0; s < 8; ++s) get_scale_min_k4(s, b.scales, out[ib].sc[s][r], out[ib].mn[s][r]);
      for (int j = 0; j < 4; ++j) interleave4(out[ib].qs + j * 256, b.qs + 32 * j, r, 8);
      if constexpr (requires { b.qh; }) interleave4(out[ib].qh, b.qh, r, 8);
    }
}

// The lattice i-quants spelled out (the grown layouts), 8 values at a time: values 8g..8g+7 of a
// block as their levels (the grid entries' packed level codes; IQ2: 2 bits per value, IQ3: 4 bits,
// value j at bits 2j or 4j) and sign bits (bit j), and the odd sub-scale 2s + 1 of 16 values (IQ2)
// or 32 values (IQ3), read the way the file-layout decoders read them (dequant_blocks.h).
struct Lattice8 {
  uint32_t levels, signs;
};
inline Lattice8 lattice8(const BlockIQ2_XXS& b, int g, const iq::Tables& T) {
  const int c = g / 4, l = g % 4;
  const uint32_t idx = b.qs[4 * c] | static_cast<uint32_t>(b.qs[4 * c + 1]) << 16;
  const uint32_t aux = b.qs[4 * c + 2] | static_cast<uint32_t>(b.qs[4 * c + 3]) << 16;
  return {iq::kIq2xxsGridPacked[(idx >> (8 * l)) & 0xFF], T.ksigns[(aux >> (7 * l)) & 127]};
}
inline int odd_scale16(const BlockIQ2_XXS& b, int s) { return 2 * static_cast<int>(b.qs[4 * (s / 2) + 3] >> 12) + 1; }
inline Lattice8 lattice8(const BlockIQ2_XS& b, int g, const iq::Tables& T) {
  const uint16_t v = b.qs[g];
  return {iq::kIq2xsGridPacked[v & 511], T.ksigns[v >> 9]};
}
inline int odd_scale16(const BlockIQ2_XS& b, int s) { return 2 * ((b.scales[s / 2] >> (4 * (s % 2))) & 15) + 1; }
inline Lattice8 lattice8(const BlockIQ2_S& b, int g, const iq::Tables&) {
  const int c = g / 4, l = g % 4;
  return {iq::kIq2sGridPacked[b.qs[g] | ((b.qh[c] >> (2 * l)) & 3) << 8], b.signs[g]};
}
inline int odd_scale16(const BlockIQ2_S& b, int s) { return 2 * ((b.scales[s / 2] >> (4 * (s % 2))) & 15) + 1; }
// IQ1: values 8g'..8g'+7 are 8 grid + delta, the grid from an 8-value entry (the table holds 8 grid,
// grid in {-1, 0, 1}) and delta +-1 shared by those 8 values (IQ1_M) or by the 32 around them (IQ1_S).
struct Iq1Group {
  uint64_t grid8;  // 8 * grid as 8 signed bytes
  bool neg;        // delta -1
};
inline Iq1Group iq1_group(const BlockIQ1_S& b, int g, const iq::Tables& T) {
  const int c = g / 4, l = g % 4;
  const uint16_t h = b.qh[c];
  return {T.iq1s[b.qs[4 * c + l] | ((h >> (3 * l)) & 7) << 8], (h & 0x8000) != 0};
}
inline int odd_scale16(const BlockIQ1_S& b, int s) { return 2 * ((b.qh[s / 2] >> 12) & 7) + 1; }
inline Iq1Group iq1_group(const BlockIQ1_M& b, int g, const iq::Tables& T) {
  const int nib = (b.qh[g / 2] >> (4 * (g % 2))) & 0xF;
  return {T.iq1s[b.qs[g] | (nib & 7) << 8], (nib & 8) != 0};
}
inline int odd_scale16(const BlockIQ1_M& b, int s) { return 2 * ((b.scales[s / 4] >> (3 * (s % 4))) & 7) + 1; }
// The block's fp16 factor as the file-layout kernels read it (IQ1_M spreads it over its scales).
template <typename Block>
uint16_t file_d(const Block& b) { return b.d; }
inline uint16_t file_d(const BlockIQ1_M& b) { return iq1m_d_bits(b); }
inline Lattice8 lattice8(const BlockIQ3_XXS& b, int g, const iq::Tables& T) {
  const int c = g / 4, l = g % 4;
  uint32_t aux;
  std::memcpy(&aux, b.scales_signs + 4 * c, 4);
  return {iq::kIq3xxsGridPacked[b.qs[8 * c + 2 * l]] | static_cast<uint32_t>(iq::kIq3xxsGridPacked[b.qs[8 * c + 2 * l + 1]]) << 16,
          T.ksigns[(aux >> (7 * l)) & 127]};
}
inline int odd_scale32(const BlockIQ3_XXS& b, int c) {
  uint32_t aux;
  std::memcpy(&aux, b.scales_signs + 4 * c, 4);
  return 2 * static_cast<int>(aux >> 28) + 1;
}
inline Lattice8 lattice8(const BlockIQ3_S& b, int g, const iq::Tables&) {
  const int c = g / 4, l = g % 4;
  const int idx0 = b.qs[8 * c + 2 * l] | ((b.qh[c] >> (2 * l)) & 1) << 8;
  const int idx1 = b.qs[8 * c + 2 * l + 1] | ((b.qh[c] >> (2 * l + 1)) & 1) << 8;
  return {iq::kIq3sGridPacked[idx0] | static_cast<uint32_t>(iq::kIq3sGridPacked[idx1]) << 16, b.signs[4 * c + l]};
}
inline int odd_scale32(const BlockIQ3_S& b, int c) { return 2 * ((b.scales[c / 2] >> (4 * (c % 2))) & 15) + 1; }

// The grown packers decode a row's block 8 values per grid entry into local byte arrays (bit
// tricks on 64-bit words), then write the packed bytes 4 at a time. Value by value, with the
// packed bytes or-ed in place (byte stores that may alias the file block, so it was reloaded for
// every value), they packed 190-290 M values/s per core; now 1.0-1.5 G (strata_microbench
// Pack/<format>), and run -n 1 on the 0.6B synthetic IQ1_M file takes 0.57 s where it took 4.5.
// Eight 2-bit codes (code j at bits 2j) or 4-bit ones (of 32 bits) spread to bytes 0..7, and eight
// sign bits (bit j) as bytes 0 / 1.
inline uint64_t spread2(uint32_t x) {
  uint64_t t = (x & 0xFFull) | (static_cast<uint64_t>(x & 0xFF00u) << 24);
  t = (t & 0x0000000F0000000Full) | ((t & 0x000000F0000000F0ull) << 12);
  return (t & 0x0003000300030003ull) | ((t & 0x000C000C000C000Cull) << 6);
}
inline uint64_t spread4(uint32_t x) {
  uint64_t t = (x & 0xFFFFull) | (static_cast<uint64_t>(x & 0xFFFF0000u) << 16);
  t = (t & 0x000000FF000000FFull) | ((t & 0x0000FF000000FF00ull) << 8);
  return (t & 0x000F000F000F000Full) | ((t & 0x00F000F000F000F0ull) << 4);
}
inline uint64_t spread_bits(uint32_t x) {
  const uint64_t t = ((x & 0xFFu) * 0x0101010101010101ull) & 0x8040201008040201ull;  // bit j kept in byte j
  return ((t + 0x7F7F7F7F7F7F7F7Full) >> 7) & 0x0101010101010101ull;                // no carry: each byte <= 0x80
}

// Q2_K's code places: byte (l / 4) * 32 + 4r + l % 4 of half h holds the 2-bit codes of values
// 128h + 32j + l at bits 2j.
// Eight bytes at a time: bytes l = 8q..8q+7 go to two 4-byte places, (2q) * 32 + 4r and (2q + 1) * 32 + 4r.
inline uint64_t load8(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline void store8_split(uint64_t v, uint8_t* at, uint8_t* at_next) {
  const uint32_t lo = static_cast<uint32_t>(v), hi = static_cast<uint32_t>(v >> 32);
  std::memcpy(at, &lo, 4);
  std::memcpy(at_next, &hi, 4);
}
void put_codes2(const uint8_t* code, int r, uint8_t* qs) {
  for (int h = 0; h < 2; ++h)
    for (int q = 0; q < 4; ++q) {
      const uint8_t* c = code + 128 * h + 8 * q;
      const uint64_t v = load8(c) | load8(c + 32) << 2 | load8(c + 64) << 4 | load8(c + 96) << 6;  // codes 0..3
      store8_split(v, qs + h * 256 + (2 * q) * 32 + r * 4, qs + h * 256 + (2 * q + 1) * 32 + r * 4);
    }
}
// Q3_K's high-mask places: byte (l / 4) * 32 + 4r + l % 4 holds bits (0 / 1 bytes) of values 32j + l at bit j.
void put_bits8(const uint8_t* bit, int r, uint8_t* hm) {
  for (int q = 0; q < 4; ++q) {
    uint64_t v = 0;
    for (int j = 0; j < 8; ++j) v |= load8(bit + 32 * j + 8 * q) << j;
    store8_split(v, hm + (2 * q) * 32 + r * 4, hm + (2 * q + 1) * 32 + r * 4);
  }
}

// Q6_K: the row's 256 codes first spelled out as bytes, 8 at a time from the file's bit planes
// (half h of the file block keeps the low nibbles of its codes l and l + 64 in ql[64h + l], l < 64,
// and the top bits of its codes l, l + 32, l + 64, l + 96 at bits 0, 2, 4, 6 of qh[32h + l], l < 32),
// then placed 8 at a time (groups H and H + 1 of each plane p).
void pack_q6_k_row(BlockQ6_Kx8& o, int r, const BlockQ6_K& b) {
  constexpr uint64_t k0F = 0x0F0F0F0F0F0F0F0Full, k03 = 0x0303030303030303ull;
  o.d[r] = b.d;
  for (int s = 0; s < 16; ++s) o.sc[s][r] = b.scales[s];
  alignas(8) uint8_t code[256];
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; l += 8) {
      const uint64_t a = load8(b.ql + 64 * h + l), c = load8(b.ql + 64 * h + 32 + l), t = load8(b.qh + 32 * h + l);
      const uint64_t v[4] = {(a & k0F) | (t & k03) << 4, (c & k0F) | (t >> 2 & k03) << 4, (a >> 4 & k0F) | (t >> 4 & k03) << 4,
                             (c >> 4 & k0F) | (t >> 6 & k03) << 4};
      for (int k = 0; k < 4; ++k) std::memcpy(code + 128 * h + 32 * k + l, &v[k], 8);
    }
  for (int H = 0; H < 16; H += 2) {
    const uint64_t g3 = load8(code + 4 * (H + 48));
    for (int p = 0; p < 3; ++p)
      store8_split(load8(code + 4 * (H + 16 * p)) | (g3 >> (2 * p) & k03) << 6, o.q + (3 * H + p) * 32 + r * 4,
                   o.q + (3 * (H + 1) + p) * 32 + r * 4);
  }
}

// F16, BF16: 4 columns of 8 rows at a time, two 4 x 4 transposes of 16-bit lanes in 64-bit words
// (lane j at bits 16j, the file's order on a little-endian machine).
// Column k goes to 64k on (the block layout, kHalfColumnHalves).
void pack_16bit_rows8(const uint8_t* rows, size_t stride, int64_t cols, uint8_t* dst) {
  static_assert(std::endian::native == std::endian::little);
  constexpr uint64_t kLanes02 = 0x0000FFFF0000FFFFull, kLow32 = 0x00000000FFFFFFFFull;
  for (int64_t k = 0; k < cols; k += 4)
    for (int half = 0; half < 2; ++half) {
      uint64_t w[4], t[4];
      for (int r = 0; r < 4; ++r) w[r] = load8(rows + stride * (4 * half + r) + 2 * k);
      for (int p = 0; p < 2; ++p) {  // rows 2p, 2p + 1: lanes (x0, y0, x2, y2) and (x1, y1, x3, y3)
        const uint64_t x = w[2 * p], y = w[2 * p + 1];
        t[2 * p] = (x & kLanes02) | (y & kLanes02) << 16;
        t[2 * p + 1] = (x >> 16 & kLanes02) | (y & ~kLanes02);
      }
      uint64_t col[4] = {(t[0] & kLow32) | t[2] << 32, (t[1] & kLow32) | t[3] << 32, t[0] >> 32 | (t[2] & ~kLow32),
                         t[1] >> 32 | (t[3] & ~kLow32)};
      for (int j = 0; j < 4; ++j) std::memcpy(dst + 2 * kHalfColumnHalves * (k + j) + 8 * half, &col[j], 8);
    }
}

// Calls pack(x8 block, r, file block of row r, tables) for every row of every block column.
template <typename Block, typename Packed, typename F>
void pack_grown_rows8(const uint8_t* rows, size_t stride, int64_t cols, uint8_t* dst, F pack) {
  const iq::Tables& T = iq::tables();  // once: the accessor is an out-of-line call
  auto* out = reinterpret_cast<Packed*>(dst);
  for (int64_t ib = 0; ib < cols / 256; ++ib)
    for (int r = 0; r < 8; ++r) pack(out[ib], r, file_block<Block>(rows, stride, r, ib), T);
}
// IQ2: levels in Q2_K's code places, signs in Q3_K's high-mask places.
template <typename Block, typename Packed>
void pack_iq2_rows8(const uint8_t* rows, size_t stride, int64_t cols, uint8_t* dst) {
  pack_grown_rows8<Block, Packed>(rows, stride, cols, dst, [](Packed& o, int r, const Block& b, const iq::Tables& T) {
    uint8_t level[256], sign[256];
    for (int g = 0; g < 32; ++g) {
      const Lattice8 e = lattice8(b, g, T);
      const uint64_t lv = spread2(e.levels), sg = spread_bits(e.signs);
      std::memcpy(level + 8 * g, &lv, 8);
      std::memcpy(sign + 8 * g, &sg, 8);
    }
    o.d[r] = file_d(b);
    for (int s = 0; s < 16; ++s) o.sc[iq2_scale_row<Packed>(s)][r] = static_cast<int8_t>(odd_scale16(b, s));
    put_codes2(level, r, o.qs);
    put_bits8(sign, r, o.hm);
  });
}
// IQ1: g + 1 in Q2_K's code places, the deltas as bits of plus[r], the sub-scales as nibbles.
template <typename Block>
void pack_iq1_rows8(const uint8_t* rows, size_t stride, int64_t cols, uint8_t* dst) {
  pack_grown_rows8<Block, BlockIQ1Codesx8>(rows, stride, cols, dst, [](BlockIQ1Codesx8& o, int r, const Block& b, const iq::Tables& T) {
    uint8_t code[256];
    uint32_t plus = 0;
    for (int g = 0; g < 32; ++g) {
      const Iq1Group e = iq1_group(b, g, T);
      // grid + 1 per byte from 8 grid (0xF8, 0, 8): 1 + bit 3 - 2 * bit 7, never below 0 in a byte
      const uint64_t ones = 0x0101010101010101ull;
      const uint64_t c = ones + ((e.grid8 >> 3) & ones) - (((e.grid8 >> 7) & ones) << 1);
      std::memcpy(code + 8 * g, &c, 8);
      if (!e.neg) plus |= 1u << g;
    }
    o.d[r] = file_d(b);
    for (int p = 0; p < 8; ++p) o.sc[p][r] = static_cast<uint8_t>(odd_scale16(b, 2 * p) | odd_scale16(b, 2 * p + 1) << 4);
    put_codes2(code, r, o.qs);
    o.plus[r] = plus;
  });
}
// IQ3: nibbles level | sign << 3 in IQ4_XS's places.
template <typename Block>
void pack_iq3_rows8(const uint8_t* rows, size_t stride, int64_t cols, uint8_t* dst) {
  pack_grown_rows8<Block, BlockIQ3Levelsx8>(rows, stride, cols, dst, [](BlockIQ3Levelsx8& o, int r, const Block& b, const iq::Tables& T) {
    uint8_t code[256];
    for (int g = 0; g < 32; ++g) {
      const Lattice8 e = lattice8(b, g, T);
      const uint64_t c = (spread4(e.levels) & 0x0707070707070707ull) | spread_bits(e.signs) << 3;
      std::memcpy(code + 8 * g, &c, 8);
    }
    o.d[r] = b.d;
    for (int c = 0; c < 8; ++c) o.sc[c][r] = static_cast<int8_t>(odd_scale32(b, c));
    for (int sub = 0; sub < 8; ++sub)  // bytes 4q..4q+3 of the sub-block's low / high 16 at sub * 128 + q * 32 + 4r
      for (int q = 0; q < 2; ++q) {
        const uint8_t* c = code + 32 * sub + 8 * q;
        store8_split(load8(c) | load8(c + 16) << 4, o.qs + sub * 128 + (2 * q) * 32 + r * 4, o.qs + sub * 128 + (2 * q + 1) * 32 + r * 4);
      }
  });
}

}  // namespace

void pack_rows8(GgmlType t, const uint8_t* rows, size_t stride, int64_t cols, uint8_t* dst) {
  switch (t) {
    case GgmlType::Q8_0: return pack_32_rows8<BlockQ8_0, BlockQ8_0x8>(rows, stride, cols, dst);
    case GgmlType::Q4_0: return pack_32_rows8<BlockQ4_0, BlockQ4_0x8>(rows, stride, cols, dst);
    case GgmlType::Q5_0: return pack_32_rows8<BlockQ5_0, BlockQ5_0x8>(rows, stride, cols, dst);
    case GgmlType::Q4_1: return pack_32_rows8<BlockQ4_1, BlockQ4_1x8>(rows, stride, cols, dst);
    case GgmlType::Q5_1: return pack_32_rows8<BlockQ5_1, BlockQ5_1x8>(rows, stride, cols, dst);
    case GgmlType::IQ4_NL: return pack_32_rows8<BlockIQ4_NL, BlockIQ4_NLx8>(rows, stride, cols, dst);
    case GgmlType::Q2_K: {
      auto* out = reinterpret_cast<BlockQ2_Kx8*>(dst);
      for (int64_t ib = 0; ib < cols / 256; ++ib)
        for (int r = 0; r < 8; ++r) {
          const auto& b = file_block<BlockQ2_K>(rows, stride, r, ib);
          out[ib].d[r] = b.d;
          out[ib].dmin[r] = b.dmin;
          for (int s = 0; s < 16; ++s) out[ib].sc[s][r] = b.scales[s];
          interleave4(out[ib].qs, b.qs, r, 16);
        }
      return;
    }
    case GgmlType::Q3_K: {
      auto* out = reinterpret_cast<BlockQ3_Kx8*>(dst);
      for (int64_t ib = 0; ib < cols / 256; ++ib)
        for (int r = 0; r < 8; ++r) {
          const auto& b = file_block<BlockQ3_K>(rows, stride, r, ib);
          out[ib].d[r] = b.d;
          int8_t sc[16];
          q3k_unpack_scales(b.scales, sc);
          for (int s = 0; s < 16; ++s) out[ib].sc[s][r] = sc[s];
          interleave4(out[ib].qs, b.qs, r, 16);
          interleave4(out[ib].hm, b.hmask, r, 8);
        }
      return;
    }
    case GgmlType::TQ2_0: {
      auto* out = reinterpret_cast<BlockTQ2_0x8*>(dst);
      for (int64_t ib = 0; ib < cols / 256; ++ib)
        for (int r = 0; r < 8; ++r) {
          const auto& b = file_block<BlockTQ2_0>(rows, stride, r, ib);
          out[ib].d[r] = b.d;
          interleave4(out[ib].qs, b.qs, r, 16);
        }
      return;
    }
    case GgmlType::TQ1_0: {  // grown: its base-3 digits spelled out as TQ2_0's 2-bit codes
      auto* out = reinterpret_cast<BlockTQ2_0x8*>(dst);
      for (int64_t ib = 0; ib < cols / 256; ++ib)
        for (int r = 0; r < 8; ++r) {
          const auto& b = file_block<BlockTQ1_0>(rows, stride, r, ib);
          int8_t q[256];
          float sc[16];
          unpack_tq1_0(b, q, sc);
          uint8_t qs[64] = {};  // TQ2_0's file layout: value 128c + 32k + j at bits 2k of byte 32c + j
          for (int i = 0; i < 256; ++i) qs[32 * (i / 128) + i % 32] |= static_cast<uint8_t>((q[i] + 1) << (2 * (i % 128 / 32)));
          out[ib].d[r] = b.d;
          interleave4(out[ib].qs, qs, r, 16);
        }
      return;
    }
    case GgmlType::Q4_K: return pack_k_rows8<BlockQ4_K, BlockQ4_Kx8>(rows, stride, cols, dst);
    case GgmlType::Q5_K: return pack_k_rows8<BlockQ5_K, BlockQ5_Kx8>(rows, stride, cols, dst);
    case GgmlType::Q6_K: {
      auto* out = reinterpret_cast<BlockQ6_Kx8*>(dst);
      for (int64_t ib = 0; ib < cols / 256; ++ib)
        for (int r = 0; r < 8; ++r) pack_q6_k_row(out[ib], r, file_block<BlockQ6_K>(rows, stride, r, ib));
      return;
    }
    case GgmlType::IQ4_XS: {
      auto* out = reinterpret_cast<BlockIQ4_XSx8*>(dst);
      for (int64_t ib = 0; ib < cols / 256; ++ib)
        for (int r = 0; r < 8; ++r) {
          const auto& b = file_block<BlockIQ4_XS>(rows, stride, r, ib);
          out[ib].d[r] = b.d;
          for (int sub = 0; sub < 8; ++sub) {
            const int ls = ((b.scales_l[sub / 2] >> (4 * (sub % 2))) & 0xF) | (((b.scales_h >> (2 * sub)) & 3) << 4);
            out[ib].sc[sub][r] = static_cast<int8_t>(ls - 32);
            interleave4(out[ib].qs + sub * 128, b.qs + 16 * sub, r, 4);
          }
        }
      return;
    }
    case GgmlType::IQ2_XXS: return pack_iq2_rows8<BlockIQ2_XXS, BlockIQ2XXSLevelsx8>(rows, stride, cols, dst);
    case GgmlType::IQ2_XS: return pack_iq2_rows8<BlockIQ2_XS, BlockIQ2Levelsx8>(rows, stride, cols, dst);
    case GgmlType::IQ2_S: return pack_iq2_rows8<BlockIQ2_S, BlockIQ2Levelsx8>(rows, stride, cols, dst);
    case GgmlType::IQ1_S: return pack_iq1_rows8<BlockIQ1_S>(rows, stride, cols, dst);
    case GgmlType::IQ1_M: return pack_iq1_rows8<BlockIQ1_M>(rows, stride, cols, dst);
    case GgmlType::IQ3_XXS: return pack_iq3_rows8<BlockIQ3_XXS>(rows, stride, cols, dst);
    case GgmlType::IQ3_S: return pack_iq3_rows8<BlockIQ3_S>(rows, stride, cols, dst);
    case GgmlType::F16: case GgmlType::BF16: return pack_16bit_rows8(rows, stride, cols, dst);
    default:
      throw Error("no packed layout for " + type_name(t));
  }
}

size_t packed_matrix_bytes(GgmlType t, int64_t groups, int64_t cols) {
  const int64_t b = packed_block_groups(t);
  return static_cast<size_t>((groups + b - 1) / b * b) * packed_group_bytes(t, cols);
}

void pack_matrix8(GgmlType t, const uint8_t* rows, size_t row_stride, int64_t cols, int64_t g0, int64_t g1,
                  uint8_t* dst) {
  const size_t gb = packed_group_bytes(t, cols);
  for (int64_t g = g0; g < g1; ++g)
    pack_rows8(t, rows + row_stride * 8 * static_cast<size_t>(g), row_stride, cols, dst + packed_group_offset(t, gb, g));
}

void q8_0_block_info(const uint8_t* xq, int64_t n, Q8BlockInfo* info) {
  const auto* b = reinterpret_cast<const BlockQ8_0*>(xq);
  for (int64_t ib = 0; ib < n / 32; ++ib) {
    int32_t s = 0;
    for (int i = 0; i < 32; ++i) s += b[ib].qs[i];
    info[ib] = {s, fp16_to_fp32(b[ib].d)};
  }
}

size_t token_band_bytes(int64_t n) { return static_cast<size_t>(n / 256) * sizeof(TokenBandBlock); }

void prepare_token_bands(int n, const uint8_t* xq, size_t xq_stride, int ntok, uint8_t* bands) {
  const size_t band_bytes = token_band_bytes(n);
  for (int b = 0; b * kBandTokens < ntok; ++b) {
    auto* out = reinterpret_cast<TokenBandBlock*>(bands + b * band_bytes);
    const int nt = std::min(kBandTokens, ntok - b * kBandTokens);
    for (int ib = 0; ib < n / 256; ++ib) {
      TokenBandBlock& o = out[ib];
      std::memset(&o, 0, sizeof o);
      for (int t = 0; t < nt; ++t) {
        const BlockQ8_K& x = reinterpret_cast<const BlockQ8_K*>(xq + (b * kBandTokens + t) * xq_stride)[ib];
        for (int G = 0; G < 64; ++G)
          for (int i = 0; i < 4; ++i) o.q[G][t][i] = static_cast<uint8_t>(x.qs[4 * G + i]) ^ 0x80;
        o.d[t] = x.d;
        for (int p = 0; p < 8; ++p)
          o.bs[p][t] = static_cast<int32_t>((static_cast<uint32_t>(static_cast<uint16_t>(x.bsums[2 * p + 1])) << 16) |
                                            static_cast<uint16_t>(x.bsums[2 * p]));
      }
    }
  }
}

// ---- Scalar reference kernels ----
// Each output accumulates one fused multiply-add per block (or per super-block term) in block
// order; block products are exact integers. The SIMD kernels do exactly these operations.
namespace {

const BlockQ8_0& q8_0_at(const uint8_t* xq, size_t stride, int t, int64_t ib) {
  return reinterpret_cast<const BlockQ8_0*>(xq + stride * t)[ib];
}
const BlockQ8_K& q8_k_at(const uint8_t* xq, size_t stride, int t, int64_t ib) {
  return reinterpret_cast<const BlockQ8_K*>(xq + stride * t)[ib];
}

// Code (as an int) of value k (0..31) of row r in an x8 block of a 32-value format.
int code_q8_0(const BlockQ8_0x8& b, int r, int k) { return b.qs[(k / 4) * 32 + r * 4 + k % 4]; }
int nibble_x8(const uint8_t* qs, int r, int k) {
  const uint8_t v = qs[((k % 16) / 4) * 32 + r * 4 + k % 4];
  return k < 16 ? (v & 15) : (v >> 4);
}
// Unsigned codes; the format's offset (-8, -16 as kOffset, or Q4_1/Q5_1's m) is applied once per
// block through the activation block's code sum.
template <typename Packed>
int code_nibble(const Packed& b, int r, int k) { return nibble_x8(b.qs, r, k); }

template <typename Packed>
int code_q5(const Packed& b, int r, int k) {
  return nibble_x8(b.qs, r, k) | ((b.qh[r * 4 + k % 4] >> (k / 4)) & 1) << 4;
}
int code_iq4_nl(const BlockIQ4_NLx8& b, int r, int k) { return kIq4nlValues[nibble_x8(b.qs, r, k)]; }

// Q4_1, Q5_1 (value = d * code + m): m times the activation block's code sum is a second
// multiply-add.
template <typename Block, int (*Code)(const Block&, int, int), int kOffset>
void gemm_32_scalar(int n, const uint8_t* w, const uint8_t* xq, size_t xs, const Q8BlockInfo* xinfo, size_t xinfo_stride,
                    int ntok, float* out) {
  const Block* b = reinterpret_cast<const Block*>(w);
  for (int t = 0; t < ntok; ++t)
    for (int r = 0; r < 8; ++r) {
      float acc = 0.f;
      for (int64_t ib = 0; ib < n / 32; ++ib) {
        const BlockQ8_0& y = q8_0_at(xq, xs, t, ib);
        int32_t s = 0;
        for (int k = 0; k < 32; ++k) s += Code(b[ib], r, k) * y.qs[k];
        const Q8BlockInfo& yi = xinfo[t * xinfo_stride + ib];
        if (kOffset) s -= kOffset * yi.sum;
        const float scale = fp16_to_fp32(b[ib].d[r]) * yi.d;
        acc = std::fma(scale, static_cast<float>(s), acc);
        if constexpr (requires { b[ib].m; }) acc = std::fma(fp16_to_fp32(b[ib].m[r]) * yi.d, static_cast<float>(yi.sum), acc);
      }
      out[t * 8 + r] = acc;
    }
}

// The 256-value formats: per block, the exact integer total of sub-scale times sub-block dot
// product (F::isum) goes into one fused multiply-add of d * y.d. Formats with mins give F::msum:
// Q4_K and Q5_K take it into the same chain; Q2_K sums it apart and subtracts it at the end. These
// are the float steps of the SIMD kernels (Q2_K, Q3_K, TQ2_0: of the file-layout dotq too, so
// both layouts give the same bits).
enum class Mins { None, InChain, Apart };

template <typename F>
void gemm_k_scalar(int n, const uint8_t* w, const uint8_t* xq, size_t xs, const Q8BlockInfo*, size_t, int ntok, float* out) {
  const auto* b = reinterpret_cast<const typename F::Packed*>(w);
  for (int t = 0; t < ntok; ++t)
    for (int r = 0; r < 8; ++r) {
      float acc = 0.f, mins = 0.f;
      for (int64_t ib = 0; ib < n / 256; ++ib) {
        const BlockQ8_K& y = q8_k_at(xq, xs, t, ib);
        float d = fp16_to_fp32(b[ib].d[r]);
        if constexpr (requires { F::kD; }) d *= F::kD;  // the file kernel's block factor
        acc = std::fma(d * y.d, static_cast<float>(F::isum(b[ib], r, y)), acc);
        if constexpr (F::kMins == Mins::InChain)
          acc = std::fma(-(fp16_to_fp32(b[ib].dmin[r]) * y.d), static_cast<float>(F::msum(b[ib], r, y)), acc);
        if constexpr (F::kMins == Mins::Apart)
          mins += y.d * (fp16_to_fp32(b[ib].dmin[r]) * static_cast<float>(F::msum(b[ib], r, y)));
      }
      out[t * 8 + r] = F::kMins == Mins::Apart ? acc - mins : acc;
    }
}

// Sum over the sub-blocks of kLen values of sc(s) times the sub-block's dot product of code(k)
// (k = 0..255) with the activations.
template <int kLen, typename Scale, typename Code>
int32_t scaled_sums(const BlockQ8_K& y, Scale sc, Code code) {
  int32_t isum = 0;
  for (int s = 0; s < 256 / kLen; ++s) {
    int32_t dot = 0;
    for (int k = kLen * s; k < kLen * s + kLen; ++k) dot += code(k) * y.qs[k];
    isum += sc(s) * dot;
  }
  return isum;
}

template <typename P>
struct SumQ45_K {
  using Packed = P;
  static constexpr Mins kMins = Mins::InChain;
  static int32_t isum(const P& b, int r, const BlockQ8_K& y) {
    return scaled_sums<32>(y, [&](int s) { return b.sc[s][r]; }, [&](int k) {
      const int s = k / 32, l = k % 32;
      const int at = (l / 4) * 32 + r * 4 + l % 4;
      const uint8_t v = b.qs[(s / 2) * 256 + at];
      int code = s % 2 ? v >> 4 : v & 15;
      if constexpr (requires { b.qh; }) code |= ((b.qh[at] >> s) & 1) << 4;
      return code;
    });
  }
  static int32_t msum(const P& b, int r, const BlockQ8_K& y) {
    int32_t msum = 0;
    for (int s = 0; s < 8; ++s) msum += b.mn[s][r] * (y.bsums[2 * s] + y.bsums[2 * s + 1]);
    return msum;
  }
};

// Q2_K, Q3_K, TQ2_0: code k (0..255) of row r: bits 2j of qs byte 4g+i, k = 128h + 32j + 4(g%8) + i.
int code2_x8(const uint8_t* qs, int r, int k) {
  const int h = k / 128, j = (k % 128) / 32, l = k % 32;
  return (qs[(8 * h + l / 4) * 32 + r * 4 + l % 4] >> (2 * j)) & 3;
}

struct SumQ2_K {
  using Packed = BlockQ2_Kx8;
  static constexpr Mins kMins = Mins::Apart;
  static int32_t isum(const Packed& b, int r, const BlockQ8_K& y) {
    return scaled_sums<16>(y, [&](int s) { return b.sc[s][r] & 15; }, [&](int k) { return code2_x8(b.qs, r, k); });
  }
  static int32_t msum(const Packed& b, int r, const BlockQ8_K& y) {
    int32_t msum = 0;
    for (int s = 0; s < 16; ++s) msum += (b.sc[s][r] >> 4) * y.bsums[s];
    return msum;
  }
};

struct SumQ3_K {
  using Packed = BlockQ3_Kx8;
  static constexpr Mins kMins = Mins::None;
  static int32_t isum(const Packed& b, int r, const BlockQ8_K& y) {
    return scaled_sums<16>(y, [&](int s) { return b.sc[s][r]; }, [&](int k) {
      const int l = k % 32, bit = k / 32;  // bit 4h + j of the high-mask byte
      const int high = (b.hm[(l / 4) * 32 + r * 4 + l % 4] >> bit) & 1;
      return code2_x8(b.qs, r, k) - (high ? 0 : 4);
    });
  }
};

struct SumTQ2_0 {
  using Packed = BlockTQ2_0x8;
  static constexpr Mins kMins = Mins::None;
  static int32_t isum(const Packed& b, int r, const BlockQ8_K& y) {
    return scaled_sums<16>(y, [](int) { return 1; }, [&](int k) { return code2_x8(b.qs, r, k) - 1; });
  }
};

// Q6_K: unsigned 6-bit codes; the offset of 32 comes off through the activations' 16-value sums.
struct SumQ6_K {
  using Packed = BlockQ6_Kx8;
  static constexpr Mins kMins = Mins::None;
  static int32_t isum(const Packed& b, int r, const BlockQ8_K& y) {
    int32_t off = 0;
    for (int s = 0; s < 16; ++s) off += b.sc[s][r] * y.bsums[s];
    return scaled_sums<16>(y, [&](int s) { return b.sc[s][r]; }, [&](int k) {
      const int G = k / 4, H = G % 16, m = G / 16, at = r * 4 + k % 4;
      if (m < 3) return b.q[(3 * H + m) * 32 + at] & 63;
      int code = 0;
      for (int p = 0; p < 3; ++p) code |= (b.q[(3 * H + p) * 32 + at] >> 6) << (2 * p);
      return code;
    }) - 32 * off;
  }
};

struct SumIQ4_XS {
  using Packed = BlockIQ4_XSx8;
  static constexpr Mins kMins = Mins::None;
  static int32_t isum(const Packed& b, int r, const BlockQ8_K& y) {
    return scaled_sums<32>(y, [&](int s) { return b.sc[s][r]; },
                           [&](int k) { return kIq4nlValues[nibble_x8(b.qs + k / 32 * 128, r, k % 32)]; });
  }
};

// The lattice i-quants: signed values from the codes; the block factors and integer totals of the
// file-layout kernels (d / 8 for IQ2, d / 4 for IQ3_XXS, d for IQ3_S; sub-scales 2s + 1), so both
// layouts give the same bits.
template <typename P>  // BlockIQ2Levelsx8, BlockIQ2XXSLevelsx8
struct SumIQ2Levels {
  using Packed = P;
  static constexpr Mins kMins = Mins::None;
  static constexpr float kD = 0.125f;
  static int32_t isum(const Packed& b, int r, const BlockQ8_K& y) {
    return scaled_sums<16>(y, [&](int s) { return b.sc[iq2_scale_row<P>(s)][r]; }, [&](int k) {
      const int l = k % 32, sign = (b.hm[(l / 4) * 32 + r * 4 + l % 4] >> (k / 32)) & 1;
      return kIq2LevelValues[code2_x8(b.qs, r, k) | sign << 2];
    });
  }
};
// IQ1: the unsigned codes u = 8 (g + 1) + delta + 1, and the offset of 9 times the sub-scaled
// 16-value activation sums.
int iq1_code(const BlockIQ1Codesx8& b, int r, int k) { return 8 * code2_x8(b.qs, r, k) + 2 * ((b.plus[r] >> (k / 8)) & 1); }
int iq1_scale(const BlockIQ1Codesx8& b, int r, int s) { return (b.sc[s / 2][r] >> (4 * (s % 2))) & 15; }
struct SumIQ1Codes {
  using Packed = BlockIQ1Codesx8;
  static constexpr Mins kMins = Mins::None;
  static constexpr float kD = 0.125f;
  static int32_t isum(const Packed& b, int r, const BlockQ8_K& y) {
    int32_t off = 0;
    for (int s = 0; s < 16; ++s) off += iq1_scale(b, r, s) * y.bsums[s];
    return scaled_sums<16>(y, [&](int s) { return iq1_scale(b, r, s); }, [&](int k) { return iq1_code(b, r, k); }) - 9 * off;
  }
};
template <const std::array<int8_t, 16>& kValues, int kDivisor>  // values carry d / kDivisor
struct SumIQ3Levels {
  using Packed = BlockIQ3Levelsx8;
  static constexpr Mins kMins = Mins::None;
  static constexpr float kD = 1.f / kDivisor;
  static int32_t isum(const Packed& b, int r, const BlockQ8_K& y) {
    return scaled_sums<32>(y, [&](int s) { return b.sc[s][r]; },
                           [&](int k) { return kValues[nibble_x8(b.qs + k / 32 * 128, r, k % 32)]; });
  }
};

// F16, BF16: one chain per output over the columns in order.
template <float (*Widen)(uint16_t)>
void gemm_half_scalar(int n, const uint8_t* w, const uint8_t* xq, size_t xs, const Q8BlockInfo*, size_t, int ntok,
                      float* out) {
  const uint16_t* v = reinterpret_cast<const uint16_t*>(w);
  for (int t = 0; t < ntok; ++t) {
    const float* x = reinterpret_cast<const float*>(xq + xs * t);
    for (int r = 0; r < 8; ++r) {
      float a = 0.f;
      for (int k = 0; k < n; ++k) a = std::fma(Widen(v[k * kHalfColumnHalves + r]), x[k], a);
      out[t * 8 + r] = a;
    }
  }
}

// Several groups: one group at a time.
template <GemmX8Fn F>
void groups_scalar(int n, const uint8_t* w, size_t gs, int ngroups, const uint8_t* xq, size_t xs, const Q8BlockInfo* xi,
                   size_t xis, int ntok, float* out, size_t os) {
  for (int g = 0; g < ngroups; ++g) {
    float one[8 * kPackMaxTokens];
    F(n, w + gs * g, xq, xs, xi, xis, ntok, one);
    for (int t = 0; t < ntok; ++t) std::memcpy(out + os * t + 8 * g, one + 8 * t, 8 * sizeof(float));
  }
}

}  // namespace

void decode_one_group_per_call(KernelTable& t) {
  for (int ty = 0; ty < kMaxTypes; ++ty)
    if (t.groups_per_call[ty] > 1 && packed_block_groups(static_cast<GgmlType>(ty)) == 1) t.decode_groups_per_call[ty] = 1;
}

void share_tq1_0_packed_kernels(KernelTable& t) {
  const int from = static_cast<int>(GgmlType::TQ2_0), to = static_cast<int>(GgmlType::TQ1_0);
  t.gemm_x8[to] = t.gemm_x8[from];
  t.gemm_groups[to] = t.gemm_groups[from];
  t.groups_per_call[to] = t.groups_per_call[from];
  t.decode_groups_per_call[to] = t.decode_groups_per_call[from];
  t.decode_packed8[to] = t.decode_packed8[from];
}

void fill_scalar_gemm_x8(KernelTable& t) {
  t.gemm_x8[static_cast<int>(GgmlType::Q8_0)] = gemm_32_scalar<BlockQ8_0x8, code_q8_0, 0>;
  t.gemm_x8[static_cast<int>(GgmlType::Q4_0)] = gemm_32_scalar<BlockQ4_0x8, code_nibble<BlockQ4_0x8>, 8>;
  t.gemm_x8[static_cast<int>(GgmlType::Q5_0)] = gemm_32_scalar<BlockQ5_0x8, code_q5<BlockQ5_0x8>, 16>;
  t.gemm_x8[static_cast<int>(GgmlType::Q4_1)] = gemm_32_scalar<BlockQ4_1x8, code_nibble<BlockQ4_1x8>, 0>;
  t.gemm_x8[static_cast<int>(GgmlType::Q5_1)] = gemm_32_scalar<BlockQ5_1x8, code_q5<BlockQ5_1x8>, 0>;
  t.gemm_x8[static_cast<int>(GgmlType::IQ4_NL)] = gemm_32_scalar<BlockIQ4_NLx8, code_iq4_nl, 0>;
  t.gemm_x8[static_cast<int>(GgmlType::Q2_K)] = gemm_k_scalar<SumQ2_K>;
  t.gemm_x8[static_cast<int>(GgmlType::Q3_K)] = gemm_k_scalar<SumQ3_K>;
  t.gemm_x8[static_cast<int>(GgmlType::TQ2_0)] = gemm_k_scalar<SumTQ2_0>;
  t.gemm_x8[static_cast<int>(GgmlType::Q4_K)] = gemm_k_scalar<SumQ45_K<BlockQ4_Kx8>>;
  t.gemm_x8[static_cast<int>(GgmlType::Q5_K)] = gemm_k_scalar<SumQ45_K<BlockQ5_Kx8>>;
  t.gemm_x8[static_cast<int>(GgmlType::Q6_K)] = gemm_k_scalar<SumQ6_K>;
  t.gemm_x8[static_cast<int>(GgmlType::IQ4_XS)] = gemm_k_scalar<SumIQ4_XS>;
  t.gemm_x8[static_cast<int>(GgmlType::IQ2_XXS)] = gemm_k_scalar<SumIQ2Levels<BlockIQ2XXSLevelsx8>>;
  for (GgmlType iq2 : {GgmlType::IQ2_XS, GgmlType::IQ2_S}) t.gemm_x8[static_cast<int>(iq2)] = gemm_k_scalar<SumIQ2Levels<BlockIQ2Levelsx8>>;
  for (GgmlType iq1 : {GgmlType::IQ1_S, GgmlType::IQ1_M}) t.gemm_x8[static_cast<int>(iq1)] = gemm_k_scalar<SumIQ1Codes>;
  t.gemm_x8[static_cast<int>(GgmlType::IQ3_XXS)] = gemm_k_scalar<SumIQ3Levels<kIq3xxsCodeValues, 4>>;
  t.gemm_x8[static_cast<int>(GgmlType::IQ3_S)] = gemm_k_scalar<SumIQ3Levels<kIq3sCodeValues, 1>>;
  t.gemm_x8[static_cast<int>(GgmlType::F16)] = gemm_half_scalar<fp16_to_fp32>;
  t.gemm_x8[static_cast<int>(GgmlType::BF16)] = gemm_half_scalar<bf16_to_fp32>;
  // The same group counts per call as the SIMD tables (the bits do not depend on them).
  t.gemm_groups[static_cast<int>(GgmlType::F16)] = groups_scalar<gemm_half_scalar<fp16_to_fp32>>;
  t.gemm_groups[static_cast<int>(GgmlType::BF16)] = groups_scalar<gemm_half_scalar<bf16_to_fp32>>;
  t.gemm_groups[static_cast<int>(GgmlType::Q4_0)] = groups_scalar<gemm_32_scalar<BlockQ4_0x8, code_nibble<BlockQ4_0x8>, 8>>;
  t.gemm_groups[static_cast<int>(GgmlType::Q5_0)] = groups_scalar<gemm_32_scalar<BlockQ5_0x8, code_q5<BlockQ5_0x8>, 16>>;
  t.groups_per_call[static_cast<int>(GgmlType::F16)] = kHalfBlockGroups;
  t.groups_per_call[static_cast<int>(GgmlType::BF16)] = kHalfBlockGroups;
  t.groups_per_call[static_cast<int>(GgmlType::Q4_0)] = 2;
  t.groups_per_call[static_cast<int>(GgmlType::Q5_0)] = 2;
  share_tq1_0_packed_kernels(t);
}

}  // namespace strata
