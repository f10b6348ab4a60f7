// GGUF reader/writer: round trip, and truncated or corrupted files give errors, never crashes.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "gguf/gguf.h"
#include "test_util.h"

using namespace strata;

namespace {

std::vector<uint8_t> small_file() {
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 1);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "a"});
  w.set_f32_array("tokenizer.ggml.scores", {0.f, 0.f, -1.f});
  w.set_i32_array("tokenizer.ggml.token_type", {2, 3, 1});
  std::vector<float> t(64);
  for (int i = 0; i < 64; ++i) t[i] = static_cast<float>(i);
  w.add_tensor("a.weight", {32, 2}, GgmlType::F32, t.data(), t.size() * 4);
  std::vector<uint8_t> q(34 * 2, 0);
  w.add_tensor("b.weight", {64}, GgmlType::Q8_0, q.data(), q.size());
  return w.to_bytes();
}

TEST(Gguf, WriterReaderRoundTrip) {
  auto f = gguf::File::from_bytes(small_file());
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->get_string("general.architecture").value(), "llama");
  EXPECT_EQ(f->get_uint("llama.block_count").value(), 1u);
  EXPECT_FLOAT_EQ(static_cast<float>(f->get_float("llama.attention.layer_norm_rms_epsilon").value()), 1e-5f);
  EXPECT_TRUE(f->get_bool("tokenizer.ggml.add_bos_token").value());
  auto toks = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(toks.size(), 3u);
  EXPECT_EQ(toks[2], "a");
  EXPECT_EQ(f->get_i32_array("tokenizer.ggml.token_type"), (std::vector<int32_t>{2, 3, 1}));
  const auto* a = f->find_tensor("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->ne[0], 32);
  EXPECT_EQ(a->ne[1], 2);
  EXPECT_EQ(a->n_bytes, 256u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data) % 32, reinterpret_cast<uintptr_t>(f->find_tensor("b.weight")->data) % 32);
  float v;
  std::memcpy(&v, a->data + 4 * 63, 4);
  EXPECT_EQ(v, 63.f);
  EXPECT_EQ(f->find_tensor("b.weight")->type, GgmlType::Q8_0);
  EXPECT_THROW(f->get_string("llama.block_count"), Error);  // wrong type names the key
}

TEST(Gguf, EveryTruncationIsACleanError) {
  auto bytes = small_file();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    // Cutting inside the padding after the last tensor is still a valid file only if all data fits.
    try {
      auto f = gguf::File::from_bytes(cut);
      for (const auto& t : f->tensors()) ASSERT_LE(t.offset + t.n_bytes + f->data_offset(), n);
    } catch (const Error& e) {
      EXPECT_GT(std::strlen(e.what()), 10u);
    }
  }
}

TEST(Gguf, RealModelTruncationsAreCleanErrors) {
  std::string bytes = test::read_file(test::model_path("stories260K"));
  for (size_t n : {size_t(0), size_t(3), size_t(8), size_t(23), size_t(100), size_t(5000), bytes.size() / 2, bytes.size() - 1}) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    EXPECT_THROW(gguf::File::from_bytes(cut), Error) << n;
  }
}

TEST(Gguf, CorruptedFieldsAreNamed) {
  auto good = small_file();
  auto expect_error = [](std::vector<uint8_t> b, const std::string& needle) {
    try {
      gguf::File::from_bytes(std::move(b));
      ADD_FAILURE() << "no error, expected one mentioning '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto b = good;
  b[0] = 'X';
  expect_error(b, "magic");
  b = good;
  b[4] = 1;
  expect_error(b, "version");
  b = good;
  b[8] = 0xFF; b[9] = 0xFF; b[10] = 0xFF;  // tensor count
  expect_error(b, "tensor count");
  b = good;
  uint64_t huge = 1ull << 40;
  std::memcpy(&b[24], &huge, 8);  // length of the first key
  expect_error(b, "string length");
  // Tensor type: find "a.weight" info and corrupt its type and dims.
  std::string name = "a.weight";
  auto it = std::search(good.begin(), good.end(), name.begin(), name.end());
  ASSERT_NE(it, good.end());
  size_t info = static_cast<size_t>(it - good.begin()) + name.size();
  b = good;
  b[info] = 9;  // n_dims
  expect_error(b, "n_dims");
  b = good;
  b[info + 4 + 16] = 99;  // type after 2 dims
  expect_error(b, "unknown tensor type");
  b = good;
  b[info + 4] = 33;  // ne[0] = 33: not a whole number of F32 rows? F32 fits; use data overflow instead
  b[info + 5] = 0x10;
  expect_error(b, "past the end");
  b = good;
  b[info + 4 + 16 + 4] = 1;  // offset 1: misaligned
  expect_error(b, "aligned");
}

TEST(Gguf, RandomCorruptionNeverCrashes) {
  auto good = small_file();
  std::mt19937 rng(123);
  for (int trial = 0; trial < 3000; ++trial) {
    auto b = good;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) b[rng() % b.size()] = static_cast<uint8_t>(rng());
    try {
      auto f = gguf::File::from_bytes(b);
      for (const auto& t : f->tensors()) ASSERT_LE(f->data_offset() + t.offset + t.n_bytes, b.size());
    } catch (const Error&) {
    }
  }
}

TEST(Gguf, ReadsSharedModels) {
  auto f = gguf::File::open(test::model_path("tiny-qwen3-Q4_K_M"));
  EXPECT_EQ(f->get_string("general.architecture").value(), "qwen3");
  EXPECT_GT(f->tensors().size(), 30u);
  EXPECT_THROW(gguf::File::open(test::shared_dir() + "/README.md"), Error);
  EXPECT_THROW(gguf::File::open("/nonexistent/model.gguf"), Error);
}

}  // namespace
