// Decode of the grid i-quants on AVX-512 with BITALG and VBMI (Ice Lake and later, Zen 4): the
// integer block totals and float steps of dotq_grid_rows512 (dot_avx512.cpp), so the same bits,
// with fewer instructions. Two ways:
//   - IQ2_S keeps the same 32 table loads per block, in an order that suits it ("lanes",
//     below);
//   - IQ2_XXS, IQ2_XS, IQ3_XXS and IQ3_S take no table loads at all ("planes", further down):
//     their grids are codes in registers, looked up with VBMI's byte permutes, and the
//     activations are copied into the order those lookups give; IQ3_XXS and IQ3_S decode
//     prompts' weight rows from the same tables.
//
// Lanes: that kernel takes a block's 32 grid entries in file order, 8 per gather, so its indices need
// widening shuffles, its signs one mask move per gather, and its sub-scales one permute per
// gather. Here gather m (0..3) takes entries m, 4 + m, ..., 28 + m: entry 4k + m belongs in
// 64-bit lane k (32k + 8m .. 32k + 8m + 7 are its values), where the format keeps what
// it needs in lane k of one vector, so
//   - its indices come out of lane k with a shift and an and (vpgatherqq takes 64-bit indices);
//   - its 64 sign bits come out of lane k with one vpshufbitqmb: no mask moves;
//   - its sub-scale is the same for all of lane k (entries m = 0, 1 and m = 2, 3 share one), so
//     one shuffle and shifts make every scale vector a block needs;
//   - the activations are read in the same order: each call first copies its Q8_K values with
//     their 8-byte groups transposed (group 8m + k of a block's copy is group 4k + m).
// Compiled with those ISA flags and only called after the CPU check in kernels.cpp.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "backend/thread_scratch.h"
#include "quant/formats.h"
#include "quant/gemm_x8.h"
#include "quant/iq_tables.h"
#include "quant/kernels.h"
#include "quant/simd_avx2_blocks.h"
#include "quant/simd_avx512.h"

namespace strata {

namespace {

// The Q8_K values of n columns in gather order (see above); d is read from the blocks themselves.
const int8_t* transposed_activations(int n, const uint8_t* xq) {
  auto* buf = static_cast<uint64_t*>(thread_scratch(ScratchSlot::BitalgGatherOrder, static_cast<size_t>(n / 256) * 32 * 8));
  const auto* y = reinterpret_cast<const BlockQ8_K*>(xq);
  for (int i = 0; i < n / 256; ++i)
    for (int m = 0; m < 4; ++m)
      for (int k = 0; k < 8; ++k) std::memcpy(&buf[32 * i + 8 * m + k], y[i].qs + 8 * (4 * k + m), 8);
  return reinterpret_cast<const int8_t*>(buf);
}

// vpshufbitqmb control that takes bits first, first + 1, ..., first + 7 of every 64-bit lane.
constexpr uint64_t bit_run(int first) {
  uint64_t c = 0;
  for (int t = 0; t < 8; ++t) c |= static_cast<uint64_t>(first + t) << (8 * t);
  return c;
}
// x with bit 7 of every byte replaced by the parity of its bits 0..6 (the 8th sign of IQ2_XXS and
// IQ2_XS: an even count of negative values per 8).
inline __m512i with_parity_bit7(__m512i x) {
  const __m512i low7 = _mm512_and_si512(x, _mm512_set1_epi8(0x7F));
  return _mm512_ternarylogic_epi32(low7, _mm512_slli_epi16(_mm512_popcnt_epi8(low7), 7), _mm512_set1_epi8(static_cast<char>(0x80)),
                                   0xF8);  // low7 | (count << 7 & 0x80)
}
// The sub-scales as 16-bit multipliers 2s + 1 from bytes in 16-bit lanes: the low nibble, the high one.
inline __m512i odd_low_nibble(__m512i b) {
  return _mm512_ternarylogic_epi32(_mm512_slli_epi16(b, 1), _mm512_set1_epi16(0x1E), _mm512_set1_epi16(1), 0xEA);
}
inline __m512i odd_high_nibble(__m512i b) {
  return _mm512_ternarylogic_epi32(_mm512_srli_epi16(b, 3), _mm512_set1_epi16(0x1E), _mm512_set1_epi16(1), 0xEA);
}
// vpshufb control that puts byte k of 8 bytes broadcast to every 64-bit lane in all four 16-bit
// lanes of lane k.
inline __m512i lane_byte_to_words() {
  const uint64_t w = 0x8000800080008000ull, k = 0x0001000100010001ull;
  return _mm512_setr_epi64(w, w | k, w | 2 * k, w | 3 * k, w | 4 * k, w | 5 * k, w | 6 * k, w | 7 * k);
}

inline __mmask64 load_mask64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return _cvtu64_mask64(v);
}
// A constant vector's lanes (T: bytes, 16- or 32-bit lanes) from a rule per lane.
template <class T, class Fn>
std::array<T, 64 / sizeof(T)> make_lanes(Fn f) {
  std::array<T, 64 / sizeof(T)> c{};
  for (size_t j = 0; j < c.size(); ++j) c[j] = static_cast<T>(f(static_cast<int>(j)));
  return c;
}
template <class T>
__m512i load_table(const T& values) {
  static_assert(sizeof(values) == 64);
  return _mm512_loadu_si512(values.data());
}
inline long long load8(const uint8_t* p) {
  long long v;
  std::memcpy(&v, p, 8);
  return v;
}

// Per format: prepare(block) -> Lanes, where lane k of q holds entry 4k + m's grid index at bit
// kIndexShift * m (kIndexMask wide), lane k of s its 8 signs at bits kSignBit + kSignShift * m
// onwards, and scale[h] the 16-bit multipliers of entries m = 2h, 2h + 1.
struct Lanes {
  __m512i q, s, scale[2];
};
template <class F>
__m512i lane_index(const Lanes& l, int m) {
  return _mm512_and_si512(m == 0 ? l.q : _mm512_srli_epi64(l.q, F::kIndexShift * m), _mm512_set1_epi64(F::kIndexMask));
}
template <class F>
__mmask64 lane_signs(const Lanes& l, int m) {
  return _mm512_bitshuffle_epi64_mask(l.s, _mm512_set1_epi64(static_cast<long long>(bit_run(F::kSignBit + F::kSignShift * m))));
}
// IQ2_S: byte k of the 8 scale bytes holds the nibbles of lane k's entries 0, 1 (low)
// and 2, 3 (high).
inline void nibble_scales(const uint8_t* scales, Lanes& l) {
  const __m512i sc = _mm512_shuffle_epi8(_mm512_set1_epi64(load8(scales)), lane_byte_to_words());
  l.scale[0] = odd_low_nibble(sc);
  l.scale[1] = odd_high_nibble(sc);
}

struct LanesIQ2_S {
  using Block = BlockIQ2_S;
  static float d(const Block& b) { return h2f(b.d) * 0.125f; }
  static const uint64_t* table(const iq::Tables& t) { return t.iq2s; }
  // Entry e's index: qs[e] | bits 2(e % 4), 2(e % 4) + 1 of qh[e / 4] << 8, built as 16-bit
  // lanes (lane k: entries 4k..4k+3); its signs: byte e of signs, as stored.
  static Lanes prepare(const Block& b) {
    Lanes l;
    const __m512i lo = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)));
    const __m512i qh = _mm512_shuffle_epi8(_mm512_set1_epi64(load8(b.qh)), lane_byte_to_words());
    const __m512i hi = _mm512_sllv_epi16(qh, _mm512_set1_epi64(0x0002000400060008));  // entry m: << (8 - 2m)
    l.q = _mm512_ternarylogic_epi32(lo, hi, _mm512_set1_epi16(0x300), 0xF8);           // lo | (hi & 0x300)
    l.s = _mm512_cvtepu32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.signs)));
    nibble_scales(b.scales, l);
    return l;
  }
  static constexpr int kIndexShift = 16, kIndexMask = 1023;
  static constexpr int kSignBit = 0, kSignShift = 8;
};

template <class F, int NR>
void dotq_lanes_rows(int n, const uint8_t* w, size_t ws, const uint8_t* xq, const int8_t* yt, float* out) {
  using Block = typename F::Block;
  const uint64_t* table = F::table(iq::tables());
  const auto* y = reinterpret_cast<const BlockQ8_K*>(xq);
  const int nb = n / 256;
  // block i's integer totals and float factors per row
  auto block = [&](int i, __m512i* tot, float* dy) {
    __m512i yv[4];
    for (int m = 0; m < 4; ++m) yv[m] = _mm512_loadu_si512(yt + 256 * i + 64 * m);
    STRATA_UNROLL for (int r = 0; r < NR; ++r) {
      const Block* b = reinterpret_cast<const Block*>(w + r * ws) + i;
      prefetch_codes_ahead(b);
      const Lanes l = F::prepare(*b);
      __m512i p[4];
      STRATA_UNROLL for (int m = 0; m < 4; ++m) {
        const __m512i ys = _mm512_mask_sub_epi8(yv[m], lane_signs<F>(l, m), _mm512_setzero_si512(), yv[m]);
        p[m] = _mm512_maddubs_epi16(_mm512_i64gather_epi64(lane_index<F>(l, m), table, 8), ys);
      }
      // Entries 2h and 2h + 1 share a scale: their 16-bit sums add first (4 products of at most
      // 43 * 127 each, below 2^15).
      tot[r] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_add_epi16(p[0], p[1]), l.scale[0]),
                                   _mm512_add_epi16(p[2], p[3]), l.scale[1]);
      dy[r] = F::d(*b) * y[i].d;
    }
  };
  sum_blocks<NR>(nb, block, out);
}

// A QDotRowsFn from a kernel on NR = 2 rows and one on an odd last row, each given the call's
// copy of the activations (made by Copy).
using RowsKernel = void (*)(int, const uint8_t*, size_t, const uint8_t*, const int8_t*, float*);
template <const int8_t* (*Copy)(int, const uint8_t*), RowsKernel Two, RowsKernel One>
void by_two_rows(int n, const uint8_t* w, size_t row_stride, int nrows, const uint8_t* xq, float* out) {
  const int8_t* yc = Copy(n, xq);
  int r = 0;
  for (; r + 2 <= nrows; r += 2) Two(n, w + r * row_stride, row_stride, xq, yc, out + r);
  if (r < nrows) One(n, w + r * row_stride, row_stride, xq, yc, out + r);
}
template <class F>
constexpr QDotRowsFn dotq_lanes = by_two_rows<transposed_activations, dotq_lanes_rows<F, 2>, dotq_lanes_rows<F, 1>>;

// IQ2_XXS's and IQ3_XXS's chunk words (32-bit lanes of q): four 7-bit sign fields, bytes of
// signs once their parity is added (bit v of a row's 256: value v's sign), and the chunk's scale
// in bits 28..31, wanted as 2s + 1.
inline __m512i chunk_word_signs(__m512i q) {
  const __m512i u = _mm512_ternarylogic_epi32(q, _mm512_slli_epi32(q, 2), _mm512_set1_epi32(0x3FFF), 0xE4);
  return with_parity_bit7(_mm512_ternarylogic_epi32(u, _mm512_slli_epi32(u, 1), _mm512_set1_epi32(0x007F007F), 0xE4));
}
inline __m512i chunk_word_odd(__m512i q) {
  return _mm512_ternarylogic_epi32(_mm512_srli_epi32(q, 27), _mm512_set1_epi32(0x1E), _mm512_set1_epi32(1), 0xEA);
}
// The distinct bytes (levels) of a grid's entries, ascending, and each byte's number among them;
// there must be `count` of them.
struct GridLevels {
  uint8_t level[256];   // level[i]: the i-th smallest
  uint8_t number[256];  // number[v]: which level byte v is
  uint8_t operator[](int i) const { return level[i]; }
};
template <class Entry>
GridLevels grid_levels(const Entry* grid, int entries, int count) {
  bool seen[256] = {};
  for (int e = 0; e < entries; ++e)
    for (size_t k = 0; k < sizeof(Entry); ++k) seen[static_cast<uint8_t>(grid[e] >> (8 * k))] = true;
  GridLevels l{};
  int n = 0;
  for (int v = 0; v < 256; ++v)
    if (seen[v]) {
      l.number[v] = static_cast<uint8_t>(n);
      l.level[n++] = static_cast<uint8_t>(v);
    }
  if (n != count) throw std::logic_error("grid levels: not the count the decode assumes");
  return l;
}
// The number of level v (its low byte).
inline int level_number(const GridLevels& levels, uint64_t v) { return levels.number[static_cast<uint8_t>(v)]; }
// IQ3_XXS and IQ3_S without gathers (VBMI): their grids have 256 and 512 entries of 4 values,
// each one of 8 levels, so an entry's values 2h and 2h + 1 are a 6-bit code (level numbers
// c0 + 8 c1), and code plane h is a 256- or 512-byte table (four or eight registers) that two or
// four vpermi2b and blends on the index's top bits look up for 64 indices at once; one vpermb
// per value then turns codes into levels (a 64-byte table each). So one block row's indices give
// four "planes" of magnitudes, plane p holding values 4e + p (e = 0..63), in 4 (IQ3_S: 8)
// vpermi2b and 4 vpermb where the gather kernels take 4 gathers of 16 entries. The activations
// are copied in plane order once per call (plane p of a block: the magnitudes of its values
// 4e + p), with one more plane of their signs (bit p of byte e: value 4e + p), and a row's sign
// nibbles are spread to one byte per entry the same way, so one xor gives every product's sign;
// bit p of it goes to bit 5 of plane p's level lookup (a shift and a bit select on the code, or
// on the code shifted right by 3 for a code's second value), whose table holds the negated
// levels from 32 on, and vpdpbusd multiplies signed levels by unsigned magnitudes. Every
// plane's 32-bit lane m (entries 4m .. 4m + 3) lies in one 32-value chunk, so one multiply by
// the chunk scales ends the block. The block's integer total is the one every kernel of the
// format forms and the float step is sum_blocks', so the bits are those of dot_avx512.cpp's
// gather kernels.
// H code planes of a grid of Entries entries, and L tables from code to level (one per value a
// code holds).
template <int H, int Entries, int L = H>
struct CodePlanes {
  static constexpr int kEntries = Entries;
  alignas(64) uint8_t codes[H][Entries];
  alignas(64) uint8_t level[L][64];
};
// 3-bit grids: entry e's values 2h, 2h + 1 as level numbers c0 + 8 c1; code c's first value is
// level c % 8, its second level c / 8 (tables 0, 1: the prefill decode's); table 2 maps index i
// to level i % 8, negated where bit 5 of i is set (the dot kernel's).
template <int Entries>
CodePlanes<2, Entries, 3> code_planes(const uint32_t* grid) {
  CodePlanes<2, Entries, 3> t{};
  const GridLevels levels = grid_levels(grid, Entries, 8);
  auto number = [&](uint32_t v) { return level_number(levels, v); };
  for (int e = 0; e < Entries; ++e)
    for (int h = 0; h < 2; ++h) t.codes[h][e] = static_cast<uint8_t>(number(grid[e] >> (16 * h)) + 8 * number(grid[e] >> (16 * h + 8)));
  for (int c = 0; c < 64; ++c) {
    t.level[0][c] = levels[c % 8];
    t.level[1][c] = levels[c / 8];
    t.level[2][c] = static_cast<uint8_t>((c & 32 ? -1 : 1) * levels[c % 8]);
  }
  return t;
}
// A call's Q8_K values reordered into kPlanes 64-byte planes per block, as magnitudes, and one
// more plane of their signs (block i's plane p at bytes 64 (kStride i + p) onwards): byte j of
// plane p is the magnitude of value source(p, j) of the block, bit p of the signs' byte j is
// set where that value is negative.
template <int kPlanes, class Source>
const int8_t* activation_planes(int n, const uint8_t* xq, Source) {
  constexpr int kStride = kPlanes + 1;
  struct Controls {
    std::array<std::array<uint8_t, 64>, kPlanes> ctl;  // vpermt2b control of plane p
    std::array<uint64_t, kPlanes> upper;                // bytes taken from values 128..255
  };
  static constexpr Controls kControls = [] {
    Controls c{};
    for (int p = 0; p < kPlanes; ++p)
      for (int j = 0; j < 64; ++j) {
        c.ctl[p][j] = static_cast<uint8_t>(Source{}(p, j) & 127);
        c.upper[p] |= static_cast<uint64_t>(Source{}(p, j) >= 128) << j;
      }
    return c;
  }();
  constexpr ScratchSlot kSlot = kPlanes == 4 ? ScratchSlot::BitalgPlanes4 : ScratchSlot::BitalgPlanes8;
  static_assert(kPlanes == 4 || kPlanes == 8);
  auto* buf = static_cast<uint64_t*>(thread_scratch(kSlot, static_cast<size_t>(n / 256) * 8 * kStride * 8));
  const auto* y = reinterpret_cast<const BlockQ8_K*>(xq);
  for (int i = 0; i < n / 256; ++i) {
    __m512i v[4], signs = _mm512_setzero_si512();
    for (int k = 0; k < 4; ++k) v[k] = _mm512_loadu_si512(y[i].qs + 64 * k);
    STRATA_UNROLL for (int p = 0; p < kPlanes; ++p) {
      const __m512i ctl = load_table(kControls.ctl[p]);
      const __m512i plane = _mm512_mask_blend_epi8(_cvtu64_mask64(kControls.upper[p]), _mm512_permutex2var_epi8(v[0], ctl, v[1]),
                                                   _mm512_permutex2var_epi8(v[2], ctl, v[3]));
      signs = _mm512_or_si512(signs, _mm512_maskz_set1_epi8(_mm512_movepi8_mask(plane), static_cast<char>(1 << p)));
      _mm512_storeu_si512(&buf[8 * (kStride * i + p)], _mm512_abs_epi8(plane));
    }
    _mm512_storeu_si512(&buf[8 * (kStride * i + kPlanes)], signs);
  }
  return reinterpret_cast<const int8_t*>(buf);
}
// Plane p: magnitudes of values 4e + p (e = 0..63); then their signs.
const int8_t* plane_magnitudes(int n, const uint8_t* xq) {
  return activation_planes<4>(n, xq, [](int p, int e) { return 4 * e + p; });
}
// 32-bit lane l of the result: 32-bit lane kFirstWord + l / 2 of v (the multiplier of chunk
// l / 2, which holds entries 4l .. 4l + 3).
template <int kFirstWord>
inline __m512i chunk_lanes(__m512i v) {
  static constexpr auto kControl = [] {
    std::array<uint32_t, 16> c{};
    for (int l = 0; l < 16; ++l) c[l] = static_cast<uint32_t>(kFirstWord + l / 2);
    return c;
  }();
  return _mm512_permutexvar_epi32(load_table(kControl), v);
}
// Byte e: entry e's sign nibble (values 4e .. 4e + 3) in bits 0..3, from row R's 32 sign bytes
// at bytes 32 R onwards of raw.
template <int R>
inline __m512i entry_nibbles(__m512i raw) {
  static constexpr auto kControl = [] {
    std::array<uint8_t, 64> c{};
    for (int e = 0; e < 64; ++e) c[e] = static_cast<uint8_t>(32 * R + e / 2);
    return c;
  }();
  const __m512i x = _mm512_permutexvar_epi8(load_table(kControl), raw);
  return _mm512_mask_blend_epi8(0xAAAAAAAAAAAAAAAAull, x, _mm512_srli_epi16(x, 4));  // odd entries: the high nibble
}

// A level lookup's index: base with bit 5 of every byte replaced by bit v of sign's (the signed
// level tables hold the negated levels from 32 on).
__attribute__((always_inline)) inline __m512i sign_into_bit5(__m512i base, __m512i sign, int v) {
  const __m512i s = v < 5 ? _mm512_slli_epi16(sign, 5 - v) : v == 5 ? sign : _mm512_srli_epi16(sign, v - 5);
  return _mm512_ternarylogic_epi32(base, s, _mm512_set1_epi8(0x20), 0xD8);  // bit select
}

// Per block row: its 64 index bytes (idx), bit 8 of each index (high; IQ3_S), its sign nibbles
// (signs, see entry_nibbles), the chunks' multipliers 2s + 1 (scale, see chunk_lanes).
struct PlaneRow {
  __m512i idx, signs, scale;
  __mmask64 high;
};

struct PlanesIQ3_XXS {
  using Block = BlockIQ3_XXS;
  static const CodePlanes<2, 256, 3>& planes() {
    static const CodePlanes<2, 256, 3> p = code_planes<256>(iq::tables().iq3xxs);
    return p;
  }
  static float d(const Block& b) { return h2f(b.d) * 0.25f; }  // d (0.5 + s) / 2 = (d / 4)(2s + 1)
  static __m256i words(const Block& b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.scales_signs)); }
  static __m512i value_signs(const Block& b) { return chunk_word_signs(_mm512_castsi256_si512(words(b))); }
  static __m512i chunk_odd(const Block& b) { return chunk_word_odd(_mm512_castsi256_si512(words(b))); }
  static __mmask64 high(const Block&) { return 0; }
  template <int NR>
  static void prepare(const Block* const* b, PlaneRow* p) {
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(words(*b[0])), words(*b[NR - 1]), 1);
    const __m512i signs = chunk_word_signs(q), odd = chunk_word_odd(q);
    for (int r = 0; r < NR; ++r) {
      p[r].idx = _mm512_loadu_si512(b[r]->qs);
      p[r].high = 0;
      p[r].signs = r == 0 ? entry_nibbles<0>(signs) : entry_nibbles<1>(signs);
      p[r].scale = r == 0 ? chunk_lanes<0>(odd) : chunk_lanes<8>(odd);
    }
  }
};
struct PlanesIQ3_S {
  using Block = BlockIQ3_S;
  static const CodePlanes<2, 512, 3>& planes() {
    static const CodePlanes<2, 512, 3> p = code_planes<512>(iq::tables().iq3s);
    return p;
  }
  static float d(const Block& b) { return h2f(b.d); }
  // Signs as stored (bit v: value v); index bit 8 of entry e is bit e of qh; chunk c's scale is
  // nibble c % 2 of scales[c / 2].
  static __m512i value_signs(const Block& b) { return _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.signs))); }
  static __m512i chunk_odd(const Block& b) {
    uint32_t four;
    std::memcpy(&four, b.scales, 4);
    const __m512i nib = _mm512_srlv_epi32(_mm512_set1_epi32(static_cast<int>(four)), _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0));
    return _mm512_ternarylogic_epi32(_mm512_slli_epi32(nib, 1), _mm512_set1_epi32(0x1E), _mm512_set1_epi32(1), 0xEA);
  }
  static __mmask64 high(const Block& b) { return load_mask64(b.qh); }
  template <int NR>
  static void prepare(const Block* const* b, PlaneRow* p) {
    for (int r = 0; r < NR; ++r) {
      p[r].idx = _mm512_loadu_si512(b[r]->qs);
      p[r].high = high(*b[r]);
      p[r].signs = entry_nibbles<0>(value_signs(*b[r]));
      p[r].scale = chunk_lanes<0>(chunk_odd(*b[r]));
    }
  }
};

// F's code planes and level tables in registers: code(...) looks up code plane h for 64
// indices, magnitudes(idx, high, m) gives a 3-bit grid's planes 0..3.
template <class F>
struct PlaneTables {
  using Planes = std::remove_cvref_t<decltype(F::planes())>;
  static constexpr int kTables = Planes::kEntries / 64, kCodes = std::extent_v<decltype(Planes::codes)>,
                       kLevels = std::extent_v<decltype(Planes::level)>;
  __m512i codes[kCodes][kTables], level[kLevels];
  // Inlined: out of line, every call stored all tables to the stack and loaded them back (the
  // harness on 16 rows of 1024 columns per call: 3-5 % of a call's time).
  __attribute__((always_inline)) PlaneTables() {
    const Planes& planes = F::planes();
    for (int h = 0; h < kCodes; ++h)
      for (int k = 0; k < kTables; ++k) codes[h][k] = _mm512_load_si512(planes.codes[h] + 64 * k);
    for (int k = 0; k < kLevels; ++k) level[k] = _mm512_load_si512(planes.level[k]);
  }
  __m512i code(__m512i idx, __mmask64 upper, __mmask64 high, int h) const {
    __m512i c = _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(codes[h][0], idx, codes[h][1]),
                                       _mm512_permutex2var_epi8(codes[h][2], idx, codes[h][3]));
    if constexpr (kTables == 8)
      c = _mm512_mask_blend_epi8(high, c,
                                 _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(codes[h][4], idx, codes[h][5]),
                                                        _mm512_permutex2var_epi8(codes[h][6], idx, codes[h][7])));
    return c;
  }
  void magnitudes(__m512i idx, __mmask64 high, __m512i* mag) const {
    const __mmask64 upper = _mm512_movepi8_mask(idx);  // index bit 7
    STRATA_UNROLL for (int h = 0; h < 2; ++h) {
      const __m512i c = code(idx, upper, high, h);
      STRATA_UNROLL for (int k = 0; k < 2; ++k) mag[2 * h + k] = _mm512_permutexvar_epi8(c, level[k]);
    }
  }
};

template <class F, int NR>
void dotq_planes_rows(int n, const uint8_t* w, size_t ws, const uint8_t* xq, const int8_t* yp, float* out) {
  using Block = typename F::Block;
  const PlaneTables<F> tables;
  const auto* y = reinterpret_cast<const BlockQ8_K*>(xq);
  auto block = [&](int i, __m512i* tot, float* dy) __attribute__((always_inline)) {
    const int8_t* yb = yp + 320 * i;  // 4 planes and the signs
    const __m512i ysign = _mm512_loadu_si512(yb + 256);
    const Block* b[NR];
    for (int r = 0; r < NR; ++r) {
      b[r] = reinterpret_cast<const Block*>(w + r * ws) + i;
      prefetch_codes_ahead(b[r]);
    }
    PlaneRow rows[NR];
    F::template prepare<NR>(b, rows);
    STRATA_UNROLL for (int r = 0; r < NR; ++r) {
      const PlaneRow& row = rows[r];
      const __m512i sign = _mm512_xor_si512(row.signs, ysign);
      const __mmask64 upper = _mm512_movepi8_mask(row.idx);  // index bit 7
      __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
      STRATA_UNROLL for (int h = 0; h < 2; ++h) {
        const __m512i code = tables.code(row.idx, upper, row.high, h);
        STRATA_UNROLL for (int k = 0; k < 2; ++k) {
          const int p = 2 * h + k;  // table 2 reads index bits 0..2 and 5
          const __m512i idx = sign_into_bit5(k ? _mm512_srli_epi16(code, 3) : code, sign, p);
          acc[k] = _mm512_dpbusd_epi32(acc[k], _mm512_loadu_si512(yb + 64 * p), _mm512_permutexvar_epi8(idx, tables.level[2]));
        }
      }
      // per lane: 16 products of at most 62 * 127, times 2s + 1 <= 31, well inside 32 bits
      tot[r] = _mm512_mullo_epi32(_mm512_add_epi32(acc[0], acc[1]), row.scale);
      dy[r] = F::d(*b[r]) * y[i].d;
    }
  };
  sum_blocks<NR>(n / 256, block, out);
}

template <class F>
constexpr QDotRowsFn dotq_planes = by_two_rows<plane_magnitudes, dotq_planes_rows<F, 2>, dotq_planes_rows<F, 1>>;

// Prefill decode of the same formats (KernelTable::decode_rows8, the DecodedX8Block layout:
// v[G][4r + i] is value i of entry G of row r): the planes' magnitudes go back into entries
// with byte and word unpacks (register k then holds entries 16L + 4k + j at dword 4L + j, L the
// 128-bit lane), take their signs (bit b of register k's mask is the sign of value
// 64L + 16k + b % 16: 16-bit word 4L + k of the row's sign bits), and 8 rows' registers k are
// transposed (dwords, then 128-bit lanes) into 16 entries of v. Same values and sub-scales as
// the AVX2 decode, so the prefill kernels give the same bits.
template <class F>
void decode_rows8_planes(int n, const uint8_t* rows, size_t row_stride, int nrows, uint8_t* out) {
  using Block = typename F::Block;
  const PlaneTables<F> tables;
  const __m512i sign_words = load_table(make_lanes<uint16_t>([](int w) { return w % 8 < 4 ? 4 * (w % 8) + w / 8 : 0; }));  // word 8k + L: word 4L + k
  auto* db = reinterpret_cast<DecodedX8Block*>(out);
  for (int i = 0; i < n / 256; ++i) {
    DecodedX8Block& d = db[i];
    __m512i e[4][8];  // e[k][r]: row r's register k
    __m256i odd[8];   // row r's chunk multipliers 2s + 1
    for (int r = 0; r < 8; ++r) {
      d.d[r] = 0.f;
      odd[r] = _mm256_setzero_si256();
      if (r >= nrows) {
        for (int k = 0; k < 4; ++k) e[k][r] = _mm512_setzero_si512();
      } else {
        const Block& b = reinterpret_cast<const Block*>(rows + r * row_stride)[i];
        d.d[r] = F::d(b);
        odd[r] = _mm512_castsi512_si256(F::chunk_odd(b));
        __m512i mag[4];
        tables.magnitudes(_mm512_loadu_si512(b.qs), F::high(b), mag);
        const __m512i lo01 = _mm512_unpacklo_epi8(mag[0], mag[1]), hi01 = _mm512_unpackhi_epi8(mag[0], mag[1]);
        const __m512i lo23 = _mm512_unpacklo_epi8(mag[2], mag[3]), hi23 = _mm512_unpackhi_epi8(mag[2], mag[3]);
        const __m512i ent[4] = {_mm512_unpacklo_epi16(lo01, lo23), _mm512_unpackhi_epi16(lo01, lo23),
                                _mm512_unpacklo_epi16(hi01, hi23), _mm512_unpackhi_epi16(hi01, hi23)};
        alignas(64) uint64_t masks[8];
        _mm512_store_si512(masks, _mm512_permutexvar_epi16(sign_words, F::value_signs(b)));
        for (int k = 0; k < 4; ++k) e[k][r] = _mm512_mask_sub_epi8(ent[k], _cvtu64_mask64(masks[2 * k]), _mm512_setzero_si512(), ent[k]);
      }
    }
    transpose8x8_epi32(odd);  // odd[c]: chunk c's multiplier of each row
    for (int c = 0; c < 8; ++c) {
      const __m256i pair = _mm256_or_si256(odd[c], _mm256_slli_epi32(odd[c], 16));  // twice as 16 bits
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d.sc[2 * c]), pair);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d.sc[2 * c + 1]), pair);
    }
    std::memset(d.dmin, 0, sizeof(d.dmin));
    std::memset(d.mn, 0, sizeof(d.mn));
    for (int k = 0; k < 4; ++k) {
      const __m512i* a = e[k];
      __m512i t[8], u[8];
      for (int q = 0; q < 4; ++q) {
        t[2 * q] = _mm512_unpacklo_epi32(a[2 * q], a[2 * q + 1]);
        t[2 * q + 1] = _mm512_unpackhi_epi32(a[2 * q], a[2 * q + 1]);
      }
      for (int h = 0; h < 2; ++h) {  // u[4h + j]: entry j of each lane, rows 4h .. 4h + 3
        u[4 * h + 0] = _mm512_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 1] = _mm512_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 2] = _mm512_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
        u[4 * h + 3] = _mm512_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
      }
      for (int j = 0; j < 4; j += 2) {  // entries 16L + 4k + j, j + 1: (u[j], u[4 + j], u[j + 1], u[5 + j]) lane L
        const __m512i s0 = _mm512_shuffle_i32x4(u[j], u[4 + j], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512i s1 = _mm512_shuffle_i32x4(u[j], u[4 + j], _MM_SHUFFLE(3, 2, 3, 2));
        const __m512i s2 = _mm512_shuffle_i32x4(u[j + 1], u[5 + j], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512i s3 = _mm512_shuffle_i32x4(u[j + 1], u[5 + j], _MM_SHUFFLE(3, 2, 3, 2));
        const __m512i o[4] = {_mm512_shuffle_i32x4(s0, s2, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_i32x4(s0, s2, _MM_SHUFFLE(3, 1, 3, 1)),
                              _mm512_shuffle_i32x4(s1, s3, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_i32x4(s1, s3, _MM_SHUFFLE(3, 1, 3, 1))};
        for (int L = 0; L < 4; ++L) _mm512_storeu_si512(d.v[16 * L + 4 * k + j], o[L]);
      }
    }
  }
}

// IQ2_XXS in plane order too: its grid has 256 entries of 8 values, each one of 3 levels, so
// values 4h .. 4h + 2 of an entry are a code below 27 (level numbers c0 + 3 c1 + 9 c2) and with
// value 4h + 3's level number at bits 5, 6 all four fit a byte; code plane h (h = 0, 1) is a
// 256-byte table in registers as above, and one vpermb per value turns codes into levels (values
// 4h .. 4h + 2 from the code's low 6 bits, value 4h + 3 from the code shifted right by 2). A
// block row has 32 entries, so a register holds two rows' (row r's entry e at byte 32r + e; an
// odd last row is paired with itself and its copy dropped), and plane v (v = 0..7) holds values
// 8e + v: 2 code lookups and 8 vpermb per two block rows against 8 gathers of 8 entries. The
// activations are copied as magnitudes in plane order (plane v: values 8e + v, in both halves)
// plus one plane of their signs, in the weights' layout (bit v of byte e: value 8e + v), so one
// xor gives every product's sign; bit v of it goes to bit 5 of the level lookup's index (a shift
// and a bit select), whose tables hold the negated levels at 32 and up, and vpdpbusd multiplies
// signed levels by unsigned magnitudes. 32-bit lane m of every plane holds entries 4m .. 4m + 3
// of the pair, one chunk of one row, so vpdpbusd sums all planes per chunk and one multiply by
// the chunk scales ends the block (row r in lanes 8r .. 8r + 7). IQ2_XS the same way: its grid
// has 512 entries of the same levels (code planes of 8 registers, four vpermt2b and three blends
// per lookup, index bit 8 choosing between halves), and its sub-scales cover 16 values, so
// 16-bit lane m (entries 2m, 2m + 1) has its own: vpmaddubsw per plane, two planes added, and
// vpdpwssd by the scales.
// 2-bit grids: entry e's values 4h + k (k < 3) and 4h + 3 as code c0 + 3 c1 + 9 c2 + 32 c3 for
// plane h; level table k (k < 3) maps index i to level (i % 32 / 3^k) % 3, table 3 index i to
// level (i / 8) % 4, negated where bit 5 of i is set.
template <int Entries>
CodePlanes<2, Entries, 4> code_quads(const uint64_t* grid) {
  CodePlanes<2, Entries, 4> t{};
  const GridLevels levels = grid_levels(grid, Entries, 3);
  auto number = [&](int e, int v) { return level_number(levels, grid[e] >> (8 * v)); };
  for (int e = 0; e < Entries; ++e)
    for (int h = 0; h < 2; ++h)
      t.codes[h][e] = static_cast<uint8_t>(number(e, 4 * h) + 3 * number(e, 4 * h + 1) + 9 * number(e, 4 * h + 2) + 32 * number(e, 4 * h + 3));
  for (int i = 0; i < 64; ++i) {
    const int sign = i & 32 ? -1 : 1;
    for (int k = 0, p = 1; k < 3; ++k, p *= 3) t.level[k][i] = static_cast<uint8_t>(sign * levels[(i % 32 / p) % 3]);
    t.level[3][i] = static_cast<uint8_t>(sign * levels[std::min(i / 8 % 4, 2)]);  // index bits 3, 4: c3 < 3
  }
  return t;
}
// Plane v: magnitudes of values 8e + v (e = 0..31), in both 32-byte halves; then their signs.
const int8_t* plane8_magnitudes(int n, const uint8_t* xq) {
  return activation_planes<8>(n, xq, [](int v, int j) { return 8 * (j % 32) + v; });
}
// A row pair's entries: indices (idx, bit 8 in high), sign bytes (signs: byte j has entry j's 8
// signs, bit 7 the parity of the rest), the scale multipliers 2s + 1 (scale: per 32-bit lane
// where F::kChunkScales, else per 16-bit lane).
struct PairRows {
  __m512i idx, signs, scale;
  __mmask64 high;
};

struct PairsIQ2_XXS {
  using Block = BlockIQ2_XXS;
  static const CodePlanes<2, 256, 4>& planes() {
    static const CodePlanes<2, 256, 4> p = code_quads<256>(iq::tables().iq2xxs);
    return p;
  }
  static float d(const Block& b) { return h2f(b.d) * 0.125f; }  // d (0.5 + s) / 4 = (d / 8)(2s + 1)
  // Chunk c (32 values) is 8 bytes: entries 4c .. 4c + 3's indices, then a word with their four
  // 7-bit sign fields and the chunk's scale in bits 28..31.
  struct Controls {
    __m512i index = load_table(make_lanes<uint8_t>([](int j) { return 64 * (j / 32) + 8 * (j % 32 / 4) + j % 4; }));
    __m512i word = load_table(make_lanes<uint32_t>([](int l) { return 16 * (l / 8) + 2 * (l % 8) + 1; }));
  };
  static PairRows prepare(const Block& b0, const Block& b1, const Controls& c) {
    const __m512i q0 = _mm512_loadu_si512(b0.qs), q1 = _mm512_loadu_si512(b1.qs);
    PairRows p;
    p.idx = _mm512_permutex2var_epi8(q0, c.index, q1);
    const __m512i words = _mm512_permutex2var_epi32(q0, c.word, q1);
    p.signs = chunk_word_signs(words);
    p.scale = chunk_word_odd(words);
    p.high = 0;
    return p;
  }
  static constexpr bool kChunkScales = true;
};
struct PairsIQ2_XS {
  using Block = BlockIQ2_XS;
  static const CodePlanes<2, 512, 4>& planes() {
    static const CodePlanes<2, 512, 4> p = code_quads<512>(iq::tables().iq2xs);
    return p;
  }
  static float d(const Block& b) { return h2f(b.d) * 0.125f; }  // as IQ2_XXS
  // Entry e is word e of qs: a 9-bit index below 7 sign bits; byte c of scales holds chunk c's
  // sub-scales, entries 4c, 4c + 1 in the low nibble.
  struct Controls {
    __m512i low = load_table(make_lanes<uint8_t>([](int j) { return 2 * j; }));
    __m512i high = load_table(make_lanes<uint8_t>([](int j) { return 2 * j + 1; }));
    // 16-bit lane m: scale byte (m % 16) / 2 of row m / 16 (at byte 32 r of the rows' copy)
    __m512i scale = load_table(make_lanes<uint16_t>([](int m) { return 32 * (m / 16) + m % 16 / 2; }));
    __m512i nibble = load_table(make_lanes<uint16_t>([](int m) { return 4 * (m % 2); }));
  };
  static PairRows prepare(const Block& b0, const Block& b1, const Controls& c) {
    const __m512i q0 = _mm512_loadu_si512(b0.qs), q1 = _mm512_loadu_si512(b1.qs);
    PairRows p;
    p.idx = _mm512_permutex2var_epi8(q0, c.low, q1);
    const __m512i hi = _mm512_permutex2var_epi8(q0, c.high, q1);
    p.high = _mm512_movepi8_mask(_mm512_slli_epi16(hi, 7));
    p.signs = with_parity_bit7(_mm512_srli_epi16(hi, 1));
    const __m512i scales = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi64x(load8(b0.scales))), _mm256_set1_epi64x(load8(b1.scales)), 1);
    p.scale = _mm512_ternarylogic_epi32(_mm512_slli_epi16(_mm512_srlv_epi16(_mm512_permutexvar_epi8(c.scale, scales), c.nibble), 1),
                                        _mm512_set1_epi16(0x1E), _mm512_set1_epi16(1), 0xEA);  // (nibble << 1 & 0x1E) | 1
    return p;
  }
  static constexpr bool kChunkScales = false;
};
template <class F, int NR>
void dotq_pairs_rows(int n, const uint8_t* w, size_t ws, const uint8_t* xq, const int8_t* yp, float* out) {
  using Block = typename F::Block;
  const PlaneTables<F> tables;
  const typename F::Controls controls;
  const auto* y = reinterpret_cast<const BlockQ8_K*>(xq);
  auto block = [&](int i, __m512i& tot, float* dy) __attribute__((always_inline)) {
    const Block* b[2];
    for (int r = 0; r < 2; ++r) b[r] = reinterpret_cast<const Block*>(w + (r < NR ? r : 0) * ws) + i;
    for (int r = 0; r < NR; ++r) prefetch_codes_ahead(b[r]);
    const PairRows p = F::prepare(*b[0], *b[1], controls);
    const __mmask64 upper = _mm512_movepi8_mask(p.idx);  // index bit 7
    __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()}, prod[8];  // two chains
    const int8_t* yb = yp + 576 * i;                                                // 8 planes and the signs
    const __m512i sign = _mm512_xor_si512(p.signs, _mm512_loadu_si512(yb + 512));
    STRATA_UNROLL for (int h = 0; h < 2; ++h) {
      const __m512i code = tables.code(p.idx, upper, p.high, h);
      STRATA_UNROLL for (int k = 0; k < 4; ++k) {
        const int v = 4 * h + k;
        const __m512i idx = sign_into_bit5(k == 3 ? _mm512_srli_epi16(code, 2) : code, sign, v);
        const __m512i level = _mm512_permutexvar_epi8(idx, tables.level[k]), ya = _mm512_loadu_si512(yb + 64 * v);
        if constexpr (F::kChunkScales)
          acc[v % 2] = _mm512_dpbusd_epi32(acc[v % 2], ya, level);
        else
          prod[v] = _mm512_maddubs_epi16(ya, level);
      }
    }
    if constexpr (F::kChunkScales) {
      // per lane: 32 products of at most 43 * 127, times 2s + 1 <= 31, well inside 32 bits
      tot = _mm512_mullo_epi32(_mm512_add_epi32(acc[0], acc[1]), p.scale);
    } else {
      // two planes' 16-bit sums add first: 4 products of at most 43 * 127, below 2^15
      tot = _mm512_setzero_si512();
      STRATA_UNROLL for (int v = 0; v < 8; v += 2) tot = _mm512_dpwssd_epi32(tot, _mm512_add_epi16(prod[v], prod[v + 1]), p.scale);
    }
    STRATA_UNROLL for (int r = 0; r < NR; ++r) dy[r] = F::d(*b[r]) * y[i].d;
  };
  sum_pairs<NR>(n / 256, block, out);
}

template <class F>
constexpr QDotRowsFn dotq_pairs = by_two_rows<plane8_magnitudes, dotq_pairs_rows<F, 2>, dotq_pairs_rows<F, 1>>;

}  // namespace

// A harness calling dotq_rows on 64 rows of 4096 random-code columns (L2-resident), min of 400
// alternated runs, ns per row and block, AVX-512 kernel -> this: IQ2_XXS 22.1 -> 17.8, IQ2_XS
// 17.7 -> 17.1, IQ2_S 19.5 -> 17.9 (lanes). Both are bound by their gathers, which here take
// vector-port time as well as load slots (8 independent ALU instructions per gather nearly add
// their own time to it), so fewer instructions around them help less than their count suggests.
// The planes, the same harness, two runs: IQ2_XXS 15.8, 19.6 -> 12.0, 13.9; IQ3_XXS 25.2, 17.7
// -> 14.0, 11.5; IQ3_S 23.9, 24.0 -> 18.0, 17.6 (IQ2_XS and IQ2_S, lanes, in the same runs:
// 14.3, 15.7 -> 14.0, 16.4 and 17.8, 14.9 -> 15.6, 13.1). The planes' prefill decode, calling
// decode_rows8 on 8 rows of 4096 columns, ns per row and block, AVX2 decode -> this: IQ3_XXS
// 56.9 -> 24.3, IQ3_S 63.9 -> 25.7. IQ2_XXS with four values per code, signed level tables and
// vpdpbusd (and the activation copy's controls made constants), the first harness on 64 rows,
// three alternated runs, the version before -> this: 18.2, 18.8, 17.9 -> 12.5, 12.8, 12.3 (1024
// columns), 15.0, 15.1, 14.9 -> 11.3, 10.9, 11.1 (4096); streaming a 200 MB matrix of 1024
// columns in calls of 32 rows, two runs: 29.4, 18.9 -> 17.2, 11.6. IQ2_XS from the lanes kernel
// to the pair kernel, the same three harness runs: 15.1, 19.4, 19.4 -> 13.6, 16.9, 16.4 (1024
// columns), 18.0, 17.9, 17.9 -> 15.0, 15.0, 15.1 (4096); streaming: 16.1, 16.2 -> 14.8, 14.6.
// IQ3_XXS and IQ3_S with the signs in the level lookup and vpdpbusd (as IQ2_XXS), the same three
// runs, the version before -> this: IQ3_XXS 13.2, 14.8, 12.0 -> 12.8, 14.1, 11.6 (1024 columns),
// 11.7, 14.7, 11.1 -> 11.1, 14.2, 10.6 (4096); IQ3_S 15.4, 19.8, 17.3 -> 14.5, 19.1, 17.1 (1024),
// 14.1, 14.9, 14.1 -> 13.3, 13.9, 13.2 (4096).
void fill_avx512_bitalg_kernels(KernelTable& t) {
  t.isa = "avx512vnni+bitalg";
  t.dotq_rows[static_cast<int>(GgmlType::IQ2_XXS)] = dotq_pairs<PairsIQ2_XXS>;
  t.dotq_rows[static_cast<int>(GgmlType::IQ2_XS)] = dotq_pairs<PairsIQ2_XS>;
  t.dotq_rows[static_cast<int>(GgmlType::IQ2_S)] = dotq_lanes<LanesIQ2_S>;
  t.dotq_rows[static_cast<int>(GgmlType::IQ3_XXS)] = dotq_planes<PlanesIQ3_XXS>;
  t.dotq_rows[static_cast<int>(GgmlType::IQ3_S)] = dotq_planes<PlanesIQ3_S>;
  t.decode_rows8[static_cast<int>(GgmlType::IQ3_XXS)] = decode_rows8_planes<PlanesIQ3_XXS>;
  t.decode_rows8[static_cast<int>(GgmlType::IQ3_S)] = decode_rows8_planes<PlanesIQ3_S>;
}

}  // namespace strata
