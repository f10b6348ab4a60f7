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
// Prompt tokens whose attention shares each decoded page (their arithmetic does not change).
constexpr int kTokensPerWork = 8;

// Partial softmax state of the `group` query heads sharing one KV head, over a range of pages.
// Layout in a float buffer: m[group], l[group], acc[group][dv].
struct PartialView {
  float* m;
  float* l;
  float* acc;
};
PartialView view(float* base, int group, int dv) { return {base, base + group, base + 2 * group}; }
size_t partial_floats(int group, int dv) { return static_cast<size_t>(group) * (2 + dv); }

// One query token's share of a chunk: its group of query rows, its cells [lo, hi], its last
// page p1, and where its partial goes.
struct TokenChunk {
  const float* q;
  int lo, hi, p1;
  PartialView out;
};

// One head's encoded vectors of consecutive cells, a cache line at a time, into L2 (prefetcht2):
// a page's cells of one head are a short run far from the next page's, which the hardware
// prefetcher does not follow, and prefetches into L1 (prefetcht0) queued on its few line-fill
// buffers. Time in decode attention (a timer around kv::attend), bench -p 1 -n 512 -t 2 on
// q3-Q4_K_M, Zen 4, alternated runs: L1 1.30-1.44 s -> L2 0.89-0.98 s (prefetcht1 0.94-0.99,
// prefetchnta 1.40-1.42; views taken two to four pages ahead measured no better).
inline void prefetch_cell(const uint8_t* p, size_t bytes) {
  for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 1);
}

// x[j] *= scale for j < n; returns their max (-inf for none). A function of its own: inlined in
// chunk_partials, GCC kept the running max in memory, each cell waiting on the last one's store.
[[gnu::noinline]] float scale_and_max(float* x, int n, float scale) {
  float m = -INFINITY;
  for (int j = 0; j < n; ++j) {
    x[j] *= scale;
    m = std::max(m, x[j]);
  }
  return m;
}
// s + x[0] + ... + x[n-1], added in order (the same reason).
[[gnu::noinline]] float sum_after(float s, const float* x, int n) {
  for (int j = 0; j < n; ++j) s += x[j];
  return s;
}

// Computes the partials of tokens that share a KV head, a first page p0 and a first cell `lo` (a
// prompt's consecutive tokens; one token in decode): each over pages [p0, its p1], restricted to
// its cells [lo, hi]. A page's keys and values are decoded into rows once and used by every query
// head of every token: scores and the weighted sum of values are page-wide kernels. A token's
// arithmetic is the same whatever tokens it shares pages with. Pages are merged in order.
void chunk_partials(const KvStore& store, const KernelTable& kt, SeqId s, int layer, int kv_head, const TokenChunk* toks,
                    int n, int group, float scale, int p0, std::vector<float>& scratch) {
  const Config& c = store.config();
  const FormatSpec& f = store.spec();
  const int dk = c.head_dim_k, dv = c.head_dim_v, P = c.page_size;
  const size_t kh = store.k_bytes_per_head(), vh = store.v_bytes_per_head();
  const Decoder decode_k = decoder(f.k), decode_v = decoder(f.v);
  const int rows = n * group;  // query rows, token-major
  // f16 cells are read where they lie where the table has kernels for it (same bits as decoded
  // rows), but only for few query rows: the kernels convert a cell once per 4 rows of keys and
  // once per token of values, so a prompt's tokens sharing the page convert them once, decoded
  // into rows.
  const bool in_place = f.k == Codec::F16 && f.v == Codec::F16 && kt.attn_scores_f16 && kt.attn_values_f16;
  const bool keys_in_place = in_place && rows <= 4, values_in_place = in_place && n == 1;
  // Pages are head-major: this head's f16 vectors of consecutive cells are dk (dv) values apart.
  scratch.resize(static_cast<size_t>(P) * (2 * rows + dk + dv) + static_cast<size_t>(rows) * dk);
  float* scores = scratch.data();                       // [rows][P]
  float* wts = scores + static_cast<size_t>(rows) * P;  // [rows][P]
  float* keys = wts + static_cast<size_t>(rows) * P;    // [P][dk]
  float* vals = keys + static_cast<size_t>(P) * dk;     // [P][dv]
  float* qs = vals + static_cast<size_t>(P) * dv;       // [rows][dk]
  int p_end = p0;
  for (int i = 0; i < n; ++i) {
    std::copy(toks[i].q, toks[i].q + static_cast<size_t>(group) * dk, qs + static_cast<size_t>(i) * group * dk);
    p_end = std::max(p_end, toks[i].p1);
    const PartialView& o = toks[i].out;
    std::fill(o.m, o.m + group, -INFINITY);
    std::fill(o.l, o.l + group, 0.f);
    std::fill(o.acc, o.acc + static_cast<size_t>(group) * dv, 0.f);
  }
  // The next page's view is taken one page early, so its cells of this head can be prefetched
  // while this page's are decoded (each page is still looked up once).
  PageView next = store.page(s, layer, p0);
  uint64_t resident_reads = 0, backing_reads = 0;
  for (int pi = p0; pi <= p_end; ++pi) {
    const PageView pv = next;
    ++(pv.resident ? resident_reads : backing_reads);
    if (pi < p_end) next = store.page(s, layer, pi + 1);
    const bool ahead = pi < p_end;
    // Cells of this page that token i reads: [c0, c0 + cells(i)); nc: the most any token reads.
    const int c0 = std::max(toks[0].lo, pv.first);
    auto cells = [&](int i) { return toks[i].p1 >= pi ? std::min(toks[i].hi, pv.first + pv.n - 1) - c0 + 1 : 0; };
    int nc = 0;
    for (int i = 0; i < n; ++i) nc = std::max(nc, cells(i));
    if (nc <= 0) continue;
    const uint8_t* first_k = pv.k_at(kv_head, c0 - pv.first);
    if (keys_in_place) {
      if (ahead) prefetch_cell(next.k_at(kv_head, 0), nc * kh);  // the head's cells are one run
      kt.attn_scores_f16(dk, nc, reinterpret_cast<const uint16_t*>(first_k), dk, qs, rows, scores, P);
    } else {
      for (int i = 0; i < nc; ++i) {
        if (ahead) prefetch_cell(next.k_at(kv_head, i), kh);
        decode_k(first_k + i * kh, keys + static_cast<size_t>(i) * dk, dk);
      }
      kt.attn_scores(dk, nc, keys, qs, rows, scores, P);  // every query row against every key
    }
    for (int i = 0; i < n; ++i) {
      const TokenChunk& tk = toks[i];
      const int nt = cells(i);
      if (nt <= 0) continue;
      for (int g = 0; g < group; ++g) {
        const size_t r = static_cast<size_t>(i) * group + g;
        float* sg = scores + r * P;
        const float pm = scale_and_max(sg, nt, scale);
        float m_new = std::max(tk.out.m[g], pm);
        float a = std::exp(tk.out.m[g] - m_new);  // rescales what was merged so far (0 on the first page)
        kt.scale(dv, a, tk.out.acc + static_cast<size_t>(g) * dv);
        tk.out.m[g] = m_new;
        // The page's softmax weights, summed in cell order.
        kt.exp_shift(nt, sg, m_new, wts + r * P);
        tk.out.l[g] = sum_after(tk.out.l[g] * a, wts + r * P, nt);
      }
    }
    const uint8_t* first_v = pv.v_at(kv_head, c0 - pv.first);
    for (int i = 0; i < nc; ++i) {
      if (ahead) prefetch_cell(next.v_at(kv_head, i), vh);
      if (!values_in_place) decode_v(first_v + i * vh, vals + static_cast<size_t>(i) * dv, dv);
    }
    for (int i = 0; i < n; ++i)
      if (const int nt = cells(i); nt > 0) {
        const float* w = wts + static_cast<size_t>(i) * group * P;
        if (values_in_place)
          kt.attn_values_f16(dv, nt, reinterpret_cast<const uint16_t*>(first_v), dv, w, P, group, toks[i].out.acc);
        else
          kt.attn_values(dv, nt, vals, w, P, group, toks[i].out.acc);
      }
  }
  store.count_reads(resident_reads, backing_reads);
}

}  // namespace

void attend(const KvStore& store, SeqId s, int layer, int pos0, int n_tok, const float* q, const AttentionParams& p,
            float* out, ThreadPool& pool) {
  const Config& c = store.config();
  const FormatSpec& f = store.spec();
  if (p.n_head % c.n_kv_heads != 0) throw Error("attention: head count is not a multiple of the KV head count");
  if (store.length(s, layer) < pos0 + n_tok) throw Error("attention: cells missing from the KV store");
  const int group = p.n_head / c.n_kv_heads, nkv = c.n_kv_heads, dk = c.head_dim_k, dv = c.head_dim_v, P = c.page_size;
  const KernelTable& kt = p.kernels ? *p.kernels : kernels();

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
  // Work: up to kTokensPerWork consecutive tokens' tasks of one KV head and chunk, which read the
  // same pages (all of a prompt's tokens start at cell 0 without a window); with a window each
  // task is its own work.
  std::vector<int> work_tasks, work_first;
  for (int h = 0; h < nkv; ++h)
    for (int t0 = 0; t0 < n_tok; t0 += p.window > 0 ? 1 : kTokensPerWork) {
      const int t1 = std::min(n_tok, t0 + (p.window > 0 ? 1 : kTokensPerWork));
      // The block's last token reads the most chunks; chunk j starts at page 16j for every token.
      const int last = (t1 - 1) * nkv + h, chunks = first_task[last + 1] - first_task[last];
      for (int j = 0; j < chunks; ++j) {
        work_first.push_back(static_cast<int>(work_tasks.size()));
        for (int t = t0; t < t1; ++t) {
          const int th = t * nkv + h;
          if (first_task[th] + j < first_task[th + 1]) work_tasks.push_back(first_task[th] + j);
        }
      }
    }
  work_first.push_back(static_cast<int>(work_tasks.size()));
  pool.parallel_for(static_cast<int64_t>(work_first.size()) - 1, 1, [&](int64_t b, int64_t e) {
    std::vector<float> scratch;
    std::vector<TokenChunk> toks;
    for (int64_t w = b; w < e; ++w) {
      toks.clear();
      for (int i = work_first[w]; i < work_first[w + 1]; ++i) {
        const Task& k = tasks[work_tasks[i]];
        const float* qg = qr.data() + (static_cast<size_t>(k.t) * p.n_head + static_cast<size_t>(k.h) * group) * dk;
        toks.push_back({qg, k.lo, k.hi, k.p1, view(parts + static_cast<size_t>(work_tasks[i]) * pf, group, dv)});
      }
      const Task& k0 = tasks[work_tasks[work_first[w]]];
      chunk_partials(store, kt, s, layer, k0.h, toks.data(), static_cast<int>(toks.size()), group, p.scale, k0.p0, scratch);
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
