// Kernel table: one dot product and one row dequantizer per weight format, filled once at
// start-up from the CPU's features. Hot loops call through this table, never through virtuals.
#pragma once
#include <cstdint>

#include "quant/formats.h"
#include "quant/gemm_x8.h"

namespace strata {

using DotFn = float (*)(int n, const void* w, const float* x);       // sum_i w[i] * x[i]
using DequantFn = void (*)(const void* src, float* dst, int64_t n);  // dst[i] = w[i]
// Dot of a weight row with activations already quantized to activation_type(weight type).
using QDotFn = float (*)(int n, const void* w, const void* xq);
// The same for ntok (1..4) activation rows at once (xq + t * xq_stride), sharing the weight
// unpacking; out[t] is bit-identical to QDotFn on row t.
// Quantizes n activations to an activation format (Q8_0, Q8_K); the same bytes as quantize_row.
using QuantizeFn = void (*)(const float* x, void* dst, int64_t n);
// out = act(g) * u, element-wise (gated FFN activations).
using GatedActFn = void (*)(const float* g, const float* u, float* out, int n);
using ScaleFn = void (*)(int n, float a, float* y);                 // y *= a
using ExpShiftFn = void (*)(int n, const float* x, float shift, float* out);  // out = exp(x - shift)
// Attention over a page of cells (rows of floats), the same bits in every table: one rounding per
// multiply and per add, in the order written.
// out[g * ld + c] = q[g] . k[c]   (k: [nc][dk], q: [group][dk]), summed as eight running sums,
//   s[j] = sum over whole 8s of dimensions, in order, of q[g][8i + j] * k[c][8i + j], then
//   ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)), then the dimensions past the last whole 8
//   added one by one: the order in which a SIMD kernel reads each key as it lies, 8 at a time.
using AttnScoresFn = void (*)(int dk, int nc, const float* k, const float* q, int group, float* out, int ld);
// acc[g][:] += w[g * ld + c] * v[c][:] for c = 0 .. nc-1 in order   (v: [nc][dv], acc: [group][dv])
using AttnValuesFn = void (*)(int dv, int nc, const float* v, const float* w, int ld, int group, float* acc);
// The same over f16 cells read where they lie (the f16 KV format), cell c's vector at
// k + c * stride (stride in values): the bits of decoding the cells into rows and calling
// attn_scores / attn_values, without the rows. They convert a cell's vectors as they use them,
// once per 4 query rows (scores) or per query row group (values), so they pay for few rows: a
// decode token's.
using AttnScoresF16Fn = void (*)(int dk, int nc, const uint16_t* k, size_t stride, const float* q, int group, float* out,
                                 int ld);
using AttnValuesF16Fn = void (*)(int dv, int nc, const uint16_t* v, size_t stride, const float* w, int ld, int group,
                                 float* acc);
using QDotMultiFn = void (*)(int n, const void* w, const uint8_t* xq, size_t xq_stride, int ntok, float* out);
// Decode: nrows weight rows (row_stride bytes apart) against one quantized activation row;
// out[r] is bit-identical to QDotFn on row r.
using QDotRowsFn = void (*)(int n, const uint8_t* w, size_t row_stride, int nrows, const uint8_t* xq, float* out);
// Formats whose chunks are decoded through table lookups (i-quants, Q2_K, Q3_K, TQ1_0, TQ2_0): for
// prefill, up to 8 weight rows (row_stride bytes apart; missing rows count as zero) are decoded
// at once into kDecodedX8BlockBytes per 256 columns; KernelTable::gemm_decoded8 (a GemmX8Fn taking
// the decoded rows as w) then multiplies them with 1..4 activation rows per call:
// out[t * 8 + r] is bit-identical to dotq on row r.
constexpr size_t kDecodedX8BlockBytes = sizeof(DecodedX8Block);
static_assert(kDecodedX8BlockBytes == 2880);
using DecodeRows8Fn = void (*)(int n, const uint8_t* rows, size_t row_stride, int nrows, uint8_t* decoded);
// The same from one group of 8 rows in the packed layout (quant/gemm_x8.h), for prefill of
// formats whose packed kernel is slower than gemm_decoded8 with several activation rows.
using DecodePacked8Fn = void (*)(int n, const uint8_t* packed, uint8_t* decoded);
// The decoded rows (nrows of 8 kept) times ntok activation rows in token bands
// (prepare_token_bands; ceil(ntok / kBandTokens) bands of band_stride bytes, at most
// kMaxBandsPerCall): y[t * y_stride + r], bit-identical to dotq on row r and token t.
constexpr int kMaxBandsPerCall = 4;
using GemmDecodedBandsFn = void (*)(int n, const uint8_t* decoded, const uint8_t* bands, size_t band_stride, int ntok,
                                    int nrows, float* y, size_t y_stride);

// Activations are quantized once per matmul to the format ggml pairs with each weight format:
// Q8_0 for the 32-element block formats, Q8_K for the K-quants, and left in f32 for float weights.
GgmlType activation_type(GgmlType weight);

constexpr int kMaxTypes = 40;

struct KernelTable {
  const char* isa = "scalar";
  DotFn dot[kMaxTypes] = {};
  DequantFn dequant[kMaxTypes] = {};
  QDotFn dotq[kMaxTypes] = {};  // integer kernels; where absent, matmul dequantizes the quantized
                                // activations and uses dot[] (same values, float arithmetic)
  QDotMultiFn dotq_multi[kMaxTypes] = {};  // optional: several activation rows per weight row
  QDotRowsFn dotq_rows[kMaxTypes] = {};    // optional: several weight rows per activation row
  DecodeRows8Fn decode_rows8[kMaxTypes] = {};  // optional, with gemm_decoded8: prefill of lookup formats
  GemmX8Fn gemm_decoded8[kMaxTypes] = {};
  DecodePacked8Fn decode_packed8[kMaxTypes] = {};  // optional, with gemm_decoded8: prefill of packed weights
  GemmDecodedBandsFn gemm_decoded_bands[kMaxTypes] = {};  // optional: gemm_decoded8 on many tokens
  GemmX8Fn gemm_x8[kMaxTypes] = {};        // kernels on weights packed 8 rows at a time
  GemmGroupsFn gemm_groups[kMaxTypes] = {};  // optional: several packed groups per call...
  int groups_per_call[kMaxTypes] = {};       // ...this many at most, and in decode (one pass of
  int decode_groups_per_call[kMaxTypes] = {};  // at most kPackMaxTokens tokens) this many (0: as above)
  GemmHalfWideFn gemm_half_wide[kMaxTypes] = {};  // optional: F16/BF16 prefill on many tokens...
  int half_wide_groups[kMaxTypes] = {};           // ...this many groups per call at most
  GemmAmxFn gemm_amx[kMaxTypes] = {};  // optional: packed prefill on AMX tiles, 16 rows per call
  GemmAmxDecodedFn gemm_amx_decoded[kMaxTypes] = {};  // optional: prefill of decoded rows on AMX tiles
  int amx_min_tokens[kMaxTypes] = {};  // ...from this many tokens on (and more than kPackMaxTokens)
  QuantizeFn quantize_act[kMaxTypes] = {};  // activation quantizers, by activation format (and F16
                                            // for the KV cache); the reference's bytes
  GatedActFn silu_mul = nullptr;            // vector versions; ops' scalar reference when null
  GatedActFn gelu_tanh_mul = nullptr;
  ScaleFn scale = nullptr;  // always set; the same bits in every table
  ExpShiftFn exp_shift = nullptr;  // always set
  AttnScoresFn attn_scores = nullptr;  // always set; the same bits in every table
  AttnValuesFn attn_values = nullptr;  // always set; the same bits in every table
  AttnScoresF16Fn attn_scores_f16 = nullptr;  // optional, with attn_values_f16: f16 cells in place;
  AttnValuesF16Fn attn_values_f16 = nullptr;  // where absent, the cells are decoded into rows

  DotFn dot_for(GgmlType t) const;          // throws when the format has no kernel
  DequantFn dequant_for(GgmlType t) const;  // throws when the format has no kernel
};

const KernelTable& scalar_kernels();
const KernelTable* avx2_kernels();  // nullptr when the CPU lacks AVX2/FMA/F16C
// AVX2 table with AVX-512 VNNI kernels where written; nullptr without AVX-512 F/BW/VL + VNNI.
const KernelTable* avx512_kernels();
// The AVX-512 table with the kernels that also take BITALG; nullptr without it.
const KernelTable* avx512_bitalg_kernels();
// The best AVX-512 table with the AMX-INT8 prefill kernels; nullptr without AMX-TILE and
// AMX-INT8, or when the OS does not grant the tile state (amx_usable).
const KernelTable* amx_kernels();
bool amx_usable();
// The table the engine uses: best for this CPU, or the one named by
// STRATA_ISA=scalar|avx2|avx512|avx512bitalg (avx512: without the BITALG kernels; neither of
// the two with AMX).
const KernelTable& kernels();

void fill_scalar_kernels(KernelTable& t);
void fill_avx2_kernels(KernelTable& t);    // defined in the AVX2 file
void fill_avx512_kernels(KernelTable& t);
void fill_avx512_bitalg_kernels(KernelTable& t);  // on top of the AVX-512 table
void fill_amx_kernels(KernelTable& t);            // on top of the best AVX-512 table
void fill_avx2_quantizers(KernelTable& t);  // defined in the AVX2 quantizer file
void fill_avx2_vec(KernelTable& t);    // defined in ops/vec_avx2.cpp
void fill_avx512_vec(KernelTable& t);  // defined in ops/vec_avx512.cpp (on top of the AVX2 table)

}  // namespace strata
