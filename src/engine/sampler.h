// Token sampling: greedy, or penalties -> top-k -> top-p -> min-p -> temperature -> draw.
// Deterministic for a given seed.
#pragma once
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

namespace strata::engine {

struct SamplerParams {
  float temperature = 0.8f;  // <= 0: greedy (argmax, ties to the lowest id)
  int top_k = 40;            // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off; divides positive logits / multiplies negative ones
  int repeat_last_n = 64;
  float presence_penalty = 0.f, frequency_penalty = 0.f;
  uint64_t seed = 0xC0FFEE;
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& p);
  int32_t sample(const float* logits, int n_vocab);
  // What sample() would draw from now: the tokens left by the filters and their probabilities at
  // the temperature (one token with 1 when greedy). Draws nothing.
  std::vector<std::pair<int32_t, double>> distribution(const float* logits, int n_vocab);
  void accept(int32_t token);  // record a token for the penalties (prompt and generated)
  void reset();
  const SamplerParams& params() const { return p_; }

  static int32_t argmax(const float* logits, int n_vocab);

  struct Candidate {
    float logit, weight;
    int32_t id;
  };

 private:
  // Filters the candidates into cand_ with their weights at the temperature; returns the token
  // when there is only one answer (greedy), else -1.
  int32_t prepare(const float* logits, int n_vocab);
  void weigh(float lmax, float scale);  // cand_[i].weight = exp((logit - lmax) * scale)
  double uniform();  // [0, 1), same sequence on every platform for a seed
  SamplerParams p_;
  std::mt19937_64 rng_;
  std::deque<int32_t> recent_;
  std::vector<float> l_, vals_, exp_;  // logits after penalties; scratch
  std::vector<Candidate> cand_;
};

}  // namespace strata::engine
