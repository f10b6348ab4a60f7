// Matrix products on weights in their file format. Each output element is one dot product
// computed by one thread, so results do not depend on the thread count.
#include "common.h"
#include "ops/ops.h"
#include "quant/kernels.h"
#include "quant/quant.h"

#include <algorithm>
#include <vector>

namespace strata::ops {

void matmul(const Matrix& w, const float* x, int n_tok, float* y, ThreadPool& pool) {
  const KernelTable& k = kernels();
  const DotFn dot = k.dot_for(w.type);
  const int cols = static_cast<int>(w.cols);
  const int64_t rows = w.rows;
  const GgmlType at = activation_type(w.type);
  if (at != GgmlType::F32) {
    // Quantize each activation row once ([n_tok][row_bytes(at, cols)]), as ggml does.
    thread_local std::vector<uint8_t> xq;
    thread_local std::vector<float> xd;
    const size_t qrow = row_bytes(at, cols);
    xq.resize(qrow * n_tok);
    for (int t = 0; t < n_tok; ++t) quantize_row(at, x + static_cast<size_t>(t) * cols, xq.data() + t * qrow, cols);
    if (const QDotMultiFn dm = n_tok > 1 ? k.dotq_multi[static_cast<int>(w.type)] : nullptr) {
      const uint8_t* xqp = xq.data();
      pool.parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
        float out[4];
        for (int64_t r = r0; r < r1; ++r) {
          const uint8_t* wr = w.row(r);
          for (int t = 0; t < n_tok; t += 4) {
            const int nt = std::min(4, n_tok - t);
            dm(cols, wr, xqp + t * qrow, qrow, nt, out);
            for (int i = 0; i < nt; ++i) y[static_cast<size_t>(t + i) * rows + r] = out[i];
          }
        }
      });
      return;
    }
    if (const QDotFn dq = k.dotq[static_cast<int>(w.type)]) {
      const uint8_t* xqp = xq.data();
      pool.parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const uint8_t* wr = w.row(r);
          for (int t = 0; t < n_tok; ++t) y[static_cast<size_t>(t) * rows + r] = dq(cols, wr, xqp + t * qrow);
        }
      });
      return;
    }
    // No integer kernel: the same quantized activation values, multiplied in float.
    xd.resize(static_cast<size_t>(cols) * n_tok);
    for (int t = 0; t < n_tok; ++t) dequantize_row_ref(at, xq.data() + t * qrow, xd.data() + static_cast<size_t>(t) * cols, cols);
    x = xd.data();
  }
  // Rows outer, tokens inner: a weight row is read from memory once per batch.
  pool.parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* wr = w.row(r);
      for (int t = 0; t < n_tok; ++t) y[static_cast<size_t>(t) * rows + r] = dot(cols, wr, x + static_cast<size_t>(t) * cols);
    }
  });
}

void get_row(const Matrix& w, int64_t r, float* out) {
  if (r < 0 || r >= w.rows) throw Error("row " + std::to_string(r) + " out of range [0, " + std::to_string(w.rows) + ")");
  kernels().dequant_for(w.type)(w.row(r), out, w.cols);
}

}  // namespace strata::ops
