// KV store: one append path, rollback, page boundaries, and paged attention against a naive
// reference; whole-model invariants (prefill == token-by-token decode, rollback == fresh run).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/session.h"
#include "kv/attention.h"
#include "kv/kv_store.h"
#include "quant/fp16.h"
#include "test_util.h"

using namespace strata;

namespace {

kv::Config small_config(kv::Format f) {
  kv::Config c;
  c.n_layers = 2;
  c.n_kv_heads = 2;
  c.head_dim_k = 8;
  c.head_dim_v = 8;
  c.max_cells = 256;
  c.format = f;
  c.page_size = 16;
  return c;
}

std::vector<float> randv(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Naive attention over the full K/V arrays in f32.
void naive_attention(const std::vector<float>& K, const std::vector<float>& V, int n_cells, const float* q, int n_head,
                     int n_kv, int hd, float scale, int pos, int window, float* out) {
  int group = n_head / n_kv;
  for (int h = 0; h < n_head; ++h) {
    int g = h / group;
    int lo = window > 0 ? std::max(0, pos - window + 1) : 0;
    std::vector<double> w;
    double mx = -1e300;
    for (int c = lo; c <= pos; ++c) {
      double s = 0;
      for (int d = 0; d < hd; ++d) s += q[h * hd + d] * K[(static_cast<size_t>(c) * n_kv + g) * hd + d];
      w.push_back(s * scale);
      mx = std::max(mx, w.back());
    }
    double sum = 0;
    for (auto& x : w) sum += x = std::exp(x - mx);
    for (int d = 0; d < hd; ++d) {
      double acc = 0;
      for (int c = lo; c <= pos; ++c) acc += w[c - lo] * V[(static_cast<size_t>(c) * n_kv + g) * hd + d];
      out[h * hd + d] = static_cast<float>(acc / sum);
    }
  }
  (void)n_cells;
}

TEST(KvStore, AppendTruncateAndPages) {
  kv::KvStore s(small_config(kv::Format::F32));
  auto seq = s.new_sequence();
  std::mt19937 rng(1);
  auto k = randv(40 * 16, rng), v = randv(40 * 16, rng);
  for (int l = 0; l < 2; ++l) s.append(seq, l, 0, 17, k.data(), v.data());
  EXPECT_EQ(s.length(seq), 17);
  EXPECT_EQ(s.n_pages(seq, 0), 2);
  EXPECT_THROW(s.append(seq, 0, 5, 1, k.data(), v.data()), Error);  // not at the end
  s.truncate(seq, 16);
  EXPECT_EQ(s.n_pages(seq, 0), 1);
  EXPECT_EQ(s.pages_in_use(), 2);
  s.truncate(seq, 0);
  EXPECT_EQ(s.pages_in_use(), 0);
  auto other = s.new_sequence();
  EXPECT_NE(other, seq);
  s.free_sequence(seq);
  EXPECT_THROW(s.length(seq), Error);
}

TEST(KvStore, RefusesToOverflow) {
  auto c = small_config(kv::Format::F16);
  c.max_cells = 32;
  kv::KvStore s(c);
  auto seq = s.new_sequence();
  std::mt19937 rng(2);
  auto k = randv(48 * 16, rng);  // 48 cells x 2 KV heads x 8 dims
  EXPECT_THROW(s.append(seq, 0, 0, 48, k.data(), k.data()), Error);
}

// The RAM a configuration may take (what the model loader sets aside for the KV cache before it
// grows the lattice i-quants): every backing page in RAM, plus the fast tier; a spilled backing
// tier counts nothing.
TEST(KvStore, RamBytesAreTheStoresCapacities) {
  for (kv::Format f : {kv::Format::F16, kv::Format::Q4_0, kv::Format::K8V4})
    for (int resident : {0, 20, 64, 1000}) {
      auto c = small_config(f);
      c.head_dim_k = c.head_dim_v = 64;  // q4_0 and k8v4 take whole 32-value blocks
      c.max_cells = 250;
      c.resident_cells = resident;
      kv::KvStore s(c);
      const size_t want = s.backing_capacity_bytes() + (resident > 0 ? s.resident_capacity_bytes() : 0);
      EXPECT_EQ(kv::KvStore::ram_bytes(c), want) << kv::format_name(f) << " resident " << resident;
      EXPECT_EQ(want % s.page_bytes(), 0u);
      c.spill_dir = "/tmp";
      EXPECT_EQ(kv::KvStore::ram_bytes(c), resident > 0 ? s.resident_capacity_bytes() : 0u) << kv::format_name(f);
    }
}

class PagedAttention : public ::testing::TestWithParam<std::tuple<kv::Format, int, int>> {};

TEST_P(PagedAttention, MatchesNaiveReference) {
  auto [fmt, n_cells, window] = GetParam();
  auto cfg = small_config(fmt);
  kv::KvStore s(cfg);
  auto seq = s.new_sequence();
  std::mt19937 rng(n_cells * 7 + window);
  const int n_head = 4, kvd = cfg.n_kv_heads * cfg.head_dim_k;
  auto K = randv(static_cast<size_t>(n_cells) * kvd, rng), V = randv(static_cast<size_t>(n_cells) * kvd, rng);
  // Append in uneven chunks (1, 5, 16, ...) that straddle page boundaries.
  int pos = 0, step = 1;
  while (pos < n_cells) {
    int len = std::min(step, n_cells - pos);
    s.append(seq, 1, pos, len, K.data() + static_cast<size_t>(pos) * kvd, V.data() + static_cast<size_t>(pos) * kvd);
    pos += len;
    step = step * 3 % 17 + 1;
  }
  if (fmt == kv::Format::F16) {  // the reference sees what the store holds
    for (auto* arr : {&K, &V})
      for (auto& x : *arr) x = fp16_to_fp32(fp32_to_fp16(x));
  }
  ThreadPool pool(2);
  const int n_q = std::min(n_cells, 5), pos0 = n_cells - n_q;
  auto q = randv(static_cast<size_t>(n_q) * n_head * cfg.head_dim_k, rng);
  std::vector<float> out(static_cast<size_t>(n_q) * n_head * cfg.head_dim_v), ref(out.size());
  kv::AttentionParams ap{n_head, 0.35f, window};
  kv::attend(s, seq, 1, pos0, n_q, q.data(), ap, out.data(), pool);
  for (int t = 0; t < n_q; ++t)
    naive_attention(K, V, n_cells, q.data() + t * n_head * 8, n_head, 2, 8, 0.35f, pos0 + t, window, ref.data() + t * n_head * 8);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], ref[i], 2e-5) << i;
}

INSTANTIATE_TEST_SUITE_P(Shapes, PagedAttention,
                         ::testing::Combine(::testing::Values(kv::Format::F32, kv::Format::F16),
                                            ::testing::Values(1, 15, 16, 17, 33, 100), ::testing::Values(0, 7, 32)));

// A prompt's tokens share each decoded page in groups (kTokensPerWork); every token's output must
// still be the bits it gets on its own, across several 16-page chunks, with and without a window.
TEST(PagedAttention, PromptTokensGiveTheirOwnBits) {
  for (int window : {0, 50}) {
    auto cfg = small_config(kv::Format::F16);
    cfg.max_cells = 640;
    kv::KvStore s(cfg);
    auto seq = s.new_sequence();
    std::mt19937 rng(17 + window);
    const int n_cells = 600, n_head = 4, kvd = cfg.n_kv_heads * cfg.head_dim_k;
    auto K = randv(static_cast<size_t>(n_cells) * kvd, rng), V = randv(static_cast<size_t>(n_cells) * kvd, rng);
    s.append(seq, 1, 0, n_cells, K.data(), V.data());
    ThreadPool pool(2);
    const int n_q = 21, pos0 = 256 - 10;  // the query tokens straddle the first chunk's end
    auto q = randv(static_cast<size_t>(n_q) * n_head * 8, rng);
    kv::AttentionParams ap{n_head, 0.35f, window};
    std::vector<float> all(static_cast<size_t>(n_q) * n_head * 8), one(n_head * 8), ref(n_head * 8);
    kv::attend(s, seq, 1, pos0, n_q, q.data(), ap, all.data(), pool);
    for (auto* arr : {&K, &V})
      for (auto& x : *arr) x = fp16_to_fp32(fp32_to_fp16(x));
    for (int t = 0; t < n_q; ++t) {
      kv::attend(s, seq, 1, pos0 + t, 1, q.data() + t * n_head * 8, ap, one.data(), pool);
      EXPECT_EQ(0, std::memcmp(one.data(), all.data() + t * n_head * 8, one.size() * 4)) << "window " << window << " token " << t;
      naive_attention(K, V, n_cells, q.data() + t * n_head * 8, n_head, 2, 8, 0.35f, pos0 + t, window, ref.data());
      for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(one[i], ref[i], 2e-5) << "window " << window << " token " << t;
    }
  }
}

std::vector<int32_t> story_ids() { return {1, 385, 328, 432, 261, 262, 423, 388, 268, 414, 422, 395, 326, 263, 377, 267,
                                           265, 282, 295, 433, 426, 346, 394, 261, 268, 414, 422, 337, 299, 335, 345, 267,
                                           422, 419, 426, 291, 268, 414, 444, 381}; }

class ModelInvariants : public ::testing::TestWithParam<std::string> {};

// Prompt chunks, single-token decode and multi-token windows all go through the one append path
// and must give bit-identical logits.
TEST_P(ModelInvariants, PrefillEqualsIncrementalDecode) {
  auto m = model::Model::load(test::model_path(GetParam()));
  auto ids = story_ids();
  engine::SessionOptions so;
  so.n_ctx = 64;
  so.n_threads = 2;
  engine::Session a(*m, so), b(*m, so);
  auto all = a.eval(ids, true);
  const int V = m->hparams().n_vocab;
  size_t i = 0;
  for (int len : {1, 1, 3, 16, 1, 5, 13}) {  // windows that straddle 16-cell pages
    std::vector<int32_t> chunk(ids.begin() + i, ids.begin() + std::min(ids.size(), i + len));
    auto got = b.eval(chunk, true);
    ASSERT_EQ(0, std::memcmp(got.data(), all.data() + i * V, got.size() * 4)) << "at token " << i;
    i += chunk.size();
  }
}

TEST_P(ModelInvariants, RollbackEqualsFreshRun) {
  auto m = model::Model::load(test::model_path(GetParam()));
  auto ids = story_ids();
  engine::SessionOptions so;
  so.n_ctx = 64;
  so.n_threads = 2;
  engine::Session a(*m, so), b(*m, so);
  a.eval(ids);                 // 40 cells
  a.truncate(18);              // reject the last 22 (crosses a page boundary)
  std::vector<int32_t> tail = {300, 301, 302, 303, 304};
  auto got = a.eval(tail, true);
  std::vector<int32_t> fresh(ids.begin(), ids.begin() + 18);
  fresh.insert(fresh.end(), tail.begin(), tail.end());
  auto want = b.eval(fresh, true);
  const int V = m->hparams().n_vocab;
  ASSERT_EQ(0, std::memcmp(got.data(), want.data() + 18 * V, got.size() * 4));
}

INSTANTIATE_TEST_SUITE_P(Models, ModelInvariants,
                         ::testing::Values("tiny-llama-F16", "tiny-gemma3-F16", "tiny-qwen2-F16", "tiny-llama-Q4_0",
                                           "tiny-qwen3-Q8_0", "tiny-qwen3-Q4_K_M"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& ch : s) if (ch == '-') ch = '_';
                           return s;
                         });

// Continuous batching: several sequences in one step give bit-identical logits to running each
// alone (each output element is one dot product of one token's activations).
TEST_P(ModelInvariants, BatchedSequencesEqualSequentialRuns) {
  auto m = model::Model::load(test::model_path(GetParam()));
  auto ids = story_ids();
  const int V = m->hparams().n_vocab;
  kv::KvStore store(m->kv_config(256, kv::Format::F16));
  ThreadPool pool(2);
  model::Runtime rt{store, pool};
  kv::SeqId a = store.new_sequence(), b = store.new_sequence(), c = store.new_sequence();
  // Different prompt lengths, then a step mixing a prompt chunk with single-token decodes.
  std::vector<float> tmp(40 * V);
  m->forward(rt, a, ids.data(), 17, 0, false, tmp.data());
  m->forward(rt, b, ids.data() + 3, 5, 0, false, tmp.data());
  std::vector<int32_t> ta = {300}, tb = {301, 302, 303}, tc(ids.begin(), ids.begin() + 20);
  std::vector<float> batched(static_cast<size_t>(1 + 3 + 1) * V);
  m->forward_batch(rt, {{a, ta.data(), 1, false}, {b, tb.data(), 3, true}, {c, tc.data(), 20, false}}, batched.data());
  // The same work, one sequence at a time, on a fresh store.
  kv::KvStore store2(m->kv_config(256, kv::Format::F16));
  model::Runtime rt2{store2, pool};
  kv::SeqId a2 = store2.new_sequence(), b2 = store2.new_sequence(), c2 = store2.new_sequence();
  m->forward(rt2, a2, ids.data(), 17, 0, false, tmp.data());
  m->forward(rt2, b2, ids.data() + 3, 5, 0, false, tmp.data());
  std::vector<float> alone(static_cast<size_t>(5) * V);
  m->forward(rt2, a2, ta.data(), 1, 17, false, alone.data());
  m->forward(rt2, b2, tb.data(), 3, 5, true, alone.data() + V);
  m->forward(rt2, c2, tc.data(), 20, 0, false, alone.data() + 4 * static_cast<size_t>(V));
  EXPECT_EQ(0, std::memcmp(batched.data(), alone.data(), alone.size() * 4));
  EXPECT_THROW(m->forward_batch(rt, {{a, ta.data(), 1, false}, {a, ta.data(), 1, false}}, batched.data()), Error);
}

// A prompt whose last logits alone are asked for skips the other rows past the last layer's K
// and V: the same last logits as asking for every row's, and the same cache after it (the next
// token's logits), alone and with another sequence's rows in the batch.
TEST_P(ModelInvariants, LastLogitsAloneEqualAllLogits) {
  auto m = model::Model::load(test::model_path(GetParam()));
  auto ids = story_ids();
  const int V = m->hparams().n_vocab, n = static_cast<int>(ids.size());
  ThreadPool pool(2);
  kv::KvStore sa(m->kv_config(256, kv::Format::F16)), sb(m->kv_config(256, kv::Format::F16));
  model::Runtime ra{sa, pool}, rb{sb, pool};
  kv::SeqId a = sa.new_sequence(), b = sb.new_sequence(), other = sb.new_sequence();
  std::vector<float> all(static_cast<size_t>(n) * V), last(2 * static_cast<size_t>(V));
  m->forward(ra, a, ids.data(), n, 0, true, all.data());
  std::vector<int32_t> o(ids.begin(), ids.begin() + 7);
  m->forward_batch(rb, {{other, o.data(), 7, false}, {b, ids.data(), n, false}}, last.data());
  EXPECT_EQ(0, std::memcmp(last.data() + V, all.data() + static_cast<size_t>(n - 1) * V, V * 4));
  const int32_t next = 300;
  std::vector<float> na(V), nb(V);
  m->forward(ra, a, &next, 1, n, false, na.data());
  m->forward(rb, b, &next, 1, n, false, nb.data());
  EXPECT_EQ(0, std::memcmp(na.data(), nb.data(), V * 4));
}

TEST(Session, GenerationStopsAtEndOfGeneration) {
  auto m = model::Model::load(test::model_path("stories260K"));
  engine::SessionOptions so;
  so.n_ctx = 64;
  engine::Session s(*m, so);
  engine::SamplerParams sp;
  sp.temperature = 0;
  engine::Sampler sampler(sp);
  std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426};
  std::vector<int32_t> seen;
  // Oracle greedy continuation: 338, 401, 396, ... Treat 396 as end-of-generation.
  auto st = s.generate(prompt, 20, sampler, [&](int32_t t) { seen.push_back(t); return true; }, false,
                       [](int32_t t) { return t == 396; });
  EXPECT_TRUE(st.stopped_at_eog);
  EXPECT_EQ(seen, (std::vector<int32_t>{338, 401}));
  s.reset();
  engine::Sampler sampler2(sp);
  seen.clear();
  st = s.generate(prompt, 20, sampler2, [&](int32_t t) { seen.push_back(t); return true; }, true,
                  [](int32_t t) { return t == 396; });
  EXPECT_FALSE(st.stopped_at_eog);
  EXPECT_EQ(seen.size(), 20u);
}

TEST(Session, PromptLongerThanContextIsAClearError) {
  auto m = model::Model::load(test::model_path("stories260K"));
  engine::SessionOptions so;
  so.n_ctx = 8;
  engine::Session s(*m, so);
  std::vector<int32_t> ids(9, 1);
  try {
    s.eval(ids);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context"), std::string::npos);
  }
  EXPECT_EQ(s.n_past(), 0);  // nothing was written
}

}  // namespace
