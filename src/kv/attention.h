// Attention of query vectors over the cells of one sequence, walking its pages in order with a
// fixed per-page merge (online softmax), so the result does not depend on where pages live.
#pragma once
#include "backend/thread_pool.h"
#include "kv/kv_store.h"

namespace strata {
struct KernelTable;
}

namespace strata::kv {

struct AttentionParams {
  int n_head = 0;
  float scale = 1.f;   // applied to q.k
  int window = 0;      // > 0: a query at position p sees cells p - window < c <= p
  const KernelTable* kernels = nullptr;  // the kernels to use; null: the engine's (kernels())
};

// q: [n_tok][n_head][head_dim_k] (already rotated), query t is at position pos0 + t and sees
// cells [.., pos0 + t] of layer `layer`. out: [n_tok][n_head][head_dim_v].
void attend(const KvStore& store, SeqId s, int layer, int pos0, int n_tok, const float* q,
            const AttentionParams& p, float* out, ThreadPool& pool);

}  // namespace strata::kv
