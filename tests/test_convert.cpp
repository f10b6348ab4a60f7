// strata synth and strata quantize: tensor plans, determinism, and whole-model quality of every
// quantized format against the float model it came from.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "convert/convert.h"
#include "convert/imatrix.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "gguf/gguf.h"
#include "test_util.h"

using namespace strata;
namespace fs = std::filesystem;

namespace {

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("strata_convert_" + std::to_string(::getpid()) + "_" + name)).string();
}

// A file removed when the test process ends (for files a whole test suite shares).
struct TempFile {
  std::string path;
  TempFile(std::string p) : path(std::move(p)) {}
  TempFile(const TempFile&) = delete;
  ~TempFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

convert::SynthOptions tiny(const std::string& arch, const std::string& type = "F32") {
  convert::SynthOptions o;
  o.arch = arch;
  o.preset = "tiny";
  o.type = type;
  o.vocab_from = test::model_path("stories260K");  // 512 tokens keep the tests small
  o.seed = 7;
  o.n_threads = 2;
  return o;
}

std::vector<float> eval_logits(const std::string& path, const std::vector<int32_t>& ids) {
  auto m = model::Model::load(path);
  engine::SessionOptions so;
  so.n_ctx = static_cast<int>(ids.size());
  so.n_threads = 2;
  so.kv_format = kv::Format::F32;
  engine::Session s(*m, so);
  return s.eval(ids, true);
}

double kl(const float* p, const float* q, int n) {
  auto lse = [n](const float* l) {
    float mx = *std::max_element(l, l + n);
    double s = 0;
    for (int i = 0; i < n; ++i) s += std::exp(static_cast<double>(l[i]) - mx);
    return mx + std::log(s);
  };
  double lp = lse(p), lq = lse(q), r = 0;
  for (int i = 0; i < n; ++i) r += std::exp(p[i] - lp) * ((p[i] - lp) - (q[i] - lq));
  return r;
}

}  // namespace

TEST(QuantPlan, MixturesFollowTheDocumentedRules) {
  const auto& km = convert::file_type_by_name("Q4_K_M");
  const int n = 24;
  auto pick = [&](const convert::FileType& ft, const std::string& name, int64_t ne0, bool tied = true) {
    return convert::choose_type(ft, {name, {ne0, 1024}}, n, tied);
  };
  EXPECT_EQ(pick(km, "blk.0.attn_v.weight", 1024), GgmlType::Q6_K);   // first eighth
  EXPECT_EQ(pick(km, "blk.3.attn_v.weight", 1024), GgmlType::Q4_K);   // (3-3)%3 != 2
  EXPECT_EQ(pick(km, "blk.5.ffn_down.weight", 1024), GgmlType::Q6_K); // (5-3)%3 == 2
  EXPECT_EQ(pick(km, "blk.21.ffn_down.weight", 1024), GgmlType::Q6_K);  // last eighth
  EXPECT_EQ(pick(km, "blk.5.ffn_up.weight", 1024), GgmlType::Q4_K);
  EXPECT_EQ(pick(km, "token_embd.weight", 1024), GgmlType::Q6_K);     // tied: it is the output
  EXPECT_EQ(pick(km, "token_embd.weight", 1024, false), GgmlType::Q4_K);
  EXPECT_EQ(pick(km, "output.weight", 1024, false), GgmlType::Q6_K);
  // Rows that K-quant blocks do not divide fall back (896 = 3.5 x 256).
  EXPECT_EQ(pick(km, "blk.3.attn_q.weight", 896), GgmlType::Q5_0);
  EXPECT_EQ(pick(km, "token_embd.weight", 896), GgmlType::Q8_0);
  EXPECT_EQ(pick(convert::file_type_by_name("Q5_K_M"), "blk.3.attn_k.weight", 896), GgmlType::Q5_1);
  EXPECT_EQ(pick(convert::file_type_by_name("Q4_0"), "blk.3.attn_q.weight", 40), GgmlType::F16);
  const auto& ks = convert::file_type_by_name("Q4_K_S");
  EXPECT_EQ(pick(ks, "blk.2.attn_v.weight", 1024), GgmlType::Q5_K);
  EXPECT_EQ(pick(ks, "blk.4.attn_v.weight", 1024), GgmlType::Q4_K);
  EXPECT_EQ(pick(ks, "blk.2.ffn_down.weight", 1024), GgmlType::Q5_K);
  EXPECT_EQ(pick(ks, "blk.3.ffn_down.weight", 1024), GgmlType::Q4_K);
  const auto& q3m = convert::file_type_by_name("Q3_K_M");
  EXPECT_EQ(pick(q3m, "blk.1.attn_v.weight", 1024), GgmlType::Q5_K);    // the first two
  EXPECT_EQ(pick(q3m, "blk.2.attn_v.weight", 1024), GgmlType::Q4_K);
  EXPECT_EQ(pick(q3m, "blk.0.ffn_down.weight", 1024), GgmlType::Q5_K);  // first sixteenth (24 / 16 = 1)
  EXPECT_EQ(pick(q3m, "blk.1.ffn_down.weight", 1024), GgmlType::Q4_K);
  EXPECT_EQ(pick(q3m, "blk.7.attn_output.weight", 1024), GgmlType::Q4_K);
  EXPECT_EQ(pick(q3m, "blk.7.attn_qkv.weight", 1024), GgmlType::Q4_K);
  EXPECT_EQ(pick(q3m, "blk.7.ffn_up.weight", 1024), GgmlType::Q3_K);
  EXPECT_EQ(pick(q3m, "blk.7.attn_q.weight", 1024), GgmlType::Q3_K);
  EXPECT_EQ(pick(q3m, "token_embd.weight", 1024), GgmlType::Q6_K);
  const auto& q3l = convert::file_type_by_name("Q3_K_L");
  EXPECT_EQ(pick(q3l, "blk.9.attn_v.weight", 1024), GgmlType::Q5_K);
  EXPECT_EQ(pick(q3l, "blk.9.ffn_down.weight", 1024), GgmlType::Q5_K);
  EXPECT_EQ(pick(q3l, "blk.9.attn_output.weight", 1024), GgmlType::Q5_K);
  EXPECT_EQ(pick(q3l, "blk.9.attn_qkv.weight", 1024), GgmlType::Q4_K);
  EXPECT_EQ(pick(q3l, "blk.9.ffn_gate.weight", 1024), GgmlType::Q3_K);
  EXPECT_EQ(q3m.gguf_file_type, 12u);
  EXPECT_EQ(q3l.gguf_file_type, 13u);
  // Vectors stay F32; Q8_0 and float files keep their own output format.
  EXPECT_EQ(convert::choose_type(km, {"blk.0.attn_norm.weight", {1024}}, n, true), GgmlType::F32);
  EXPECT_EQ(pick(convert::file_type_by_name("Q8_0"), "token_embd.weight", 1024), GgmlType::Q8_0);
  EXPECT_EQ(pick(convert::file_type_by_name("F16"), "token_embd.weight", 1024), GgmlType::F16);
  EXPECT_THROW(convert::file_type_by_name("Q4_K_X"), Error);
}

TEST(Synth, SameSeedSameBytesWhateverTheThreads) {
  auto a = tiny("qwen2", "Q4_K_M"), b = a, c = a;
  b.n_threads = 1;
  c.seed = 8;
  const auto pa = temp_path("a.gguf"), pb = temp_path("b.gguf"), pc = temp_path("c.gguf");
  convert::synth_model(a, pa, nullptr);
  convert::synth_model(b, pb, nullptr);
  convert::synth_model(c, pc, nullptr);
  EXPECT_EQ(test::read_file(pa), test::read_file(pb));
  EXPECT_NE(test::read_file(pa), test::read_file(pc));
  for (auto& p : {pa, pb, pc}) fs::remove(p);
}

TEST(Synth, EveryArchLoadsAndPredicts) {
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    SCOPED_TRACE(arch);
    const auto path = temp_path(std::string(arch) + ".gguf");
    convert::synth_model(tiny(arch), path, nullptr);
    auto f = gguf::File::open(path);
    EXPECT_EQ(f->get_string("general.architecture").value(), arch);
    EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), 512u);
    EXPECT_EQ(f->find_tensor("blk.0.attn_q.bias") != nullptr, std::string(arch) == "qwen2");
    EXPECT_EQ(f->find_tensor("blk.0.attn_k_norm.weight") != nullptr, std::string(arch) == "qwen3");
    auto logits = eval_logits(path, {1, 20, 30, 40});
    ASSERT_EQ(logits.size(), 4u * 512);
    // A working random model: finite logits with a clear spread (the top stands out).
    float mx = -1e30f, mn = 1e30f;
    for (float v : logits) {
      ASSERT_TRUE(std::isfinite(v));
      mx = std::max(mx, v);
      mn = std::min(mn, v);
    }
    EXPECT_GT(mx - mn, 5.0f);
    fs::remove(path);
  }
}

TEST(Synth, UnknownPresetAndMissingVocabAreClearErrors) {
  auto o = tiny("qwen2");
  o.preset = "70b";
  EXPECT_THROW(convert::synth_model(o, temp_path("x.gguf"), nullptr), Error);
  o = tiny("qwen2");
  o.vocab_from.clear();
  EXPECT_THROW(convert::synth_model(o, temp_path("x.gguf"), nullptr), Error);
  EXPECT_FALSE(fs::exists(temp_path("x.gguf")));
}

// Whole-model quality of each format: a synthetic F32 model (2 layers, 256 wide) quantized by
// `quantize`, teacher-forced over 96 random tokens, compared with the F32 model. Bounds are 2-4x
// the measured values (tests/README.md has the table). KL is the measure that matters here: the
// tied embedding dominates a random model's prediction, so top-1 agreement is nearly always met.
struct FormatBound {
  const char* type;
  double max_kl;
  double min_top1;
};

class QuantizeQuality : public ::testing::TestWithParam<FormatBound> {};

TEST_P(QuantizeQuality, KlAndTop1AgainstTheFloatModel) {
  static const TempFile ref_file{[] {
    auto p = temp_path("ref-f32.gguf");
    convert::synth_model(tiny("llama", "F32"), p, nullptr);
    return p;
  }()};
  const std::string& ref = ref_file.path;
  std::mt19937 rng(3);
  std::vector<int32_t> ids(96);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % 512);
  static const std::vector<float> want = eval_logits(ref, ids);

  const auto out = temp_path(std::string("q-") + GetParam().type + ".gguf");
  convert::quantize_model(ref, out, convert::file_type_by_name(GetParam().type), 2, nullptr);
  auto got = eval_logits(out, ids);
  fs::remove(out);
  double mean_kl = 0;
  int top1 = 0;
  for (size_t t = 0; t < ids.size(); ++t) {
    const float* p = want.data() + t * 512;
    const float* q = got.data() + t * 512;
    mean_kl += kl(p, q, 512);
    top1 += engine::Sampler::argmax(p, 512) == engine::Sampler::argmax(q, 512);
  }
  mean_kl /= static_cast<double>(ids.size());
  const double top1_frac = top1 / static_cast<double>(ids.size());
  std::printf("  %-7s mean KL %.3e, top-1 %.1f %%\n", GetParam().type, mean_kl, 100 * top1_frac);
  EXPECT_LT(mean_kl, GetParam().max_kl);
  EXPECT_GE(top1_frac, GetParam().min_top1);
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizeQuality,
                         ::testing::Values(FormatBound{"F16", 1e-6, 1.0}, FormatBound{"BF16", 5e-5, 1.0},
                                           FormatBound{"Q8_0", 1e-3, 0.97}, FormatBound{"Q6_K", 5e-3, 0.97},
                                           FormatBound{"Q5_K_M", 1e-2, 0.95}, FormatBound{"Q5_1", 1e-2, 0.95},
                                           FormatBound{"Q5_0", 1e-2, 0.95}, FormatBound{"Q4_K_M", 3e-2, 0.95},
                                           FormatBound{"Q4_K_S", 3e-2, 0.95}, FormatBound{"Q4_1", 3e-2, 0.95},
                                           FormatBound{"Q4_0", 3e-2, 0.95}, FormatBound{"IQ4_NL", 3e-2, 0.95},
                                           FormatBound{"Q3_K_L", 6e-2, 0.95}, FormatBound{"Q3_K_M", 6e-2, 0.95},
                                           FormatBound{"Q3_K_S", 0.12, 0.95}, FormatBound{"Q2_K", 0.7, 0.9},
                                           FormatBound{"IQ3_S", 0.1, 0.95}, FormatBound{"IQ3_XXS", 0.15, 0.95},
                                           FormatBound{"IQ2_S", 0.35, 0.9}, FormatBound{"IQ2_XS", 0.45, 0.9},
                                           FormatBound{"IQ2_XXS", 0.45, 0.9}, FormatBound{"IQ1_M", 0.8, 0.85},
                                           FormatBound{"IQ1_S", 0.8, 0.85}),
                         [](const auto& info) { return std::string(info.param.type); });

// ---- Importance matrices ----

TEST(Imatrix, GgufFileRoundTripsAndGivesMeanSquares) {
  convert::Imatrix m;
  m.datasets = {"calib.txt"};
  m.chunk_count = 3;
  m.chunk_size = 64;
  m.entries["blk.0.attn_q.weight"] = {{4.0, 0.0, 9.0}, 2.0};
  m.entries["blk.0.ffn_down.weight"] = {{1.0, 2.0}, 4.0};
  const auto p = temp_path("im.gguf");
  convert::save_imatrix(m, p);
  auto f = gguf::File::open(p);  // llama.cpp's layout: <name>.in_sum2 [cols], <name>.counts [1]
  ASSERT_NE(f->find_tensor("blk.0.attn_q.weight.in_sum2"), nullptr);
  EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight.in_sum2")->ne[0], 3);
  EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight.counts")->ne[0], 1);
  EXPECT_EQ(f->get_string("general.type").value_or(""), "imatrix");
  const auto back = convert::load_imatrix(p);
  fs::remove(p);
  EXPECT_EQ(back.datasets, m.datasets);
  EXPECT_EQ(back.chunk_count, 3u);
  EXPECT_EQ(back.chunk_size, 64u);
  ASSERT_EQ(back.entries.size(), 2u);
  EXPECT_EQ(back.importance("blk.0.attn_q.weight", 3), (std::vector<float>{2.f, 0.f, 4.5f}));
  EXPECT_EQ(back.importance("blk.0.ffn_down.weight", 2), (std::vector<float>{0.25f, 0.5f}));
  EXPECT_TRUE(back.importance("blk.1.attn_q.weight", 3).empty());
  EXPECT_THROW(back.importance("blk.0.attn_q.weight", 4), Error);
}

// The older binary format, written byte by byte as its producer lays it out.
TEST(Imatrix, ReadsTheLegacyFormatAndRejectsTruncatedFiles) {
  std::vector<char> b;
  auto i32 = [&](int32_t v) { b.insert(b.end(), reinterpret_cast<char*>(&v), reinterpret_cast<char*>(&v) + 4); };
  auto f32 = [&](float v) { b.insert(b.end(), reinterpret_cast<char*>(&v), reinterpret_cast<char*>(&v) + 4); };
  const std::string name = "blk.2.ffn_up.weight";
  i32(1);
  i32(static_cast<int32_t>(name.size()));
  b.insert(b.end(), name.begin(), name.end());
  i32(10);  // calls
  i32(2);   // values
  f32(30.f);
  f32(5.f);
  i32(10);  // chunks
  i32(4);
  for (char c : std::string("wiki")) b.push_back(c);
  const auto p = temp_path("im.dat");
  auto write = [&](size_t n) {
    std::FILE* f = std::fopen(p.c_str(), "wb");
    std::fwrite(b.data(), 1, n, f);
    std::fclose(f);
  };
  write(b.size());
  const auto m = convert::load_imatrix(p);
  EXPECT_EQ(m.importance(name, 2), (std::vector<float>{3.f, 0.5f}));
  EXPECT_EQ(m.chunk_count, 10u);
  EXPECT_EQ(m.datasets, std::vector<std::string>{"wiki"});
  write(30);  // cut inside the values
  try {
    convert::load_imatrix(p);
    ADD_FAILURE() << "truncated file accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  fs::remove(p);
  EXPECT_THROW(convert::load_imatrix(temp_path("missing.dat")), Error);
}

// Collected over text on the tiny model: one entry per projection, every activation row counted,
// and the projections that read the same input (q, k, v; gate, up) have the same sums.
TEST(Imatrix, CollectsTheInputsOfEveryProjection) {
  const auto model = temp_path("im-model.gguf"), text = temp_path("calib.txt");
  convert::synth_model(tiny("llama", "F32"), model, nullptr);
  {
    std::FILE* f = std::fopen(text.c_str(), "wb");
    for (int i = 0; i < 40; ++i) std::fputs("Once upon a time there was a little girl who liked to play in the park. ", f);
    std::fclose(f);
  }
  convert::ImatrixOptions o;
  o.model = model;
  o.text_file = text;
  o.chunk_size = 32;
  o.max_chunks = 3;
  o.n_threads = 2;
  const auto m = convert::collect_imatrix(o, nullptr);
  EXPECT_EQ(m.chunk_count, 3u);
  auto f = gguf::File::open(model);
  int n_projections = 0;
  for (const auto& t : f->tensors())
    if (t.name.rfind("blk.", 0) == 0 && t.n_dims == 2) {
      ++n_projections;
      ASSERT_TRUE(m.entries.count(t.name)) << t.name;
      EXPECT_EQ(m.entries.at(t.name).count, 3 * 32) << t.name;
      EXPECT_EQ(static_cast<int64_t>(m.entries.at(t.name).sum2.size()), t.ne[0]) << t.name;
    }
  EXPECT_EQ(static_cast<int>(m.entries.size()), n_projections);
  for (int l = 0; l < 2; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(m.entries.at(b + "attn_q.weight").sum2, m.entries.at(b + "attn_k.weight").sum2);
    EXPECT_EQ(m.entries.at(b + "attn_q.weight").sum2, m.entries.at(b + "attn_v.weight").sum2);
    EXPECT_EQ(m.entries.at(b + "ffn_gate.weight").sum2, m.entries.at(b + "ffn_up.weight").sum2);
    EXPECT_NE(m.entries.at(b + "attn_q.weight").sum2, m.entries.at(b + "ffn_down.weight").sum2);
    double total = 0;
    for (double v : m.entries.at(b + "ffn_down.weight").sum2) total += v;
    EXPECT_GT(total, 0);
  }
  // Quantizing with it weights every lattice tensor, and the result runs within the format's bound.
  const auto im = temp_path("im-tiny.gguf"), out = temp_path("im-q.gguf");
  convert::save_imatrix(m, im);
  const auto loaded = convert::load_imatrix(im);
  const auto report = convert::quantize_model(model, out, convert::file_type_by_name("IQ2_XS"), 2, nullptr, &loaded);
  EXPECT_GT(report.with_importance, 0);
  EXPECT_EQ(report.without_importance, 1);  // the output matrix (Q6_K): imatrix collects blk.* only
  std::mt19937 rng(3);
  std::vector<int32_t> ids(32);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % 512);
  const auto want = eval_logits(model, ids), got = eval_logits(out, ids);
  double mean_kl = 0;
  for (size_t t = 0; t < ids.size(); ++t) mean_kl += kl(want.data() + t * 512, got.data() + t * 512, 512) / ids.size();
  EXPECT_LT(mean_kl, 0.45);

  // --process-output: the output matrix gets an entry too (every token's logits computed), and
  // quantizing with it leaves no tensor without one.
  o.process_output = true;
  const auto mo = convert::collect_imatrix(o, nullptr);
  const std::string output = f->find_tensor("output.weight") ? "output.weight" : "token_embd.weight";
  ASSERT_TRUE(mo.entries.count(output));
  EXPECT_EQ(mo.entries.at(output).count, 3 * 32);
  EXPECT_EQ(static_cast<int64_t>(mo.entries.at(output).sum2.size()), f->find_tensor(output)->ne[0]);
  EXPECT_EQ(static_cast<int>(mo.entries.size()), n_projections + 1);
  // The final norm's output, not any projection's input: its sums differ from every other entry's.
  for (const auto& [name, e] : mo.entries) {
    if (name == output) continue;
    EXPECT_NE(e.sum2, mo.entries.at(output).sum2) << name;
  }
  EXPECT_EQ(mo.entries.at("blk.0.attn_q.weight").sum2, m.entries.at("blk.0.attn_q.weight").sum2);
  const auto report_o = convert::quantize_model(model, out, convert::file_type_by_name("IQ2_XS"), 2, nullptr, &mo);
  EXPECT_EQ(report_o.without_importance, 0);
  EXPECT_EQ(report_o.with_importance, report.with_importance + 1);
  for (const auto& p : {model, text, im, out}) fs::remove(p);
}
