#include "engine/session.h"

#include <algorithm>

#include "common.h"

namespace strata::engine {

kv::Config Session::kv_config(const model::Model& m, const SessionOptions& o) {
  return m.kv_config(o.n_ctx, o.kv_format, o.kv_resident, o.kv_spill);
}

Session::Session(const model::Model& m, const SessionOptions& o)
    : model_(m),
      n_ctx_(o.n_ctx),
      n_batch_(std::max(1, o.n_batch)),
      pool_(o.n_threads > 0 ? o.n_threads : ThreadPool::default_threads()) {
  if (o.n_ctx <= 0) throw Error("context size must be positive");
  kv_ = std::make_unique<kv::KvStore>(kv_config(m, o));
  seq_ = kv_->new_sequence();
}

Session::~Session() = default;

int Session::n_past() const { return kv_->length(seq_); }

void Session::reset() { kv_->truncate(seq_, 0); }

void Session::truncate(int n) { kv_->truncate(seq_, n); }

std::vector<float> Session::eval(const std::vector<int32_t>& tokens, bool all_logits) {
  const int n = static_cast<int>(tokens.size());
  if (n == 0) throw Error("nothing to evaluate");
  if (n_past() + n > n_ctx_)
    throw Error("context full: " + std::to_string(n_past()) + " + " + std::to_string(n) + " tokens exceed the context of " +
                std::to_string(n_ctx_) + " (raise --ctx)");
  const int V = model_.hparams().n_vocab;
  std::vector<float> logits(static_cast<size_t>(all_logits ? n : 1) * V);
  model::Runtime rt{*kv_, pool_};
  for (int b = 0; b < n; b += n_batch_) {
    int len = std::min(n_batch_, n - b);
    bool last = b + len == n;
    float* dst = all_logits ? logits.data() + static_cast<size_t>(b) * V : logits.data();
    if (all_logits || last) {
      model_.forward(rt, seq_, tokens.data() + b, len, n_past(), all_logits, dst);
    } else {
      std::vector<float> scratch(V);
      model_.forward(rt, seq_, tokens.data() + b, len, n_past(), false, scratch.data());
    }
  }
  return logits;
}

GenerateStats Session::generate(const std::vector<int32_t>& prompt, int n_predict, Sampler& sampler,
                                const std::function<bool(int32_t)>& on_token, bool ignore_eos,
                                const std::function<bool(int32_t)>& is_eog) {
  using clock = std::chrono::steady_clock;
  GenerateStats st;
  if (prompt.empty()) throw Error("empty prompt");
  if (static_cast<int>(prompt.size()) >= n_ctx_)
    throw Error("prompt of " + std::to_string(prompt.size()) + " tokens does not fit the context of " + std::to_string(n_ctx_) +
                " (raise --ctx)");
  auto t0 = clock::now();
  std::vector<float> logits = eval(prompt);
  for (int32_t t : prompt) sampler.accept(t);
  auto t1 = clock::now();
  st.prompt_tokens = static_cast<int>(prompt.size());
  st.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();
  const int V = model_.hparams().n_vocab;
  for (int i = 0; i < n_predict; ++i) {
    int32_t tok = sampler.sample(logits.data(), V);
    sampler.accept(tok);
    ++st.generated_tokens;
    if (!ignore_eos && is_eog && is_eog(tok)) {
      st.stopped_at_eog = true;
      break;
    }
    if (!on_token(tok)) break;
    if (i + 1 == n_predict || n_past() + 1 > n_ctx_) break;
    logits = eval({tok});
  }
  st.generate_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return st;
}

}  // namespace strata::engine
