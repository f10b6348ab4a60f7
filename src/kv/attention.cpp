#include "kv/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common.h"

namespace strata::kv {

namespace {

// One query head over cells [lo, hi] of a sequence. Pages are visited in order; each page's
// partial (max, sum of exp, weighted V) is merged into the running totals in that same order.
void attend_head(const KvStore& store, SeqId s, int layer, int kv_head, const float* q_in, float scale, int lo, int hi,
                 float* out, std::vector<float>& scratch) {
  const Config& c = store.config();
  const FormatSpec& f = store.spec();
  const int dk = c.head_dim_k, dv = c.head_dim_v, nkv = c.n_kv_heads, P = c.page_size;
  const size_t kh = store.k_bytes_per_head(), vh = store.v_bytes_per_head();
  scratch.resize(P + dk);
  float* scores = scratch.data();
  float* q = scratch.data() + P;
  std::copy(q_in, q_in + dk, q);
  if (f.rotate_k) hadamard(q, dk);  // (Hq)·(Hk) = q·k
  float m = -INFINITY, l = 0;
  std::fill(out, out + dv, 0.f);
  for (int pi = lo / P; pi <= hi / P; ++pi) {
    PageView pv = store.page(s, layer, pi);
    int c0 = std::max(lo, pv.first), c1 = std::min(hi, pv.first + pv.n - 1);
    if (c0 > c1) continue;
    float pm = -INFINITY;
    for (int cell = c0; cell <= c1; ++cell) {
      const uint8_t* k = pv.k + (static_cast<size_t>(cell - pv.first) * nkv + kv_head) * kh;
      float sc = dot_encoded(f.k, k, q, dk) * scale;
      scores[cell - c0] = sc;
      pm = std::max(pm, sc);
    }
    float m_new = std::max(m, pm);
    float a = std::exp(m - m_new);  // rescales what was merged so far (0 on the first page)
    l *= a;
    for (int d = 0; d < dv; ++d) out[d] *= a;
    for (int cell = c0; cell <= c1; ++cell) {
      float w = std::exp(scores[cell - c0] - m_new);
      l += w;
      axpy_encoded(f.v, pv.v + (static_cast<size_t>(cell - pv.first) * nkv + kv_head) * vh, w, out, dv);
    }
    m = m_new;
  }
  float inv = l > 0 ? 1.f / l : 0.f;
  for (int d = 0; d < dv; ++d) out[d] *= inv;
  if (f.rotate_v) hadamard(out, dv);  // sum_i w_i H v_i = H sum_i w_i v_i; H is its own inverse
}

}  // namespace

void attend(const KvStore& store, SeqId s, int layer, int pos0, int n_tok, const float* q, const AttentionParams& p,
            float* out, ThreadPool& pool) {
  const Config& c = store.config();
  if (p.n_head % c.n_kv_heads != 0) throw Error("attention: head count is not a multiple of the KV head count");
  if (store.length(s, layer) < pos0 + n_tok) throw Error("attention: cells missing from the KV store");
  const int group = p.n_head / c.n_kv_heads;
  pool.parallel_for(static_cast<int64_t>(n_tok) * p.n_head, 1, [&](int64_t b, int64_t e) {
    std::vector<float> scratch;
    for (int64_t i = b; i < e; ++i) {
      int t = static_cast<int>(i / p.n_head), h = static_cast<int>(i % p.n_head);
      int pos = pos0 + t;
      int lo = p.window > 0 ? std::max(0, pos - p.window + 1) : 0;
      attend_head(store, s, layer, h / group, q + (static_cast<size_t>(t) * p.n_head + h) * c.head_dim_k, p.scale, lo, pos,
                  out + (static_cast<size_t>(t) * p.n_head + h) * c.head_dim_v, scratch);
    }
  });
}

}  // namespace strata::kv
