// Matrix products on weights, packed 8 rows at a time where the model was repacked at load, else
// in their file format. Each output element is computed by one thread with arithmetic that does
// not depend on the thread count or on how many activation rows the call has.
#include "common.h"
#include "ops/ops.h"
#include "quant/kernels.h"
#include "quant/quant.h"

#include <algorithm>
#include <vector>

namespace strata::ops {

namespace {

// Activation rows quantized once per matmul to the format the weight kernels take ([n_tok][row
// bytes]), with per-block code sums and float scales for the packed kernels on Q8_0 activations.
struct QuantizedActivations {
  std::vector<uint8_t> q;
  std::vector<Q8BlockInfo> sums;
  size_t row = 0, sums_row = 0;
};

void quantize_activations(GgmlType at, const float* x, int n_tok, int cols, bool want_sums, QuantizedActivations& a,
                          ThreadPool& pool) {
  a.row = row_bytes(at, cols);
  a.q.resize(a.row * n_tok);
  a.sums_row = want_sums ? static_cast<size_t>(cols / 32) : 0;
  a.sums.resize(a.sums_row * n_tok);
  const QuantizeFn quantize = kernels().quantize_act[static_cast<int>(at)];
  if (!quantize) throw Error("matmul: no quantizer for activations in " + type_name(at));
  pool.parallel_for(n_tok, 8, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      uint8_t* q = a.q.data() + t * a.row;
      quantize(x + static_cast<size_t>(t) * cols, q, cols);
      if (want_sums) q8_0_block_info(q, cols, a.sums.data() + t * a.sums_row);
    }
  });
}

// Groups of 8 weight rows, each decoded once (decode(g, buffer) fills the DecodedX8Block layout
// and returns the group's row count) and then multiplied with every activation row, up to
// kPackMaxTokens per call. Group g's rows start at row0 + 8g.
template <typename Decode>
void matmul_decoded_groups(int64_t groups, int64_t row0, int64_t rows, int cols, GemmX8Fn gemm8, const uint8_t* xq,
                           size_t xrow, int n_tok, float* y, ThreadPool& pool, Decode decode) {
  pool.parallel_for(groups, 1, [&](int64_t g0, int64_t g1) {
    thread_local std::vector<uint8_t> decoded;
    decoded.resize(static_cast<size_t>(cols / 256) * kDecodedX8BlockBytes);
    float out[kPackRows * kPackMaxTokens];
    for (int64_t g = g0; g < g1; ++g) {
      const int nr = decode(g, decoded.data());
      const int64_t r0 = row0 + g * kPackRows;
      for (int t = 0; t < n_tok; t += kPackMaxTokens) {
        const int nt = std::min(kPackMaxTokens, n_tok - t);
        gemm8(cols, decoded.data(), xq + t * xrow, xrow, nullptr, 0, nt, out);
        for (int i = 0; i < nt; ++i)
          std::copy(out + i * kPackRows, out + i * kPackRows + nr, y + static_cast<size_t>(t + i) * rows + r0);
      }
    }
  });
}

// Rows [r_begin, rows) one dot product at a time (file layout). a: the activations quantized to
// activation_type(w.type), or null for float weights.
void matmul_rows(const Matrix& w, int64_t r_begin, const float* x, const QuantizedActivations* a, int n_tok, float* y,
                 ThreadPool& pool) {
  const KernelTable& k = kernels();
  const DotFn dot = k.dot_for(w.type);
  const int cols = static_cast<int>(w.cols);
  const int64_t rows = w.rows, n = rows - r_begin;
  if (n <= 0) return;
  const GgmlType at = activation_type(w.type);
  if (a) {
    thread_local std::vector<float> xd;
    const size_t qrow = a->row;
    const uint8_t* xqp = a->q.data();
    // Lookup-bound formats with more than one group of activation rows: 8 weight rows are
    // decoded at once, laid out so that each activation word feeds all 8, and reused by every
    // group (same bits as dotq).
    const GemmX8Fn gemm8 = k.gemm_decoded8[static_cast<int>(w.type)];
    if (const DecodeRows8Fn decode8 = n_tok > 4 && gemm8 ? k.decode_rows8[static_cast<int>(w.type)] : nullptr) {
      matmul_decoded_groups((n + kPackRows - 1) / kPackRows, r_begin, rows, cols, gemm8, xqp, qrow, n_tok, y, pool,
                            [&](int64_t g, uint8_t* out) {
                              const int64_t r0 = r_begin + g * kPackRows;
                              const int nr = static_cast<int>(std::min<int64_t>(kPackRows, rows - r0));
                              decode8(cols, w.row(r0), w.row_stride, nr, out);
                              return nr;
                            });
      return;
    }
    // Decode: several weight rows per call where the format has such a kernel (same bits).
    if (const QDotRowsFn drows = n_tok == 1 ? k.dotq_rows[static_cast<int>(w.type)] : nullptr) {
      pool.parallel_for(n, 16, [&](int64_t i0, int64_t i1) {
        drows(cols, w.row(r_begin + i0), w.row_stride, static_cast<int>(i1 - i0), xqp, y + r_begin + i0);
      });
      return;
    }
    if (const QDotMultiFn dm = n_tok > 1 ? k.dotq_multi[static_cast<int>(w.type)] : nullptr) {
      pool.parallel_for(n, 16, [&](int64_t i0, int64_t i1) {
        float out[4];
        for (int64_t r = r_begin + i0; r < r_begin + i1; ++r) {
          const void* wr = w.row(r);
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
      pool.parallel_for(n, 16, [&](int64_t i0, int64_t i1) {
        for (int64_t r = r_begin + i0; r < r_begin + i1; ++r) {
          const uint8_t* wr = w.row(r);
          for (int t = 0; t < n_tok; ++t) y[static_cast<size_t>(t) * rows + r] = dq(cols, wr, xqp + t * qrow);
        }
      });
      return;
    }
    // No integer kernel: the same quantized activation values, multiplied in float.
    xd.resize(static_cast<size_t>(cols) * n_tok);
    for (int t = 0; t < n_tok; ++t) dequantize_row_ref(at, xqp + t * qrow, xd.data() + static_cast<size_t>(t) * cols, cols);
    x = xd.data();
  }
  // Rows outer, tokens inner: a weight row is read from memory once per batch.
  pool.parallel_for(n, 16, [&](int64_t i0, int64_t i1) {
    for (int64_t r = r_begin + i0; r < r_begin + i1; ++r) {
      const uint8_t* wr = w.row(r);
      for (int t = 0; t < n_tok; ++t) y[static_cast<size_t>(t) * rows + r] = dot(cols, wr, x + static_cast<size_t>(t) * cols);
    }
  });
}

// The packed groups of 8 rows: every activation row passes through a group while its weights
// are in cache; up to kPackMaxTokens activation rows share each unpacked weight block.
void matmul_packed(const Matrix& w, const float* x, const QuantizedActivations* a, int n_tok, float* y,
                   ThreadPool& pool) {
  const KernelTable& k = kernels();
  const GemmX8Fn gemm = k.gemm_x8[static_cast<int>(w.type)];
  if (!gemm) throw Error("matmul: no packed kernel for " + type_name(w.type));
  const int cols = static_cast<int>(w.cols);
  const int64_t rows = w.rows, groups = rows / kPackRows;
  const uint8_t* xq = a ? a->q.data() : reinterpret_cast<const uint8_t*>(x);
  const size_t xrow = a ? a->row : static_cast<size_t>(cols) * sizeof(float);
  const Q8BlockInfo* sums = a ? a->sums.data() : nullptr;
  const size_t srow = a ? a->sums_row : 0;
  // Formats with a several-groups kernel take up to groups_per_call groups per call, sharing each
  // activation broadcast; the others one group at a time.
  const GemmGroupsFn multi = k.gemm_groups[static_cast<int>(w.type)];
  const int per_call = multi ? k.groups_per_call[static_cast<int>(w.type)] : 1;
  const int64_t sets = (groups + per_call - 1) / per_call;
  // Formats whose packed kernel is slower than the decoded one with several activation groups:
  // each group decoded once per matmul (the same bits as the packed kernel).
  const GemmX8Fn gemm8 = k.gemm_decoded8[static_cast<int>(w.type)];
  if (const DecodePacked8Fn decode8 = n_tok > kPackMaxTokens && gemm8 ? k.decode_packed8[static_cast<int>(w.type)] : nullptr) {
    matmul_decoded_groups(groups, 0, rows, cols, gemm8, xq, xrow, n_tok, y, pool, [&](int64_t g, uint8_t* out) {
      decode8(cols, w.packed + static_cast<size_t>(g) * w.packed_stride, out);
      return kPackRows;
    });
    return;
  }
  pool.parallel_for(sets, 1, [&](int64_t s0, int64_t s1) {
    float out[kPackRows * kMaxGroupsPerCall * kPackMaxTokens];
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t g = s * per_call;
      const int ng = static_cast<int>(std::min<int64_t>(per_call, groups - g));
      const size_t width = static_cast<size_t>(ng) * kPackRows;
      const uint8_t* wg = w.packed + static_cast<size_t>(g) * w.packed_stride;
      for (int t = 0; t < n_tok; t += kPackMaxTokens) {
        const int nt = std::min(kPackMaxTokens, n_tok - t);
        if (multi) multi(cols, wg, w.packed_stride, ng, xq + t * xrow, xrow, sums + t * srow, srow, nt, out, width);
        else gemm(cols, wg, xq + t * xrow, xrow, sums + t * srow, srow, nt, out);  // width == kPackRows
        for (int i = 0; i < nt; ++i)
          std::copy(out + i * width, out + (i + 1) * width, y + static_cast<size_t>(t + i) * rows + g * kPackRows);
      }
    }
  });
}

MatmulObserver g_observer = nullptr;
void* g_observer_ctx = nullptr;

}  // namespace

void set_matmul_observer(MatmulObserver f, void* ctx) {
  g_observer = f;
  g_observer_ctx = ctx;
}

void matmul(const Matrix& w, const float* x, int n_tok, float* y, ThreadPool& pool) {
  if (g_observer) g_observer(w, x, n_tok, g_observer_ctx);
  // Activations are quantized once, for the packed groups and the remaining rows alike.
  const GgmlType at = activation_type(w.type);
  thread_local QuantizedActivations qa;
  const QuantizedActivations* a = nullptr;
  if (at != GgmlType::F32) {
    quantize_activations(at, x, n_tok, static_cast<int>(w.cols), w.packed && at == GgmlType::Q8_0, qa, pool);
    a = &qa;
  }
  int64_t r_begin = 0;
  if (w.packed) {
    matmul_packed(w, x, a, n_tok, y, pool);
    r_begin = w.rows / kPackRows * kPackRows;
  }
  matmul_rows(w, r_begin, x, a, n_tok, y, pool);
}

void get_row(const Matrix& w, int64_t r, float* out) {
  if (r < 0 || r >= w.rows) throw Error("row " + std::to_string(r) + " out of range [0, " + std::to_string(w.rows) + ")");
  kernels().dequant_for(w.type)(w.row(r), out, w.cols);
}

}  // namespace strata::ops
