// One conversation with a model: owns the KV store, the thread pool and one sequence, feeds
// prompts in chunks and generates tokens.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "engine/sampler.h"
#include "model/model.h"

namespace strata::engine {

struct SessionOptions {
  int n_ctx = 4096;
  int n_threads = 0;     // 0: physical cores
  int n_batch = 256;     // prompt tokens per forward call
  kv::Format kv_format = kv::Format::F16;
  int kv_resident = 0;     // fast-tier cells per layer (0: no limit, nothing streams)
  std::string kv_spill;    // directory for a file-backed backing tier
};

struct GenerateStats {
  int prompt_tokens = 0;
  double prompt_seconds = 0;
  int generated_tokens = 0;
  double generate_seconds = 0;
  bool stopped_at_eog = false;
};

class Session {
 public:
  Session(const model::Model& m, const SessionOptions& o);
  // The KV store a session makes for these options.
  static kv::Config kv_config(const model::Model& m, const SessionOptions& o);
  ~Session();

  const model::Model& model() const { return model_; }
  int n_ctx() const { return n_ctx_; }
  int n_past() const;
  int n_threads() const { return pool_.size(); }
  kv::KvStore& kv() { return *kv_; }
  void reset();  // forget every cell
  void truncate(int n);  // keep the first n cells (rollback)

  // Appends tokens to the sequence. Returns logits of the last token ([n_vocab]), or of every
  // token ([n][n_vocab]) when all_logits.
  std::vector<float> eval(const std::vector<int32_t>& tokens, bool all_logits = false);

  // Feeds the prompt, then samples up to n_predict tokens, calling on_token for each; stops at an
  // end-of-generation token unless ignore_eos, or when on_token returns false.
  GenerateStats generate(const std::vector<int32_t>& prompt, int n_predict, Sampler& sampler,
                         const std::function<bool(int32_t)>& on_token, bool ignore_eos,
                         const std::function<bool(int32_t)>& is_eog);

 private:
  const model::Model& model_;
  int n_ctx_;
  int n_batch_;
  ThreadPool pool_;
  std::unique_ptr<kv::KvStore> kv_;
  kv::SeqId seq_;
};

}  // namespace strata::engine
