// qwen3: llama layout plus per-head RMS norm of Q and K before the rotation, NEOX pairs.
#include "model/blocks.h"

namespace strata::model {

static void load_qwen3(Model& m) {
  m.load_common_hparams();
  m.hp.rope_neox = true;
  m.load_common_weights(/*qk_norm_required=*/true, /*bias_allowed=*/false);
}

extern const ArchSpec kQwen3{"qwen3", load_qwen3, prenorm_decoder};

}  // namespace strata::model
