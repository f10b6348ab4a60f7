// Weights repacked at load time so that 8 rows are multiplied at once: each vector lane holds one
// output row, so a block's products land in the right lane without horizontal sums, one fp16
// conversion yields 8 row scales, and every activation byte group is loaded once per 8 rows.
// The packed group of 8 rows is as large as the 8 file rows (plus, for Q4_K, Q5_K, Q3_K and
// IQ4_XS, 3 %, 2.3 %, 3.6 % and 1.5 % for scales unpacked to bytes), so the repacked model is the
// size of the file.
//
// Layouts (one "x8 block" per 8 rows x one file block; r = row in the group, i = 0..3):
//   Q8_0: d[8], qs[g*32 + r*4 + i] = code 4g+i of row r (g 0..7)
//   Q4_0: d[8], qs[g*32 + r*4 + i] = byte 4g+i of row r (low nibble: code 4g+i, high: 16+4g+i)
//   Q5_0: as Q4_0, plus qh[r*4 + i] whose bit g is the fifth bit of code 4g+i of row r
//   Q4_1, Q5_1: as Q4_0, Q5_0, plus the rows' offsets m[8]
//   IQ4_NL: as Q4_0, the nibbles indexing the 16 IQ4_NL levels
//   Q4_K: d[8], dmin[8], 6-bit scales and mins unpacked to bytes sc[sub][r], mn[sub][r], and
//         qs[j*256 + g*32 + r*4 + i] = byte 32j+4g+i of row r (sub-blocks 2j and 2j+1)
//   Q5_K: as Q4_K, plus qh[g*32 + r*4 + i] = high-bit byte 4g+i of row r, whose bit s is the fifth
//         bit of value 32s+4g+i
//   Q2_K: d[8], dmin[8], the file's scale bytes sc[sub][r] (scale | min << 4 of values
//         16*sub..16*sub+15), and qs[g*32 + r*4 + i] = byte 4g+i of row r (g 0..15; byte 4g+i
//         holds the 2-bit codes of values 128*(g/8) + 32j + 4*(g%8) + i at bits 2j, j 0..3)
//   Q3_K: d[8], scales minus 32 sc[sub][r], qs as Q2_K's, and hm[g*32 + r*4 + i] = high-mask
//         byte 4g+i of row r (g 0..7), whose bit 4h+j belongs to value 128h + 32j + 4g + i
//   TQ2_0: d[8], qs as Q2_K's (value = code - 1)
//   Q6_K: d[8], sc[16][r], q[(3H+p)*32 + r*4 + i] = code 4(H+16p)+i at bits 0-5 and bits 2p, 2p+1
//         of code 4(H+48)+i at bits 6-7 (H 0..15, p 0..2): three planes' codes take one and
//         each, the fourth's come from the three top pairs
//   IQ4_XS: d[8], sub-block scales minus 32 as signed bytes sc[sub][r], and
//         qs[sub*128 + g*32 + r*4 + i] = byte 16*sub+4g+i of row r (low nibble: value
//         32*sub+4g+i, high: 32*sub+16+4g+i), nibbles indexing the IQ4_NL levels
//   F16, BF16: v[k][r] for each column k; one fused multiply-add chain per output, columns in order.
//         Groups lie in blocks of 4 (32 rows, kHalfBlockGroups): column k of the block's group j
//         at byte 64k + 16j, so that the decode kernel, which takes a block's 4 groups per call,
//         reads one stream of whole cache lines. (Four 8-row streams, the groups one after the
//         other, read 11-16 % slower from memory on the Zen 4 host of the README.) A matrix's
//         last block is whole (its missing groups zero), and no call spans two blocks.
//
// The lattice i-quants IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S, and IQ1_S and IQ1_M, have
// layouts larger than their files (packed when memory allows or on request, packing_grows and
// Model::LoadOptions::repack_grow): each value is spelled
// out as a level code and a sign, so 32 values cost one shuffle instead of 4 or 8 grid-table loads.
//   IQ2 (XS, S; grid levels 8, 25, 43): BlockIQ2Levelsx8: d[8] (the file's d; values carry
//         d / 8), sub-scales 2s + 1 sc[sub][r] (16 values each), qs as Q2_K's with each value's
//         level 0..2, and hm as Q3_K's with each value's sign (set: negative). 912 bytes per
//         8 x 256 values (files: IQ2_XS 592, IQ2_S 656). IQ2_XXS: BlockIQ2XXSLevelsx8, the same
//         with one sub-scale per 32 values, 848 bytes (file: 528)
//   IQ1 (S, M; values 8g + delta, g in {-1, 0, 1}, delta +-1 per 32 values (S) or 8 (M), carrying
//         d / 8): BlockIQ1Codesx8: d[8], the odd sub-scales 2s + 1 of sub-blocks 2p and 2p + 1 (16
//         values each; IQ1_S's per-32 scale twice) as the nibbles of sc[p][r], qs as Q2_K's with
//         each value's g + 1 (0..2), and plus[r] whose bit k is set where values 8k..8k+7 of row r
//         have delta +1. The kernels multiply the unsigned codes u = 8(g + 1) + delta + 1 (0..18)
//         and take the offset of 9 off through the activations' 16-value sums, so no sign reaches
//         the products. 624 bytes per 8 x 256 values (files: IQ1_S 400, IQ1_M 448)
//   IQ3 (XXS: levels 4, 12, ..., 52, 62, values carry d / 4; S: levels 1, 3, ..., 15, values
//         carry d): BlockIQ3Levelsx8: d[8], sub-scales 2s + 1 sc[sub][r] (32 values each), qs as
//         IQ4_XS's with nibbles level | sign << 3. 1104 bytes per 8 x 256 values (files: IQ3_XXS
//         784, IQ3_S 880)
//
// The arithmetic of one output is fixed by the layout, never by how many activation rows go
// through the kernel at once, so a request decoded alone or in a batch gets identical logits.
// The scalar kernels are the reference: the SIMD ones match them bit for bit.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

#include "quant/formats.h"
#include "quant/iq_tables.h"

namespace strata {

#pragma pack(push, 1)
struct BlockQ8_0x8 { uint16_t d[8]; int8_t qs[256]; };
struct BlockQ4_0x8 { uint16_t d[8]; uint8_t qs[128]; };
struct BlockQ5_0x8 { uint16_t d[8]; uint8_t qh[32]; uint8_t qs[128]; };
struct BlockQ4_1x8 { uint16_t d[8], m[8]; uint8_t qs[128]; };
struct BlockQ5_1x8 { uint16_t d[8], m[8]; uint8_t qh[32]; uint8_t qs[128]; };
struct BlockIQ4_NLx8 { uint16_t d[8]; uint8_t qs[128]; };
struct BlockQ4_Kx8 { uint16_t d[8], dmin[8]; uint8_t sc[8][8], mn[8][8]; uint8_t qs[1024]; };
struct BlockQ5_Kx8 { uint16_t d[8], dmin[8]; uint8_t sc[8][8], mn[8][8]; uint8_t qh[256]; uint8_t qs[1024]; };
struct BlockQ2_Kx8 { uint16_t d[8], dmin[8]; uint8_t sc[16][8]; uint8_t qs[512]; };
struct BlockQ3_Kx8 { uint16_t d[8]; int8_t sc[16][8]; uint8_t hm[256]; uint8_t qs[512]; };
struct BlockTQ2_0x8 { uint16_t d[8]; uint8_t qs[512]; };
struct BlockQ6_Kx8 { uint16_t d[8]; int8_t sc[16][8]; uint8_t q[1536]; };
struct BlockIQ4_XSx8 { uint16_t d[8]; int8_t sc[8][8]; uint8_t qs[1024]; };
struct BlockIQ2Levelsx8 { uint16_t d[8]; int8_t sc[16][8]; uint8_t hm[256]; uint8_t qs[512]; };
struct BlockIQ2XXSLevelsx8 { uint16_t d[8]; int8_t sc[8][8]; uint8_t hm[256]; uint8_t qs[512]; };
struct BlockIQ3Levelsx8 { uint16_t d[8]; int8_t sc[8][8]; uint8_t qs[1024]; };
struct BlockIQ1Codesx8 { uint16_t d[8]; uint8_t sc[8][8]; uint32_t plus[8]; uint8_t qs[512]; };
#pragma pack(pop)

// The lookup formats' prefill layout (KernelTable::decode_rows8, decode_packed8): 8 rows decoded
// to signed values laid out as the packed formats are (4 values of each row side by side), with
// their scales ready for the kernels.
struct DecodedX8Block {
  float d[8];         // each row's block factor
  int32_t sc[16][8];  // sub-scale of values 16j..16j+15 of row r, twice as 16 bits (madd operand)
  int8_t v[64][32];   // v[G][4r + i] = value 4G + i of row r
  float dmin[8];      // Q2_K: each row's min factor (zero for the other formats)
  int32_t mn[8][8];   // Q2_K: mins of values 32p..32p+15 and 32p+16..32p+31 of row r, as 16 bits
};

// Rows per packed group, and activation rows one kernel call takes at most.
constexpr int kPackRows = 8;
constexpr int kPackMaxTokens = 4;

// Prefill with many activation rows (KernelTable::gemm_decoded_bands): the Q8_K activation rows
// regrouped kBandTokens at a time so that one 512-bit register holds the same 4 codes of 16
// tokens, and each weight word (4 values of one row) is broadcast against it. Codes are stored
// plus 128 (x ^ 0x80) so they can be vpdpbusd's unsigned operand; the kernel takes the 128 * sum
// of the weights back out, exactly. One band block per 256 columns; tokens past the band's
// count are zero.
constexpr int kBandTokens = 16;
struct TokenBandBlock {
  uint8_t q[64][kBandTokens][4];   // q[G][t][i] = code 4G + i of token t, plus 128
  float d[kBandTokens];            // each token's Q8_K scale
  int32_t bs[8][kBandTokens];      // the code sums of values 32p..32p+15 and 32p+16..32p+31, as 16 bits
};
static_assert(sizeof(TokenBandBlock) == 4672);
// Bands of ntok Q8_K rows (xq_stride bytes apart) of n values: band b (tokens 16b..16b+15) at
// bands + b * token_band_bytes(n).
size_t token_band_bytes(int64_t n);
void prepare_token_bands(int n, const uint8_t* xq, size_t xq_stride, int ntok, uint8_t* bands);

// Whether a packed layout exists for the format.
bool packable(GgmlType t);
// Whether that layout is larger than the file's rows (the lattice i-quants), so packing is a
// choice of speed over memory (Model::LoadOptions::repack_grow).
bool packing_grows(GgmlType t);
// Code level | sign << sign_bit -> +-level (codes past the levels: 0), repeated every
// 2^(sign_bit + 1) entries, as a 16-byte shuffle table indexed by the low bits needs.
template <size_t N>
constexpr std::array<int8_t, 16> signed_codes(const int8_t (&levels)[N], int sign_bit) {
  std::array<int8_t, 16> v{};
  for (int c = 0; c < 16; ++c) {
    const int code = c % (2 << sign_bit), level = code & ((1 << sign_bit) - 1);
    const int8_t m = level < static_cast<int>(N) ? levels[level] : int8_t{0};
    v[c] = static_cast<int8_t>((code >> sign_bit) & 1 ? -m : m);
  }
  return v;
}
// The signed values of IQ2 codes level | sign << 2 (0..7), and of IQ3_XXS and IQ3_S nibbles.
inline constexpr std::array<int8_t, 16> kIq2LevelValues = signed_codes(iq::kIq2Levels, 2);
inline constexpr std::array<int8_t, 16> kIq3xxsCodeValues = signed_codes(iq::kIq3xxsLevels, 3);
inline constexpr std::array<int8_t, 16> kIq3sCodeValues = signed_codes(iq::kIq3sLevels, 3);
static_assert(kIq2LevelValues[2] == 43 && kIq2LevelValues[6] == -43 && kIq2LevelValues[3] == 0 && kIq2LevelValues[9] == 25);
static_assert(sizeof(BlockIQ1Codesx8) == 624 && sizeof(BlockIQ2XXSLevelsx8) == 848);
static_assert(kIq3xxsCodeValues[7] == 62 && kIq3xxsCodeValues[8] == -4 && kIq3sCodeValues[15] == -15);
// Sub-block s (16 values) of an IQ2 grown block takes scale row iq2_scale_row<Packed>(s): IQ2_XXS
// keeps one per 32 values.
template <typename Packed>
constexpr int iq2_scale_row(int s) { return s / (16 / static_cast<int>(sizeof(Packed::sc) / sizeof(Packed::sc[0]))); }
// Bytes of one packed group of 8 rows of `cols` elements.
size_t packed_group_bytes(GgmlType t, int64_t cols);
// Packs 8 consecutive file rows (row_stride bytes apart) into the group whose first byte is dst
// (packed_group_offset into a matrix of packed_matrix_bytes).
void pack_rows8(GgmlType t, const uint8_t* rows, size_t row_stride, int64_t cols, uint8_t* dst);

// Where a matrix's packed groups lie (group_bytes: packed_group_bytes). Groups come one after the
// other, except F16 and BF16's, which interleave in blocks of kHalfBlockGroups. Inline: matmul
// finds a group's place for every call.
constexpr int kHalfBlockGroups = 4;
constexpr int kHalfColumnHalves = 8 * kHalfBlockGroups;  // from one column of a group to the next
inline int packed_block_groups(GgmlType t) {
  return t == GgmlType::F16 || t == GgmlType::BF16 ? kHalfBlockGroups : 1;
}
// The group_stride argument of the kernels below: from one group of a call to the next.
inline size_t packed_call_stride(GgmlType t, size_t group_bytes) {
  return packed_block_groups(t) > 1 ? 8 * sizeof(uint16_t) : group_bytes;
}
inline size_t packed_group_offset(GgmlType t, size_t group_bytes, int64_t g) {
  const int64_t b = packed_block_groups(t);
  return static_cast<size_t>(g / b * b) * group_bytes + static_cast<size_t>(g % b) * packed_call_stride(t, group_bytes);
}
size_t packed_matrix_bytes(GgmlType t, int64_t groups, int64_t cols);
// Packs groups [g0, g1) of a matrix (rows: its first file row) into their places in dst, the
// matrix's packed copy (packed_matrix_bytes, zeroed by the caller).
void pack_matrix8(GgmlType t, const uint8_t* rows, size_t row_stride, int64_t cols, int64_t g0, int64_t g1,
                  uint8_t* dst);

// out[t * 8 + r] = row r of the packed group . activation row t, for t < ntok (1..4).
// xq: activation rows quantized to activation_type(t), xq_stride bytes apart. xinfo: for Q8_0
// activations, each block's code sum and scale (xinfo_stride entries apart); unused otherwise.
// For F16 weights xq holds f32 activations.
struct Q8BlockInfo {
  int32_t sum;  // sum of the block's 32 codes (for formats stored with an offset)
  float d;      // the block's fp16 scale as a float, ready to broadcast
};
using GemmX8Fn = void (*)(int n, const uint8_t* w, const uint8_t* xq, size_t xq_stride, const Q8BlockInfo* xinfo,
                          size_t xinfo_stride, int ntok, float* out);

// Several consecutive packed groups per call (group_stride bytes apart; ngroups from 1 to the
// table's groups_per_call for the format, at most kMaxGroupsPerCall), the other arguments as for
// GemmX8Fn: out[t * out_stride + g * 8 + r], the same bits as gemm_x8 on each group. Every
// broadcast activation then feeds several groups' products, which measured faster where the
// broadcasts, not the multiplies, were the limit (F16 and BF16: 3 groups, now the 4-group block;
// Q4_0, Q5_0: 2). The AVX-512 table puts two groups in each 512-bit register and takes 4 groups
// of F16 and BF16.
// Callers take groups_per_call groups from a multiple of it on, so that with 1, 2 or 4 groups per
// call, no call spans two F16 or BF16 blocks.
constexpr int kMaxGroupsPerCall = 4;
using GemmGroupsFn = void (*)(int n, const uint8_t* w, size_t group_stride, int ngroups, const uint8_t* xq,
                              size_t xq_stride, const Q8BlockInfo* xinfo, size_t xinfo_stride, int ntok, float* out,
                              size_t out_stride);

// Prefill on AMX-INT8 tiles (KernelTable::gemm_amx): two consecutive packed groups (16 rows,
// group_stride bytes apart; ngroups 1 or 2) times ntok activation rows (any count), the other
// arguments as for GemmGroupsFn: y[t * y_stride + r] for r < 8 * ngroups, the same bits as
// gemm_x8 on each group.
using GemmAmxFn = void (*)(int n, const uint8_t* w, size_t group_stride, int ngroups, const uint8_t* xq,
                           size_t xq_stride, const Q8BlockInfo* xinfo, size_t xinfo_stride, int ntok, float* y,
                           size_t y_stride);

// The same for the formats that prefill from decoded rows (KernelTable::gemm_amx_decoded): rows
// 0..7 decoded in dec0 and 8..15 in dec1 (null: none), nrows of them kept, times ntok Q8_K rows:
// y[t * y_stride + r], the bits of gemm_decoded_bands (and of the packed kernel for Q4_K).
using GemmAmxDecodedFn = void (*)(int n, const uint8_t* dec0, const uint8_t* dec1, int nrows, const uint8_t* xq,
                                  size_t xq_stride, int ntok, float* y, size_t y_stride);

// F16 and BF16 prefill on many tokens, one chunk of columns at a time: columns [k0, k0 + kc)
// (kc <= kHalfWideChunk) of ngroups consecutive packed groups (group_stride bytes apart; 1 to the
// table's half_wide_groups for the format, 1, 2 or 4, within one block) times ntok f32 activation
// rows (x_stride floats apart, any count), continuing in y[t * y_stride + g * 8 + r] the chains over columns [0, k0) (started
// from zero when k0 is 0). After the last chunk y holds the bits of gemm_x8 on each group (one
// fma chain per output over the columns in order). The weights are widened to f32 once per
// chunk and shared by every token (GemmGroupsFn widens them again for every 4 tokens); callers
// take the chunks in the outer loop, so that the activations' chunk stays in cache across groups.
// next: the next block's first group (its chunk is fetched into L2 meanwhile), passed by a
// block's first call only; or null.
constexpr int kHalfWideChunk = 256;
using GemmHalfWideFn = void (*)(int k0, int kc, const uint8_t* w, size_t group_stride, int ngroups,
                                const uint8_t* next, const float* x, size_t x_stride, int ntok, float* y,
                                size_t y_stride);

// The xinfo argument above for a row of n values in Q8_0 blocks.
void q8_0_block_info(const uint8_t* xq, int64_t n, Q8BlockInfo* info);

struct KernelTable;
// TQ1_0 is packed (grown) into TQ2_0's layout: its packed-weight entries (gemm_x8, gemm_groups,
// groups_per_call, decode_packed8) become TQ2_0's. Each fill below ends with it, so the two
// formats' packed kernels cannot drift apart; the file-layout entries stay each format's own.
void share_tq1_0_packed_kernels(KernelTable& t);
// Decode (decode_groups_per_call) one group per call in every format whose several-groups kernel
// reads one memory stream per group: on AMD hosts those streams read memory slowly (measured in
// gemm_x8_avx2.cpp and at gemm_x8_avx512.cpp's amd_decode_streams). F16 and BF16, whose block is
// one stream, keep their count.
void decode_one_group_per_call(KernelTable& t);
void fill_scalar_gemm_x8(KernelTable& t);
void fill_avx2_gemm_x8(KernelTable& t);    // gemm_x8_avx2.cpp
void fill_avx512_gemm_x8(KernelTable& t);  // gemm_x8_avx512.cpp
void fill_avx512_vbmi_gemm_x8(KernelTable& t);  // gemm_x8_avx512_vbmi.cpp (the bitalg table: VBMI too)

}  // namespace strata
