// Matrix products on weights in their file format. Each output element is one dot product
// computed by one thread, so results do not depend on the thread count.
#include "common.h"
#include "ops/ops.h"
#include "quant/kernels.h"

namespace strata::ops {

void matmul(const Matrix& w, const float* x, int n_tok, float* y, ThreadPool& pool) {
  const DotFn dot = kernels().dot_for(w.type);
  const int cols = static_cast<int>(w.cols);
  const int64_t rows = w.rows;
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
