#include "model/blocks.h"

#include <algorithm>

#include "kv/attention.h"

namespace strata::model {

namespace {
// Row loops of the layer (norms, rotary embedding) on the pool from this many values on; below
// it (one token's rows) waking the workers costs more than the loop.
constexpr int64_t kSplitValues = 16384;
}  // namespace

void norm_rows(const float* x, const std::vector<float>& w, int n, int dim, float eps, float* y, ThreadPool& pool) {
  auto rows = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      ops::rms_norm(x + static_cast<size_t>(t) * dim, w.empty() ? nullptr : w.data(), dim, eps, y + static_cast<size_t>(t) * dim);
  };
  if (static_cast<int64_t>(n) * dim < kSplitValues) rows(0, n);
  else pool.parallel_for(n, std::max<int64_t>(1, 4096 / dim), rows);
}

namespace {
void add_bias(float* y, const std::vector<float>& bias, int n, int dim) {
  if (bias.empty()) return;
  for (int t = 0; t < n; ++t) ops::add(y + static_cast<size_t>(t) * dim, bias.data(), dim);
}
}  // namespace

int attention(const Model& m, const Layer& L, int il, Runtime& rt, Batch& b, const AttnOptions& o) {
  const HParams& hp = m.hp;
  const int n = b.n, QD = hp.n_head * hp.head_dim_k, KD = hp.n_head_kv * hp.head_dim_k, VD = hp.n_head_kv * hp.head_dim_v;
  const ops::Product qkv[] = {{&L.wq, b.q.data()},   // [n][n_head][hd_k]
                              {&L.wk, b.k.data()},   // [n][n_kv][hd_k]
                              {&L.wv, b.v.data()}};  // [n][n_kv][hd_v]
  ops::matmul_shared(qkv, b.xn.data(), n, rt.pool);
  add_bias(b.q.data(), L.bq, n, QD);
  add_bias(b.k.data(), L.bk, n, KD);
  add_bias(b.v.data(), L.bv, n, VD);
  if (!L.q_norm.empty()) norm_rows(b.q.data(), L.q_norm, n * hp.n_head, hp.head_dim_k, hp.rms_eps, b.q.data(), rt.pool);
  if (!L.k_norm.empty()) norm_rows(b.k.data(), L.k_norm, n * hp.n_head_kv, hp.head_dim_k, hp.rms_eps, b.k.data(), rt.pool);
  auto rope_rows = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      ops::rope(b.q.data() + static_cast<size_t>(t) * QD, hp.n_head, hp.head_dim_k, hp.n_rot, b.pos[t], o.rope_base, hp.rope_neox);
      ops::rope(b.k.data() + static_cast<size_t>(t) * KD, hp.n_head_kv, hp.head_dim_k, hp.n_rot, b.pos[t], o.rope_base, hp.rope_neox);
    }
  };
  if (static_cast<int64_t>(n) * (QD + KD) < kSplitValues) rope_rows(0, n);
  else rt.pool.parallel_for(n, 4, rope_rows);
  kv::AttentionParams ap;
  ap.n_head = hp.n_head;
  ap.scale = hp.attn_scale;
  ap.window = o.window;
  const int OD = hp.n_head * hp.head_dim_v;
  // The last layer's queries: every row's, or only those of the rows read after it (each
  // query's attention is the same alone as in a batch, so those rows keep their bits); all of
  // them while the matmuls are observed (an importance matrix counts every row's input).
  const std::vector<int>& rows = b.out_rows;
  const bool subset = il == hp.n_layer - 1 && !rows.empty() && rows.size() < static_cast<size_t>(n) && !ops::matmul_observed();
  const int nr = subset ? static_cast<int>(rows.size()) : n;
  size_t next = 0;  // the first row of `rows` not attended yet
  for (const auto& sg : b.segs) {  // each sequence appends its own cells and attends to them
    rt.kv.append(sg.seq, il, sg.pos0, sg.n, b.k.data() + static_cast<size_t>(sg.offset) * KD,
                 b.v.data() + static_cast<size_t>(sg.offset) * VD);
    if (!subset) {
      kv::attend(rt.kv, sg.seq, il, sg.pos0, sg.n, b.q.data() + static_cast<size_t>(sg.offset) * QD, ap,
                 b.att.data() + static_cast<size_t>(sg.offset) * OD, rt.pool);
      continue;
    }
    while (next < rows.size() && rows[next] < sg.offset + sg.n) {  // runs of consecutive rows
      size_t end = next + 1;
      while (end < rows.size() && rows[end] == rows[end - 1] + 1 && rows[end] < sg.offset + sg.n) ++end;
      const int r0 = rows[next];
      kv::attend(rt.kv, sg.seq, il, b.pos[r0], static_cast<int>(end - next), b.q.data() + static_cast<size_t>(r0) * QD, ap,
                 b.att.data() + next * OD, rt.pool);
      next = end;
    }
  }
  ops::matmul(L.wo, b.att.data(), nr, b.out.data(), rt.pool);
  if (subset) {  // the residual rows follow: row i takes rows[i]'s (rows ascend, so none is lost)
    const int E = hp.n_embd;
    for (int i = 0; i < nr; ++i)
      if (rows[i] != i)
        std::copy_n(b.x.data() + static_cast<size_t>(rows[i]) * E, E, b.x.data() + static_cast<size_t>(i) * E);
    b.compact = true;
  }
  return nr;
}

void gated_ffn(const Layer& L, Runtime& rt, Batch& b, Activation act, int n) {
  // [n][n_ff]: act(gate) * up
  ops::matmul_gated(L.ffn_gate, L.ffn_up, b.xn.data(), n, act == Activation::SiLU ? ops::silu_mul : ops::gelu_tanh_mul,
                    b.gate.data(), b.up.data(), rt.pool);
  ops::matmul(L.ffn_down, b.gate.data(), n, b.out.data(), rt.pool);  // [n][n_embd]
}

void prenorm_decoder(const Model& m, Runtime& rt, Batch& b) {
  const HParams& hp = m.hp;
  const int n = b.n, E = hp.n_embd;
  AttnOptions o;
  o.rope_base = hp.rope_base;
  for (int il = 0; il < hp.n_layer; ++il) {
    const Layer& L = m.layers[il];
    norm_rows(b.x.data(), L.attn_norm, n, E, hp.rms_eps, b.xn.data(), rt.pool);
    const int nr = attention(m, L, il, rt, b, o);
    ops::add(b.x.data(), b.out.data(), nr * E);
    norm_rows(b.x.data(), L.ffn_norm, nr, E, hp.rms_eps, b.xn.data(), rt.pool);
    gated_ffn(L, rt, b, Activation::SiLU, nr);
    ops::add(b.x.data(), b.out.data(), nr * E);
  }
}

}  // namespace strata::model
