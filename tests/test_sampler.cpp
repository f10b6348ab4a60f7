#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "engine/sampler.h"

using namespace strata::engine;

namespace {

std::vector<float> logits() { return {1.0f, 3.0f, 2.5f, -1.0f, 3.0f, 0.5f}; }

TEST(Sampler, GreedyTakesArgmaxLowestIdOnTies) {
  SamplerParams p;
  p.temperature = 0;
  Sampler s(p);
  auto l = logits();
  EXPECT_EQ(s.sample(l.data(), 6), 1);
}

// The one-pass loop argmax's vector passes must match: the first id that no logit exceeds.
int32_t argmax_one_pass(const float* l, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i)
    if (l[i] > l[best]) best = i;
  return best;
}

TEST(Sampler, ArgmaxMatchesTheOnePassLoop) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 4.f);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (int n : {1, 2, 15, 16, 17, 63, 64, 65, 127, 1000, 151936}) {
    for (int trial = 0; trial < 13; ++trial) {
      std::vector<float> l(n);
      for (float& x : l) x = normal(rng);
      std::uniform_int_distribution<int> at(0, n - 1);
      switch (trial) {
        case 1: l[n - 1] = 100.f; break;                   // the maximum in the tail
        case 2: l[0] = 100.f; break;                       // at the first id
        case 3: l[at(rng)] = 50.f, l[at(rng)] = 50.f; break;  // ties: the lower id
        case 4: l[at(rng)] = nan, l[at(rng)] = nan; break;  // NaNs never win...
        case 5: l[0] = nan; break;                          // ...except at id 0
        case 6: std::fill(l.begin(), l.end(), -inf); break;
        case 7: std::fill(l.begin(), l.end(), 0.f), l[at(rng)] = -0.f, l[at(rng)] = -0.f; break;  // +0 == -0
        case 8: l[at(rng)] = inf; break;
        case 9: std::fill(l.begin(), l.end(), nan), l[at(rng)] = 1.f; break;
        case 10: for (float& x : l) x = std::round(x); break;  // many ties
        case 11: l[n / 2] = 100.f, l[n - 1] = 100.f; break;
        case 12:  // a NaN after the maximum, 16 ids on (the same vector lane)
          l[n / 3] = 100.f;
          if (n / 3 + 16 < n) l[n / 3 + 16] = nan;
          break;
        default: break;
      }
      EXPECT_EQ(Sampler::argmax(l.data(), n), argmax_one_pass(l.data(), n)) << "n " << n << " trial " << trial;
    }
  }
}

TEST(Sampler, SameSeedSameSequence) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1;
  p.min_p = 0;
  p.seed = 42;
  Sampler a(p), b(p);
  auto l = logits();
  std::vector<int32_t> x, y;
  for (int i = 0; i < 50; ++i) {
    x.push_back(a.sample(l.data(), 6));
    y.push_back(b.sample(l.data(), 6));
  }
  EXPECT_EQ(x, y);
  p.seed = 43;
  Sampler c(p);
  std::vector<int32_t> z;
  for (int i = 0; i < 50; ++i) z.push_back(c.sample(l.data(), 6));
  EXPECT_NE(x, z);
}

TEST(Sampler, FiltersRestrictCandidates) {
  auto l = logits();
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_p = 1;
  p.min_p = 0;
  p.top_k = 2;  // ids 1 and 4
  Sampler s(p);
  for (int i = 0; i < 200; ++i) {
    int t = s.sample(l.data(), 6);
    EXPECT_TRUE(t == 1 || t == 4) << t;
  }
  p.top_k = 0;
  p.min_p = 0.5f;  // keeps tokens with p >= 0.5 * p_max: ids 1, 4, 2 (exp(-0.5) = 0.61)
  Sampler m(p);
  std::map<int, int> seen;
  for (int i = 0; i < 500; ++i) seen[m.sample(l.data(), 6)]++;
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_TRUE(seen.count(2));
}

TEST(Sampler, DistributionFollowsTemperature) {
  std::vector<float> l = {0.0f, std::log(3.0f)};  // p = 1/4, 3/4
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1;
  p.min_p = 0;
  Sampler s(p);
  int ones = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ones += s.sample(l.data(), 2);
  EXPECT_NEAR(ones / double(n), 0.75, 0.02);
}

TEST(Sampler, RepeatPenaltyDemotesSeenTokens) {
  SamplerParams p;
  p.temperature = 0;
  p.repeat_penalty = 2.0f;
  Sampler s(p);
  s.accept(1);
  auto l = logits();
  EXPECT_EQ(s.sample(l.data(), 6), 4);  // 1 drops to 1.5, 4 stays at 3.0
}

// The filters and weights written out the plain way: sort every token, cut, normalise.
std::map<int32_t, double> reference(const std::vector<float>& l, const SamplerParams& p) {
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < static_cast<int32_t>(l.size()); ++i)
    if (l[i] > -std::numeric_limits<float>::infinity()) ids.push_back(i);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < ids.size()) ids.resize(p.top_k);
  std::vector<double> prob;
  double sum = 0;
  for (int32_t i : ids) sum += prob.emplace_back(std::exp(static_cast<double>(l[i]) - l[ids[0]]));
  size_t keep = ids.size();
  if (p.top_p < 1) {
    double cum = 0;
    size_t k = 0;
    while (k < keep && cum < p.top_p) cum += prob[k++] / sum;
    keep = std::max<size_t>(1, k);
  }
  if (p.min_p > 0) {
    size_t k = 1;
    while (k < keep && prob[k] >= p.min_p * prob[0]) ++k;
    keep = k;
  }
  std::map<int32_t, double> d;
  double total = 0;
  for (size_t k = 0; k < keep; ++k) total += d[ids[k]] = std::exp((static_cast<double>(l[ids[k]]) - l[ids[0]]) / p.temperature);
  for (auto& [id, w] : d) w /= total;
  return d;
}

// A 5000-token vocabulary with ties, -inf and NaN: the same tokens as the plain way, with the same
// probabilities, for every mix of filters.
TEST(Sampler, DistributionMatchesSortingEveryToken) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.f, 3.f);
  std::vector<float> l(5000);
  for (float& v : l) v = nd(rng);
  for (int i = 0; i < 5000; i += 97) l[i] = l[i + 1];  // ties
  l[17] = -std::numeric_limits<float>::infinity();
  l[18] = std::nanf("");
  const float top = *std::max_element(l.begin(), l.end());
  l[4000] = top;  // a tie for the most likely token
  for (int top_k : {0, 40, 6000})
    for (float top_p : {1.f, 0.9f, 0.3f})
      for (float min_p : {0.f, 0.05f})
        for (float temp : {0.7f, 1.5f}) {
          SamplerParams p;
          p.top_k = top_k, p.top_p = top_p, p.min_p = min_p, p.temperature = temp;
          Sampler s(p);
          const auto got = s.distribution(l.data(), 5000);
          const auto want = reference(l, p);
          ASSERT_EQ(got.size(), want.size()) << top_k << " " << top_p << " " << min_p << " " << temp;
          for (auto [id, pr] : got) {
            ASSERT_TRUE(want.count(id)) << id;
            EXPECT_NEAR(pr, want.at(id), 1e-6 + 1e-5 * want.at(id)) << id;
          }
        }
}

// Draws follow distribution(); tokens at -inf or NaN are never drawn.
TEST(Sampler, DrawsFollowTheDistribution) {
  std::vector<float> l = {1.0f, 3.0f, 2.5f, -std::numeric_limits<float>::infinity(), 3.0f, 0.5f, std::nanf(""), 2.0f};
  SamplerParams p;
  p.temperature = 0.9f, p.top_k = 0, p.top_p = 0.9f, p.min_p = 0, p.seed = 5;
  Sampler s(p);
  const auto d = s.distribution(l.data(), 8);
  std::map<int32_t, int> seen;
  const int n = 40000;
  for (int i = 0; i < n; ++i) seen[s.sample(l.data(), 8)]++;
  EXPECT_EQ(seen.size(), d.size());
  for (auto [id, pr] : d) EXPECT_NEAR(seen[id] / double(n), pr, 0.01) << id;
  EXPECT_FALSE(seen.count(3) || seen.count(6));
}

}  // namespace
