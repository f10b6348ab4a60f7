// Building blocks that architecture files compose: norms over a batch, attention through the KV
// store, gated FFNs, and the pre-norm decoder shared by llama-like families.
#pragma once
#include "model/model.h"

namespace strata::model {

// y[t] = rms_norm(x[t]) * w for each of n rows of `dim` (split over the pool when there are
// enough of them: a prompt's rows, not one token's).
void norm_rows(const float* x, const std::vector<float>& w, int n, int dim, float eps, float* y, ThreadPool& pool);

struct AttnOptions {
  float rope_base = 10000.f;
  int window = 0;  // sliding window in cells, 0 = full attention
};

// b.xn -> b.out: Q/K/V projections (+ biases, + per-head QK RMS norm if the layer has them),
// rotary embedding, append of K/V to the cache, attention, output projection. Returns the rows
// the rest of the layer works on: b.n, or in the last layer, where only b.out_rows matter past
// K and V, those rows alone (attention for their queries only, b.x compacted to them: see
// Batch::compact).
int attention(const Model& m, const Layer& L, int il, Runtime& rt, Batch& b, const AttnOptions& o);

enum class Activation { SiLU, GeluTanh };
// b.xn -> b.out for the first n rows: down(act(gate(x)) * up(x)).
void gated_ffn(const Layer& L, Runtime& rt, Batch& b, Activation act, int n);

// Pre-norm decoder: x += attn(norm(x)); x += ffn(norm(x)). llama, qwen2, qwen3.
void prenorm_decoder(const Model& m, Runtime& rt, Batch& b);

}  // namespace strata::model
