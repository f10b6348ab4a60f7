// gemma3: embeddings scaled by sqrt(n_embd); QK-norm; norms after attention and FFN as well as
// before; GELU(tanh)-gated FFN; interleaved sliding-window layers with their own rope base.
#include <cmath>

#include "common.h"
#include "model/blocks.h"

namespace strata::model {

static void load_gemma3(Model& m) {
  m.load_common_hparams();
  HParams& hp = m.hp;
  const auto& f = m.file();
  hp.rope_neox = true;
  hp.embd_scale = std::sqrt(static_cast<float>(hp.n_embd));
  hp.rms_eps = static_cast<float>(f.get_float(m.key("attention.layer_norm_rms_epsilon")).value_or(1e-6));
  hp.rope_base_swa = static_cast<float>(f.get_float(m.key("rope.freq_base_swa")).value_or(10000.0));
  hp.sliding_window = static_cast<int>(f.get_int(m.key("attention.sliding_window")).value_or(0));
  // Every pattern-th layer is global, the others slide (Gemma 3 ships pattern 6).
  int64_t pattern = f.get_int(m.key("attention.sliding_window_pattern")).value_or(6);
  if (hp.sliding_window < 0 || pattern <= 0) throw Error("bad sliding window metadata");
  for (int il = 0; il < hp.n_layer; ++il) hp.layer_swa[il] = hp.sliding_window > 0 && (il + 1) % pattern != 0;
  // Query scaling: 1/sqrt(query_pre_attn_scalar), which the GGUF conversion stores as key_length.
  hp.attn_scale = 1.f / std::sqrt(static_cast<float>(hp.head_dim_k));
  m.load_common_weights(/*qk_norm_required=*/true, /*bias_allowed=*/false);
  for (int il = 0; il < hp.n_layer; ++il) {
    std::string p = "blk." + std::to_string(il) + ".";
    m.layers[il].post_attn_norm = m.vec(p + "post_attention_norm.weight", hp.n_embd);
    m.layers[il].post_ffn_norm = m.vec(p + "post_ffw_norm.weight", hp.n_embd);
  }
}

static void forward_gemma3(const Model& m, Runtime& rt, Batch& b) {
  const HParams& hp = m.hp;
  const int n = b.n, E = hp.n_embd;
  for (int il = 0; il < hp.n_layer; ++il) {
    const Layer& L = m.layers[il];
    AttnOptions o;
    o.rope_base = hp.layer_swa[il] ? hp.rope_base_swa : hp.rope_base;
    o.window = hp.layer_swa[il] ? hp.sliding_window : 0;
    norm_rows(b.x.data(), L.attn_norm, n, E, hp.rms_eps, b.xn.data(), rt.pool);
    const int nr = attention(m, L, il, rt, b, o);  // fewer rows past the last layer's K and V
    norm_rows(b.out.data(), L.post_attn_norm, nr, E, hp.rms_eps, b.out.data(), rt.pool);
    ops::add(b.x.data(), b.out.data(), nr * E);
    norm_rows(b.x.data(), L.ffn_norm, nr, E, hp.rms_eps, b.xn.data(), rt.pool);
    gated_ffn(L, rt, b, Activation::GeluTanh, nr);
    norm_rows(b.out.data(), L.post_ffn_norm, nr, E, hp.rms_eps, b.out.data(), rt.pool);
    ops::add(b.x.data(), b.out.data(), nr * E);
  }
}

extern const ArchSpec kGemma3{"gemma3", load_gemma3, forward_gemma3};

}  // namespace strata::model
