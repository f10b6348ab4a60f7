#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace strata::engine {

Sampler::Sampler(const SamplerParams& p) : p_(p), rng_(p.seed) {}

void Sampler::reset() {
  rng_.seed(p_.seed);
  recent_.clear();
}

void Sampler::accept(int32_t t) {
  recent_.push_back(t);
  while (static_cast<int>(recent_.size()) > std::max(0, p_.repeat_last_n)) recent_.pop_front();
}

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0); }

int32_t Sampler::argmax(const float* l, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i)
    if (l[i] > l[best]) best = i;
  return best;
}

int32_t Sampler::sample(const float* logits, int n) {
  cand_.resize(n);
  for (int i = 0; i < n; ++i) cand_[i] = {logits[i], i};
  // Penalties over the recent window.
  if (!recent_.empty() && (p_.repeat_penalty != 1.f || p_.presence_penalty != 0.f || p_.frequency_penalty != 0.f)) {
    std::unordered_map<int32_t, int> count;
    for (int32_t t : recent_) ++count[t];
    for (auto [t, c] : count) {
      if (t < 0 || t >= n) continue;
      float& v = cand_[t].first;
      if (p_.repeat_penalty != 1.f) v = v > 0 ? v / p_.repeat_penalty : v * p_.repeat_penalty;
      v -= p_.presence_penalty + p_.frequency_penalty * static_cast<float>(c);
    }
  }
  if (p_.temperature <= 0) {
    int32_t best = 0;
    for (int i = 1; i < n; ++i)
      if (cand_[i].first > cand_[best].first) best = i;
    return best;
  }
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t keep = cand_.size();
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < keep) {
    keep = p_.top_k;
    std::partial_sort(cand_.begin(), cand_.begin() + keep, cand_.end(), by_logit);
  } else {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }
  cand_.resize(keep);
  // Probabilities at temperature 1 for top-p / min-p, as other engines do.
  std::vector<double> prob(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += prob[i] = std::exp(static_cast<double>(cand_[i].first - cand_[0].first));
  for (auto& q : prob) q /= sum;
  if (p_.top_p < 1.f) {
    double cum = 0;
    size_t k = 0;
    while (k < keep) {
      cum += prob[k++];
      if (cum >= p_.top_p) break;
    }
    keep = std::max<size_t>(1, k);
  }
  if (p_.min_p > 0) {
    size_t k = 1;
    while (k < keep && prob[k] >= p_.min_p * prob[0]) ++k;
    keep = k;
  }
  std::vector<double> w(keep);
  double total = 0;
  for (size_t i = 0; i < keep; ++i)
    total += w[i] = std::exp(static_cast<double>(cand_[i].first - cand_[0].first) / p_.temperature);
  double r = uniform() * total;
  for (size_t i = 0; i < keep; ++i) {
    r -= w[i];
    if (r < 0) return cand_[i].second;
  }
  return cand_[keep - 1].second;
}

}  // namespace strata::engine
