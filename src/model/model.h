// A loaded model: hyper-parameters, weights used in place from the GGUF mapping, and the
// architecture's forward pass. Architectures register in model.cpp (one row each).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/huge_buffer.h"
#include "backend/thread_pool.h"
#include "gguf/gguf.h"
#include "kv/kv_store.h"
#include "ops/ops.h"

namespace strata::model {

struct HParams {
  std::string arch;
  int n_vocab = 0, n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0;
  int head_dim_k = 0, head_dim_v = 0, n_ff = 0, n_ctx_train = 0, n_rot = 0;
  float rms_eps = 1e-5f;
  float rope_base = 10000.f;
  float rope_base_swa = 10000.f;  // rope base of sliding-window layers
  bool rope_neox = false;         // rotate (i, i + n_rot/2) pairs instead of (2i, 2i+1)
  int sliding_window = 0;         // cells a sliding-window layer sees (0: none)
  std::vector<bool> layer_swa;    // [n_layer] true where the layer uses the sliding window
  float attn_scale = 0;           // multiplier of q.k
  float embd_scale = 1.f;         // input embedding multiplier
  bool tied_output = false;       // output matrix is token_embd
};

struct Layer {
  std::vector<float> attn_norm, ffn_norm, q_norm, k_norm, post_attn_norm, post_ffn_norm;
  std::vector<float> bq, bk, bv;
  ops::Matrix wq, wk, wv, wo;        // wq: [n_head*head_dim_k][n_embd], wo: [n_embd][n_head*head_dim_v]
  ops::Matrix ffn_gate, ffn_up, ffn_down;  // gate/up: [n_ff][n_embd], down: [n_embd][n_ff]
};

class Model;

// Per-call scratch for a batch of n tokens from one or more sequences. Shapes noted per buffer.
struct Batch {
  struct Segment {
    kv::SeqId seq;
    int pos0;    // position of the segment's first token in its sequence
    int offset;  // index of its first token in the batch
    int n;
  };
  int n = 0;
  std::vector<Segment> segs;
  std::vector<int> pos;    // [n] position of each token in its sequence
  std::vector<float> x;    // [n][n_embd] residual stream
  std::vector<float> xn;   // [n][n_embd] normalised input of a block
  std::vector<float> out;  // [n][n_embd] block output
  std::vector<float> q;    // [n][n_head][head_dim_k]
  std::vector<float> k;    // [n][n_kv_head][head_dim_k]
  std::vector<float> v;    // [n][n_kv_head][head_dim_v]
  std::vector<float> att;  // [n][n_head][head_dim_v]
  std::vector<float> gate, up;  // [n][n_ff]
  // The rows whose final state is read (ascending; set before the forward). Past the last
  // layer's K and V only they matter, so the forward may keep just them: then `compact` is set
  // and row i of x holds out_rows[i]'s state.
  std::vector<int> out_rows;
  bool compact = false;
  void resize(const HParams& hp, int n_tokens);
};

struct Runtime {
  kv::KvStore& kv;
  ThreadPool& pool;
};

struct ArchSpec {
  const char* name;
  void (*load)(Model& m);  // reads hparams and weights (generic loader does the common part)
  void (*forward)(const Model& m, Runtime& rt, Batch& b);  // fills b.x with final hidden states
};

class Model {
 public:
  // The formats whose 8-row layout is larger than the file (the lattice i-quants, +25 % for
  // IQ3_S to +61 % for IQ2_XXS; quant/gemm_x8.h): faster generation for more memory. Auto grows
  // them when the kernel table gives the same bits in both layouts (an integer file-layout
  // kernel) and the whole repacked copy takes at most half the memory the system reports
  // available, less what the caller reserves (repack_grow_fits), so the choice never changes the
  // output.
  enum class Grow { Auto, Always, Never };
  struct LoadOptions {
    Grow repack_grow = Grow::Auto;
    // Memory the caller will hold besides the weights, given the model (its KV cache: run, serve,
    // bench), set aside before Auto's rule; empty: none.
    std::function<uint64_t(const Model&)> reserve;
  };
  // Auto's memory rule: a repacked copy of `packed` bytes against `available` (empty: unknown).
  static bool repack_grow_fits(size_t packed, std::optional<uint64_t> available);
  static std::unique_ptr<Model> load(const std::string& path, const LoadOptions& options);
  static std::unique_ptr<Model> load(const std::string& path) { return load(path, LoadOptions{}); }

  const HParams& hparams() const { return hp; }
  const gguf::File& file() const { return *file_; }
  const ArchSpec& arch() const { return *arch_; }
  size_t weight_bytes() const;

  // Evaluates tokens[0..n) at positions [pos0, pos0 + n) of sequence seq (whose KV cache must
  // hold exactly pos0 cells). Writes logits [n][n_vocab] if all_logits, else [1][n_vocab] for
  // the last token.
  void forward(Runtime& rt, kv::SeqId seq, const int32_t* tokens, int n, int pos0, bool all_logits,
               float* logits) const;

  // One step over several sequences at once (continuous batching). Each part appends its tokens
  // after the cells its sequence already holds. Logits rows are written in part order: every
  // token's row for all_logits parts, else the last token's. Each row is bit-identical to what
  // the part would give alone.
  struct Part {
    kv::SeqId seq;
    const int32_t* tokens;
    int n;
    bool all_logits;
  };
  void forward_batch(Runtime& rt, const std::vector<Part>& parts, float* logits) const;

  kv::Config kv_config(int n_ctx, kv::Format fmt, int resident_cells = 0, const std::string& spill_dir = "") const;

  HParams hp;
  ops::Matrix tok_embd;   // [n_vocab][n_embd]
  ops::Matrix output;     // [n_vocab][n_embd] (tok_embd when tied)
  std::vector<float> output_norm;
  std::vector<Layer> layers;

  // Loader helpers for architecture files. Shapes are checked; a missing required tensor or a
  // wrong shape is a clear error naming the tensor.
  ops::Matrix matrix(const std::string& name, int64_t rows, int64_t cols, bool required = true) const;
  std::vector<float> vec(const std::string& name, int64_t n, bool required = true) const;
  std::string key(const std::string& suffix) const { return hp.arch + "." + suffix; }
  void load_common_hparams();
  void load_common_weights(bool qk_norm_required, bool bias_allowed);

  // Bytes of weights repacked at load into the 8-row layout (0 with STRATA_REPACK=0).
  size_t packed_bytes() const { return packed_bytes_; }
  // Of those, the bytes the grown layouts add over their file rows (0 when none were grown).
  size_t grown_bytes() const { return grown_bytes_; }
  // Wall time the repacking took at load, reading the file's pages in included.
  double repack_seconds() const { return repack_seconds_; }

 private:
  // Copies every projection matrix whose format has a packed kernel into the 8-row layout (the
  // layouts larger than the file as `grow` says).
  void pack_weights(const LoadOptions& options);

  std::unique_ptr<gguf::File> file_;
  const ArchSpec* arch_ = nullptr;
  HugeBuffer packed_;  // every repacked matrix, in huge pages
  size_t packed_bytes_ = 0;
  size_t grown_bytes_ = 0;
  double repack_seconds_ = 0;
};

const std::vector<const ArchSpec*>& architectures();

}  // namespace strata::model
