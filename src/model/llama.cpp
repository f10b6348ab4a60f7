// llama: pre-norm decoder, SwiGLU FFN, rotary embedding on adjacent pairs, optional GQA.
#include "model/blocks.h"

namespace strata::model {

static void load_llama(Model& m) {
  m.load_common_hparams();
  m.hp.rope_neox = false;
  m.load_common_weights(/*qk_norm_required=*/false, /*bias_allowed=*/false);
}

extern const ArchSpec kLlama{"llama", load_llama, prenorm_decoder};

}  // namespace strata::model
