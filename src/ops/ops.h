// Element-wise and row ops used by model code. Kernels know nothing about models.
#pragma once
#include <cstdint>
#include <span>

#include "backend/thread_pool.h"
#include "quant/formats.h"

namespace strata::ops {

// A weight matrix used in place from the model file: rows of `cols` elements in `type`.
// y = W x has `rows` outputs. Shape: [rows][cols].
struct Matrix {
  GgmlType type = GgmlType::F32;
  int64_t rows = 0, cols = 0;
  const uint8_t* data = nullptr;
  size_t row_stride = 0;  // bytes per row
  // Optional copy of the first rows / 8 * 8 rows in the 8-row packed layout (quant/gemm_x8.h),
  // made at load time; matmul uses it when present, `data` still serves row lookups and the
  // remaining rows.
  const uint8_t* packed = nullptr;
  size_t packed_stride = 0;  // bytes per group of 8 rows
  bool empty() const { return data == nullptr; }
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_stride; }
};

// Y[t][r] = sum_c W[r][c] * X[t][c]   X: [n_tok][cols], Y: [n_tok][rows]
void matmul(const Matrix& w, const float* x, int n_tok, float* y, ThreadPool& pool);
// Several products of one X (attention's Q, K and V): each Y gets the bits matmul gives it, with X
// quantized once and one parallel loop for all of them instead of one each.
struct Product {
  const Matrix* w;
  float* y;
};
void matmul_shared(std::span<const Product> products, const float* x, int n_tok, ThreadPool& pool);
// A gated FFN's first half: gate_y[t][r] = act(G x, U x)[t][r], the bits of two matmuls and then
// act over the rows; up_y is scratch for U x. Where G and U split their rows alike, each share of
// rows gets its activation while still in cache, in the same parallel loop.
using GatedFn = void (*)(const float* gate, const float* up, float* out, int n);
void matmul_gated(const Matrix& gate, const Matrix& up, const float* x, int n_tok, GatedFn act, float* gate_y,
                  float* up_y, ThreadPool& pool);
// When set, matmul first shows every call's weight and inputs to f (strata imatrix collects
// activation statistics this way). Set it only while no matmul runs.
using MatmulObserver = void (*)(const Matrix& w, const float* x, int n_tok, void* ctx);
void set_matmul_observer(MatmulObserver f, void* ctx);
// Whether an observer is set: a forward then computes every row of every layer (it may skip the
// rows nothing reads after the last layer's K and V otherwise).
bool matmul_observed();
// out[0..cols) = row r of W as floats (embedding lookup).
void get_row(const Matrix& w, int64_t r, float* out);

// y = x / sqrt(mean(x^2) + eps) * w   (w may be null: no weight)
void rms_norm(const float* x, const float* w, int n, float eps, float* y);
// In place on a [n_head][head_dim] vector at position pos; rotates the first n_rot dims.
// neox: pairs (i, i + n_rot/2); otherwise adjacent pairs (2i, 2i+1).
void rope(float* x, int n_head, int head_dim, int n_rot, int pos, float base, bool neox);
void softmax(float* x, int n);
// Gated activations through the kernel table (vector exp where the CPU has one)...
void silu_mul(const float* gate, const float* up, float* out, int n);       // silu(gate) * up
void gelu_tanh_mul(const float* gate, const float* up, float* out, int n);  // gelu(gate) * up
// ...and their scalar references (std::exp, std::tanh).
void silu_mul_ref(const float* gate, const float* up, float* out, int n);
void gelu_tanh_mul_ref(const float* gate, const float* up, float* out, int n);
void add(float* x, const float* y, int n);                                   // x += y
void scale(float* x, float s, int n);

}  // namespace strata::ops
