// Matrix products on weights, packed 8 rows at a time where the model was repacked at load, else
// in their file format. Each output element is computed by one thread with arithmetic that does
// not depend on the thread count, on how many activation rows the call has, or on which other
// products share the call.
#include "common.h"
#include "ops/ops.h"
#include "quant/kernels.h"
#include "quant/quant.h"

#include <algorithm>
#include <functional>
#include <vector>

namespace strata::ops {

namespace {

// Activation rows quantized once per call to the format the weight kernels take ([n_tok][row
// bytes]), with per-block code sums and float scales for the packed kernels on Q8_0 activations,
// for weights without an integer kernel the quantized values as floats, and for the prefill of
// lookup formats with a token-band kernel the rows in token bands (prepare_token_bands).
struct QuantizedActivations {
  std::vector<uint8_t> q;
  std::vector<Q8BlockInfo> sums;
  std::vector<float> values;
  std::vector<uint8_t> bands;
  size_t row = 0, sums_row = 0, band_bytes = 0;
};

// X as the kernels of one activation format take it.
struct Input {
  GgmlType at = GgmlType::F32;
  const float* x = nullptr;  // the float rows (what float weights multiply)
  int n_tok = 0, cols = 0;
  const QuantizedActivations* a = nullptr;  // null when at is F32
};

void quantize_activations(GgmlType at, const float* x, int n_tok, int cols, bool want_sums, bool want_values,
                          bool want_bands, QuantizedActivations& a, ThreadPool& pool) {
  a.row = row_bytes(at, cols);
  a.q.resize(a.row * n_tok);
  a.sums_row = want_sums ? static_cast<size_t>(cols / 32) : 0;
  a.sums.resize(a.sums_row * n_tok);
  a.values.resize(want_values ? static_cast<size_t>(cols) * n_tok : 0);
  const QuantizeFn quantize = kernels().quantize_act[static_cast<int>(at)];
  if (!quantize) throw Error("matmul: no quantizer for activations in " + type_name(at));
  pool.parallel_for(n_tok, 8, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      uint8_t* q = a.q.data() + t * a.row;
      quantize(x + static_cast<size_t>(t) * cols, q, cols);
      if (want_sums) q8_0_block_info(q, cols, a.sums.data() + t * a.sums_row);
      if (want_values) dequantize_row_ref(at, q, a.values.data() + static_cast<size_t>(t) * cols, cols);
    }
  });
  a.band_bytes = want_bands ? token_band_bytes(cols) : 0;
  const int nbands = want_bands ? (n_tok + kBandTokens - 1) / kBandTokens : 0;
  a.bands.resize(a.band_bytes * nbands);
  pool.parallel_for(nbands, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int t0 = static_cast<int>(b) * kBandTokens;
      prepare_token_bands(cols, a.q.data() + t0 * a.row, a.row, std::min(kBandTokens, n_tok - t0),
                          a.bands.data() + b * a.band_bytes);
    }
  });
}

// Whether a product of this format with n_tok activation rows takes them in token bands (where
// the format's decoded rows go onto AMX tiles, those take the rows as they are instead).
bool takes_token_bands(GgmlType t, int n_tok) {
  const KernelTable& k = kernels();
  const int ti = static_cast<int>(t);
  const bool amx = k.gemm_amx_decoded[ti] && n_tok >= k.amx_min_tokens[ti];
  return n_tok > kPackMaxTokens && k.gemm_decoded_bands[ti] && !amx;
}

// Whether rows in file layout have an integer kernel for these activations (else they are
// multiplied in float with the quantized values).
bool has_integer_kernel(GgmlType t) { return kernels().dotq[static_cast<int>(t)] != nullptr; }

// A share of one product that threads take in units: units [0, units) cover output rows
// [row0, row_end) unit_rows at a time, and run(u0, u1) computes units [u0, u1) for every token.
// Any split of the units gives the same bits.
struct Work {
  int64_t units = 0, row0 = 0, row_end = 0, unit_rows = 1;
  std::function<void(int64_t, int64_t)> run;
};

// Rows [r_begin, rows) `step` at a time; fn(i0, i1) computes rows r_begin + [i0, i1).
template <typename Fn>
Work row_work(int64_t r_begin, int64_t rows, int64_t step, Fn fn) {
  const int64_t n = rows - r_begin;
  return {(n + step - 1) / step, r_begin, rows, step,
          [=](int64_t u0, int64_t u1) { fn(u0 * step, std::min(n, u1 * step)); }};
}

// Groups of 8 weight rows, each decoded once (decode(g, buffer) fills the DecodedX8Block layout
// and returns the group's row count) and then multiplied with every activation row: in token
// bands, kMaxBandsPerCall per call, where the activations come so (takes_token_bands), else up
// to kPackMaxTokens per call. Group g's rows start at row0 + 8g.
template <typename Decode>
Work decoded_groups_work(int64_t groups, int64_t row0, int64_t rows, int cols, GgmlType type,
                         const QuantizedActivations* a, int n_tok, float* y, Decode decode) {
  const GemmX8Fn gemm8 = kernels().gemm_decoded8[static_cast<int>(type)];
  const GemmDecodedBandsFn banded = takes_token_bands(type, n_tok) ? kernels().gemm_decoded_bands[static_cast<int>(type)] : nullptr;
  const uint8_t* xq = a->q.data();
  const uint8_t* bands = a->bands.data();
  const size_t xrow = a->row, band_bytes = a->band_bytes;
  return {groups, row0, rows, kPackRows, [=](int64_t g0, int64_t g1) {
            thread_local std::vector<uint8_t> decoded;
            decoded.resize(static_cast<size_t>(cols / 256) * kDecodedX8BlockBytes);
            float out[kPackRows * kPackMaxTokens];
            for (int64_t g = g0; g < g1; ++g) {
              const int nr = decode(g, decoded.data());
              const int64_t r0 = row0 + g * kPackRows;
              if (banded) {
                constexpr int kStep = kBandTokens * kMaxBandsPerCall;
                for (int t = 0; t < n_tok; t += kStep)
                  banded(cols, decoded.data(), bands + t / kBandTokens * band_bytes, band_bytes,
                         std::min(kStep, n_tok - t), nr, y + static_cast<size_t>(t) * rows + r0, rows);
                continue;
              }
              for (int t = 0; t < n_tok; t += kPackMaxTokens) {
                const int nt = std::min(kPackMaxTokens, n_tok - t);
                gemm8(cols, decoded.data(), xq + t * xrow, xrow, nullptr, 0, nt, out);
                for (int i = 0; i < nt; ++i)
                  std::copy(out + i * kPackRows, out + i * kPackRows + nr, y + static_cast<size_t>(t + i) * rows + r0);
              }
            }
          }};
}

// The same on AMX tiles: units of two groups (16 rows), both decoded, then every token through them.
template <typename Decode>
Work amx_decoded_work(int64_t groups, int64_t row0, int64_t rows, int cols, GemmAmxDecodedFn amx,
                      const QuantizedActivations* a, int n_tok, float* y, Decode decode) {
  const uint8_t* xq = a->q.data();
  const size_t xrow = a->row;
  constexpr int64_t kGroups = 2;
  return {(groups + kGroups - 1) / kGroups, row0, rows, kGroups * kPackRows, [=](int64_t u0, int64_t u1) {
            thread_local std::vector<uint8_t> dec0, dec1;
            dec0.resize(static_cast<size_t>(cols / 256) * kDecodedX8BlockBytes);
            dec1.resize(dec0.size());
            for (int64_t u = u0; u < u1; ++u) {
              const int64_t g = u * kGroups;
              int nr = decode(g, dec0.data());
              const bool second = g + 1 < groups;
              if (second) nr += decode(g + 1, dec1.data());
              amx(cols, dec0.data(), second ? dec1.data() : nullptr, nr, xq, xrow, n_tok,
                  y + row0 + g * kPackRows, static_cast<size_t>(rows));
            }
          }};
}

// Rows [r_begin, rows) in file layout, one dot product at a time or several where the format has
// such a kernel.
Work rows_work(const Matrix& w, int64_t r_begin, const Input& in, float* y) {
  const KernelTable& k = kernels();
  const int cols = static_cast<int>(w.cols), n_tok = in.n_tok;
  const int64_t rows = w.rows;
  const int ti = static_cast<int>(w.type);
  const QuantizedActivations* a = in.a;
  const float* x = in.x;
  if (a) {
    const size_t qrow = a->row;
    const uint8_t* xqp = a->q.data();
    // Lookup-bound formats with more than one group of activation rows: 8 weight rows are
    // decoded at once, laid out so that each activation word feeds all 8, and reused by every
    // group (same bits as dotq).
    const GemmX8Fn gemm8 = k.gemm_decoded8[ti];
    if (const DecodeRows8Fn decode8 = n_tok > 4 && gemm8 ? k.decode_rows8[ti] : nullptr) {
      const int64_t n = rows - r_begin;
      auto decode = [=, &w](int64_t g, uint8_t* out) {
        const int64_t r0 = r_begin + g * kPackRows;
        const int nr = static_cast<int>(std::min<int64_t>(kPackRows, rows - r0));
        decode8(cols, w.row(r0), w.row_stride, nr, out);
        return nr;
      };
      if (const GemmAmxDecodedFn amx = n_tok >= k.amx_min_tokens[ti] ? k.gemm_amx_decoded[ti] : nullptr)
        return amx_decoded_work((n + kPackRows - 1) / kPackRows, r_begin, rows, cols, amx, a, n_tok, y, decode);
      return decoded_groups_work((n + kPackRows - 1) / kPackRows, r_begin, rows, cols, w.type, a, n_tok, y, decode);
    }
    // Decode: several weight rows per call where the format has such a kernel (same bits).
    if (const QDotRowsFn drows = n_tok == 1 ? k.dotq_rows[ti] : nullptr)
      return row_work(r_begin, rows, 16, [=, &w](int64_t i0, int64_t i1) {
        drows(cols, w.row(r_begin + i0), w.row_stride, static_cast<int>(i1 - i0), xqp, y + r_begin + i0);
      });
    if (const QDotMultiFn dm = n_tok > 1 ? k.dotq_multi[ti] : nullptr)
      return row_work(r_begin, rows, 16, [=, &w](int64_t i0, int64_t i1) {
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
    if (const QDotFn dq = k.dotq[ti])
      return row_work(r_begin, rows, 16, [=, &w](int64_t i0, int64_t i1) {
        for (int64_t r = r_begin + i0; r < r_begin + i1; ++r) {
          const uint8_t* wr = w.row(r);
          for (int t = 0; t < n_tok; ++t) y[static_cast<size_t>(t) * rows + r] = dq(cols, wr, xqp + t * qrow);
        }
      });
    // No integer kernel: the same quantized activation values, multiplied in float.
    x = a->values.data();
  }
  // Rows outer, tokens inner: a weight row is read from memory once per batch.
  const DotFn dot = k.dot_for(w.type);
  return row_work(r_begin, rows, 16, [=, &w](int64_t i0, int64_t i1) {
    for (int64_t r = r_begin + i0; r < r_begin + i1; ++r) {
      const uint8_t* wr = w.row(r);
      for (int t = 0; t < n_tok; ++t) y[static_cast<size_t>(t) * rows + r] = dot(cols, wr, x + static_cast<size_t>(t) * cols);
    }
  });
}

// Packed group g of w (gemm_x8.h: F16 and BF16 groups interleave in blocks).
const uint8_t* packed_group(const Matrix& w, int64_t g) {
  return w.packed + packed_group_offset(w.type, w.packed_stride, g);
}

// The packed groups of 8 rows: every activation row passes through a group while its weights
// are in cache; up to kPackMaxTokens activation rows share each unpacked weight block.
Work packed_work(const Matrix& w, const Input& in, float* y) {
  const KernelTable& k = kernels();
  const int ti = static_cast<int>(w.type);
  const GemmX8Fn gemm = k.gemm_x8[ti];
  if (!gemm) throw Error("matmul: no packed kernel for " + type_name(w.type));
  const int cols = static_cast<int>(w.cols), n_tok = in.n_tok;
  const int64_t rows = w.rows, groups = rows / kPackRows;
  const QuantizedActivations* a = in.a;
  const uint8_t* xq = a ? a->q.data() : reinterpret_cast<const uint8_t*>(in.x);
  const size_t xrow = a ? a->row : static_cast<size_t>(cols) * sizeof(float);
  const Q8BlockInfo* sums = a ? a->sums.data() : nullptr;
  const size_t srow = a ? a->sums_row : 0;
  const size_t call_stride = packed_call_stride(w.type, w.packed_stride);  // between a call's groups
  // F16 and BF16 on more than 4 tokens: the weights widened once per chunk of columns, for every
  // token; chunks outside, so that the activations' chunk is reused by all the unit's groups.
  if (const GemmHalfWideFn wide = n_tok > kPackMaxTokens ? k.gemm_half_wide[ti] : nullptr) {
    const int per_call = k.half_wide_groups[ti];
    const int64_t block = packed_block_groups(w.type);
    const float* x = in.x;
    return {(groups + per_call - 1) / per_call, 0, groups * kPackRows, per_call * kPackRows,
            [=, &w](int64_t s0, int64_t s1) {
              for (int k0 = 0; k0 < cols; k0 += kHalfWideChunk)
                for (int64_t s = s0; s < s1; ++s) {
                  const int64_t g = s * per_call;
                  const int ng = static_cast<int>(std::min<int64_t>(per_call, groups - g));
                  // The next block's chunk is fetched during the block's first call: the calls after
                  // it in the block (AVX2 takes 2 of its 4 groups) would fetch lines already fetched.
                  const int64_t gn = (g / block + 1) * block;
                  const uint8_t* next = g % block == 0 && gn < groups ? packed_group(w, gn) : nullptr;
                  wide(k0, std::min(kHalfWideChunk, cols - k0), packed_group(w, g), call_stride, ng, next, x,
                       static_cast<size_t>(cols), n_tok, y + g * kPackRows, static_cast<size_t>(rows));
                }
            }};
  }
  // AMX tiles from the format's fewest tokens on: 16 rows (two groups) per unit, every token through them.
  const bool amx_tokens = n_tok > kPackMaxTokens && n_tok >= k.amx_min_tokens[ti];
  if (const GemmAmxFn amx = amx_tokens ? k.gemm_amx[ti] : nullptr) {
    constexpr int64_t kGroups = 2;
    return {(groups + kGroups - 1) / kGroups, 0, groups * kPackRows, kGroups * kPackRows,
            [=, &w](int64_t s0, int64_t s1) {
              for (int64_t s = s0; s < s1; ++s) {
                const int64_t g = s * kGroups;
                const int ng = static_cast<int>(std::min<int64_t>(kGroups, groups - g));
                amx(cols, packed_group(w, g), call_stride, ng, xq, xrow, sums, srow, n_tok, y + g * kPackRows,
                    static_cast<size_t>(rows));
              }
            }};
  }
  if (const GemmAmxDecodedFn amx = amx_tokens && k.decode_packed8[ti] ? k.gemm_amx_decoded[ti] : nullptr) {
    const DecodePacked8Fn decode8 = k.decode_packed8[ti];
    return amx_decoded_work(groups, 0, rows, cols, amx, a, n_tok, y, [=, &w](int64_t g, uint8_t* out) {
      decode8(cols, packed_group(w, g), out);
      return kPackRows;
    });
  }
  // Formats whose packed kernel is slower than the decoded one with several activation groups:
  // each group decoded once per matmul (the same bits as the packed kernel).
  // The next group's packed bytes are fetched into L2 while this group's products run, so that
  // its decode does not wait on memory.
  const bool decoded = n_tok > kPackMaxTokens && (k.gemm_decoded8[ti] || takes_token_bands(w.type, n_tok));
  if (const DecodePacked8Fn decode8 = decoded ? k.decode_packed8[ti] : nullptr)
    return decoded_groups_work(groups, 0, rows, cols, w.type, a, n_tok, y, [=, &w](int64_t g, uint8_t* out) {
      decode8(cols, packed_group(w, g), out);
      if (g + 1 < groups) {
        const uint8_t* next = packed_group(w, g + 1);
        for (size_t off = 0; off < w.packed_stride; off += 64) __builtin_prefetch(next + off, 0, 2);
      }
      return kPackRows;
    });
  // Formats with a several-groups kernel take up to groups_per_call groups per call, sharing each
  // activation broadcast (decode_groups_per_call where set and every token fits one pass); the
  // others one group at a time.
  const GemmGroupsFn multi = k.gemm_groups[ti];
  const int decode_groups = n_tok <= kPackMaxTokens ? k.decode_groups_per_call[ti] : 0;
  const int per_call = multi ? (decode_groups ? decode_groups : k.groups_per_call[ti]) : 1;
  return {(groups + per_call - 1) / per_call, 0, groups * kPackRows, per_call * kPackRows,
          [=, &w](int64_t s0, int64_t s1) {
            float out[kPackRows * kPackMaxTokens];
            for (int64_t s = s0; s < s1; ++s) {
              const int64_t g = s * per_call;
              const int ng = static_cast<int>(std::min<int64_t>(per_call, groups - g));
              const uint8_t* wg = packed_group(w, g);
              for (int t = 0; t < n_tok; t += kPackMaxTokens) {
                const int nt = std::min(kPackMaxTokens, n_tok - t);
                float* yt = y + static_cast<size_t>(t) * rows + g * kPackRows;
                // The several-groups kernels write Y in place; gemm's [nt][8] block is Y's layout for one token.
                if (multi) {
                  multi(cols, wg, call_stride, ng, xq + t * xrow, xrow, sums + t * srow, srow, nt, yt, rows);
                } else if (nt == 1) {
                  gemm(cols, wg, xq + t * xrow, xrow, sums + t * srow, srow, 1, yt);
                } else {
                  gemm(cols, wg, xq + t * xrow, xrow, sums + t * srow, srow, nt, out);
                  for (int i = 0; i < nt; ++i) std::copy(out + i * kPackRows, out + (i + 1) * kPackRows, yt + i * rows);
                }
              }
            }
          }};
}

// Appends the work of y = W x: the packed groups, then the rows left in file layout.
void plan(const Matrix& w, const Input& in, float* y, std::vector<Work>& works) {
  int64_t r_begin = 0;
  if (w.packed) {
    works.push_back(packed_work(w, in, y));
    r_begin = w.rows / kPackRows * kPackRows;
  }
  if (r_begin < w.rows) works.push_back(rows_work(w, r_begin, in, y));
}

// Runs every work in one parallel loop over their concatenated units.
void run(const std::vector<Work>& works, ThreadPool& pool) {
  int64_t total = 0;
  for (const Work& wk : works) total += wk.units;
  pool.parallel_for(total, 1, [&](int64_t b, int64_t e) {
    int64_t base = 0;
    for (const Work& wk : works) {
      if (b >= e) break;
      if (b < base + wk.units) {
        const int64_t end = std::min(e, base + wk.units);
        wk.run(b - base, end - base);
        b = end;
      }
      base += wk.units;
    }
  });
}

// The inputs of one call's products: X quantized once per activation format they take.
class Inputs {
 public:
  Inputs(std::span<const Product> ps, const float* x, int n_tok, ThreadPool& pool) {
    for (const Product& p : ps) {
      const GgmlType at = activation_type(p.w->type);
      Slot& s = slot(at);
      s.want_sums |= p.w->packed && at == GgmlType::Q8_0;
      s.want_bands |= at == GgmlType::Q8_K && takes_token_bands(p.w->type, n_tok);
      s.want_values |= at != GgmlType::F32 && !has_integer_kernel(p.w->type) &&
                       (!p.w->packed || p.w->rows % kPackRows != 0);
      s.used = true;
    }
    const int cols = static_cast<int>(ps[0].w->cols);
    for (size_t i = 0; i < kSlots; ++i) {
      Slot& s = slots_[i];
      if (!s.used) continue;
      s.in = {s.at, x, n_tok, cols, nullptr};
      if (s.at != GgmlType::F32) {
        thread_local QuantizedActivations qa[kSlots];
        quantize_activations(s.at, x, n_tok, cols, s.want_sums, s.want_values, s.want_bands, qa[i], pool);
        s.in.a = &qa[i];
      }
    }
  }
  const Input& get(GgmlType weight) { return slot(activation_type(weight)).in; }

 private:
  static constexpr size_t kSlots = 3;  // F32, Q8_0, Q8_K
  struct Slot {
    GgmlType at = GgmlType::F32;
    bool used = false, want_sums = false, want_values = false, want_bands = false;
    Input in;
  };
  Slot& slot(GgmlType at) {
    const size_t i = at == GgmlType::F32 ? 0 : at == GgmlType::Q8_0 ? 1 : 2;
    if (i == 2 && at != GgmlType::Q8_K) throw Error("matmul: unexpected activation format " + type_name(at));
    slots_[i].at = at;
    return slots_[i];
  }
  Slot slots_[kSlots];
};

MatmulObserver g_observer = nullptr;
void* g_observer_ctx = nullptr;

// What every call does first: checks that the products share X's width, shows them to the
// observer, and quantizes X once per activation format they take.
Inputs start(std::span<const Product> ps, const float* x, int n_tok, ThreadPool& pool) {
  for (const Product& p : ps)
    if (p.w->cols != ps[0].w->cols) throw Error("matmul: products of one input need one column count");
  if (g_observer)
    for (const Product& p : ps) g_observer(*p.w, x, n_tok, g_observer_ctx);
  return Inputs(ps, x, n_tok, pool);
}

}  // namespace

bool matmul_observed() { return g_observer != nullptr; }

void set_matmul_observer(MatmulObserver f, void* ctx) {
  g_observer = f;
  g_observer_ctx = ctx;
}

void matmul_shared(std::span<const Product> ps, const float* x, int n_tok, ThreadPool& pool) {
  if (ps.empty() || n_tok <= 0) return;
  Inputs in = start(ps, x, n_tok, pool);
  thread_local std::vector<Work> works;
  works.clear();
  for (const Product& p : ps) plan(*p.w, in.get(p.w->type), p.y, works);
  run(works, pool);
}

void matmul(const Matrix& w, const float* x, int n_tok, float* y, ThreadPool& pool) {
  const Product p{&w, y};
  matmul_shared({&p, 1}, x, n_tok, pool);
}

void matmul_gated(const Matrix& gate, const Matrix& up, const float* x, int n_tok, GatedFn act, float* gate_y,
                  float* up_y, ThreadPool& pool) {
  if (n_tok <= 0) return;
  if (gate.rows != up.rows) throw Error("matmul_gated: gate and up have different row counts");
  const Product ps[2] = {{&gate, gate_y}, {&up, up_y}};
  Inputs in = start(ps, x, n_tok, pool);
  thread_local std::vector<Work> g, u;
  g.clear();
  u.clear();
  plan(gate, in.get(gate.type), gate_y, g);
  plan(up, in.get(up.type), up_y, u);
  const int64_t rows = gate.rows;
  // Where both weights split their rows alike, a unit computes its gate and up rows and applies
  // the activation to them while they are in cache; otherwise the activation is a pass of its own.
  bool paired = g.size() == u.size();
  for (size_t i = 0; paired && i < g.size(); ++i)
    paired = g[i].units == u[i].units && g[i].row0 == u[i].row0 && g[i].row_end == u[i].row_end &&
             g[i].unit_rows == u[i].unit_rows;
  if (paired) {
    for (size_t i = 0; i < g.size(); ++i) {
      Work& wk = g[i];
      wk.run = [gr = std::move(wk.run), ur = std::move(u[i].run), row0 = wk.row0, row_end = wk.row_end,
                step = wk.unit_rows, n_tok, rows, act, gate_y, up_y](int64_t u0, int64_t u1) {
        gr(u0, u1);
        ur(u0, u1);
        const int64_t r0 = row0 + u0 * step, r1 = std::min(row_end, row0 + u1 * step);
        for (int t = 0; t < n_tok; ++t) {
          const size_t o = static_cast<size_t>(t) * rows + r0;
          act(gate_y + o, up_y + o, gate_y + o, static_cast<int>(r1 - r0));
        }
      };
    }
    run(g, pool);
    return;
  }
  g.insert(g.end(), std::make_move_iterator(u.begin()), std::make_move_iterator(u.end()));
  run(g, pool);
  // Element-wise, so splitting it across threads cannot change a bit of the result.
  pool.parallel_for(static_cast<int64_t>(n_tok) * rows, 4096, [&](int64_t i0, int64_t i1) {
    act(gate_y + i0, up_y + i0, gate_y + i0, static_cast<int>(i1 - i0));
  });
}

void get_row(const Matrix& w, int64_t r, float* out) {
  if (r < 0 || r >= w.rows) throw Error("row " + std::to_string(r) + " out of range [0, " + std::to_string(w.rows) + ")");
  kernels().dequant_for(w.type)(w.row(r), out, w.cols);
}

}  // namespace strata::ops
