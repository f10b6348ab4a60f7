// qwen2: llama layout plus Q/K/V biases, NEOX rotary pairs, usually tied embeddings.
#include "model/blocks.h"

namespace strata::model {

static void load_qwen2(Model& m) {
  m.load_common_hparams();
  m.hp.rope_neox = true;
  m.load_common_weights(/*qk_norm_required=*/false, /*bias_allowed=*/true);
}

extern const ArchSpec kQwen2{"qwen2", load_qwen2, prenorm_decoder};

}  // namespace strata::model
