#include <gtest/gtest.h>

#include <map>

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

}  // namespace
