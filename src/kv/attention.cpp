#include "kv/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common.h"
#include "quant/kernels.h"

namespace strata::kv {

namespace {

// Pages per partial. Fixed (never derived from the thread count) so that the merge order, and
// with it every bit of the result, is the same for any number of threads.
constexpr int kPagesPerChunk = 16;

// Partial softmax state of the `group` query heads sharing one KV head, over a range of pages.
// Layout in a float buffer: m[group], l[group], acc[group][dv].
struct PartialView {
  float* m;
  float* l;
  float* acc;
};
PartialView view(float* base, int group, int dv) { return {base, base + group, base + 2 * group}; }
size_t partial_floats(int group, int dv) { return static_cast<size_t>(group) * (2 + dv); }

// Computes the partial of pages [p0, p1] restricted to cells [lo, hi]. A page's keys and values
// are decoded once into rows and used by every query head of the group: scores and the weighted
// sum of values are page-wide kernels. Pages are merged in order.
void chunk_partial(const KvStore& store, SeqId s, int layer, int kv_head, const float* q, int group, float scale, int lo,
                   int hi, int p0, int p1, PartialView out, std::vector<float>& scratch) {
  const Config& c = store.config();
  const FormatSpec& f = store.spec();
  const int dk = c.head_dim_k, dv = c.head_dim_v, nkv = c.n_kv_heads, P = c.page_size;
  const size_t kh = store.k_bytes_per_head(), vh = store.v_bytes_per_head();
  const KernelTable& kt = kernels();
  scratch.resize(static_cast<size_t>(P) * (2 * group + dk + dv));
  float* scores = scratch.data();                        // [group][P]
  float* wts = scores + static_cast<size_t>(group) * P;  // [group][P]
  float* keys = wts + static_cast<size_t>(group) * P;    // [P][dk]
  float* vals = keys + static_cast<size_t>(P) * dk;      // [P][dv]
  for (int g = 0; g < group; ++g) {
    out.m[g] = -INFINITY;
    out.l[g] = 0;
  }
  std::fill(out.acc, out.acc + static_cast<size_t>(group) * dv, 0.f);
  for (int pi = p0; pi <= p1; ++pi) {
    const PageView pv = store.page(s, layer, pi);
    int c0 = std::max(lo, pv.first), c1 = std::min(hi, pv.first + pv.n - 1);
    if (c0 > c1) continue;
    const int nc = c1 - c0 + 1;
    for (int i = 0; i < nc; ++i)
      decode(f.k, pv.k + (static_cast<size_t>(c0 + i - pv.first) * nkv + kv_head) * kh, keys + static_cast<size_t>(i) * dk, dk);
    kt.attn_scores(dk, nc, keys, q, group, scores, P);  // every query head of the group against every key
    for (int g = 0; g < group; ++g) {
      float* sg = scores + static_cast<size_t>(g) * P;
      float pm = -INFINITY;
      for (int i = 0; i < nc; ++i) {
        sg[i] *= scale;
        pm = std::max(pm, sg[i]);
      }
      float m_new = std::max(out.m[g], pm);
      float a = std::exp(out.m[g] - m_new);  // rescales what was merged so far (0 on the first page)
      out.l[g] *= a;
      kt.scale(dv, a, out.acc + static_cast<size_t>(g) * dv);
      out.m[g] = m_new;
      // The page's softmax weights, summed in cell order.
      kt.exp_shift(nc, sg, m_new, wts + static_cast<size_t>(g) * P);
      for (int i = 0; i < nc; ++i) out.l[g] += wts[static_cast<size_t>(g) * P + i];
    }
    for (int i = 0; i < nc; ++i)
      decode(f.v, pv.v + (static_cast<size_t>(c0 + i - pv.first) * nkv + kv_head) * vh, vals + static_cast<size_t>(i) * dv, dv);
    kt.attn_values(dv, nc, vals, wts, P, group, out.acc);
  }
}

}  // namespace

void attend(const KvStore& store, SeqId s, int layer, int pos0, int n_tok, const float* q, const AttentionParams& p,
            float* out, ThreadPool& pool) {
  const Config& c = store.config();
  const FormatSpec& f = store.spec();
  if (p.n_head % c.n_kv_heads != 0) throw Error("attention: head count is not a multiple of the KV head count");
  if (store.length(s, layer) < pos0 + n_tok) throw Error("attention: cells missing from the KV store");
  const int group = p.n_head / c.n_kv_heads, nkv = c.n_kv_heads, dk = c.head_dim_k, dv = c.head_dim_v, P = c.page_size;

  // Queries in the cache's frame: (Hq)·(Hk) = q·k for rotated K.
  std::vector<float> qr(q, q + static_cast<size_t>(n_tok) * p.n_head * dk);
  if (f.rotate_k)
    for (int i = 0; i < n_tok * p.n_head; ++i) hadamard(qr.data() + static_cast<size_t>(i) * dk, dk);

  // Tasks: (token, kv head, chunk of pages), in a fixed order.
  struct Task { int t, h, lo, hi, p0, p1; };
  std::vector<Task> tasks;
  std::vector<int> first_task;  // per (token, kv head)
  for (int t = 0; t < n_tok; ++t)
    for (int h = 0; h < nkv; ++h) {
      int pos = pos0 + t;
      int lo = p.window > 0 ? std::max(0, pos - p.window + 1) : 0;
      first_task.push_back(static_cast<int>(tasks.size()));
      for (int pg = lo / P; pg <= pos / P; pg += kPagesPerChunk)
        tasks.push_back({t, h, lo, pos, pg, std::min(pos / P, pg + kPagesPerChunk - 1)});
    }
  first_task.push_back(static_cast<int>(tasks.size()));
  const size_t pf = partial_floats(group, dv);
  thread_local std::vector<float> partial_buf;  // the caller's buffer; workers use it through `parts`
  partial_buf.resize(tasks.size() * pf);
  float* const parts = partial_buf.data();
  pool.parallel_for(static_cast<int64_t>(tasks.size()), 1, [&](int64_t b, int64_t e) {
    std::vector<float> scratch;
    for (int64_t i = b; i < e; ++i) {
      const Task& k = tasks[i];
      const float* qg = qr.data() + (static_cast<size_t>(k.t) * p.n_head + static_cast<size_t>(k.h) * group) * dk;
      chunk_partial(store, s, layer, k.h, qg, group, p.scale, k.lo, k.hi, k.p0, k.p1,
                    view(parts + i * pf, group, dv), scratch);
    }
  });
  // Merge each (token, kv head)'s chunks in order, normalise, rotate back.
  // A few heads (decode) are merged in place: less work than handing them to the workers.
  pool.parallel_for(static_cast<int64_t>(n_tok) * nkv, 8, [&](int64_t b, int64_t e) {
    for (int64_t th = b; th < e; ++th) {
      int t = static_cast<int>(th / nkv), h = static_cast<int>(th % nkv);
      PartialView tot = view(parts + static_cast<size_t>(first_task[th]) * pf, group, dv);
      for (int i = first_task[th] + 1; i < first_task[th + 1]; ++i) {
        PartialView part = view(parts + static_cast<size_t>(i) * pf, group, dv);
        for (int g = 0; g < group; ++g) {
          float m_new = std::max(tot.m[g], part.m[g]);
          float a = std::exp(tot.m[g] - m_new), b2 = std::exp(part.m[g] - m_new);
          tot.l[g] = tot.l[g] * a + part.l[g] * b2;
          float* x = tot.acc + static_cast<size_t>(g) * dv;
          const float* y = part.acc + static_cast<size_t>(g) * dv;
          for (int d = 0; d < dv; ++d) x[d] = x[d] * a + y[d] * b2;
          tot.m[g] = m_new;
        }
      }
      for (int g = 0; g < group; ++g) {
        float* o = out + (static_cast<size_t>(t) * p.n_head + static_cast<size_t>(h) * group + g) * dv;
        float inv = tot.l[g] > 0 ? 1.f / tot.l[g] : 0.f;
        const float* x = tot.acc + static_cast<size_t>(g) * dv;
        for (int d = 0; d < dv; ++d) o[d] = x[d] * inv;
        if (f.rotate_v) hadamard(o, dv);  // sum_i w_i H v_i = H sum_i w_i v_i; H is its own inverse
      }
    }
  });
}

}  // namespace strata::kv
