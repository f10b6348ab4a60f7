// End-to-end tests of the strata binary: outputs scripts rely on, and clear errors for bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "backend/system_memory.h"
#include "model/model.h"
#include "quant/formats.h"
#include "quant/kernels.h"
#include "test_util.h"

using namespace strata;

namespace {

struct Result {
  int code;
  std::string out;  // stdout
  std::string err;  // stderr
};

Result run(const std::string& args) {
  char errfile[] = "/tmp/strata_cli_err_XXXXXX";
  int fd = mkstemp(errfile);
  close(fd);
  std::string cmd = std::string(STRATA_BINARY) + " " + args + " 2>" + errfile + " </dev/null";
  Result r{0, "", ""};
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  r.err = test::read_file(errfile);
  std::remove(errfile);
  return r;
}

std::string last_line(const std::string& s) {
  std::string t = s;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

TEST(Cli, RunPrintIdsMatchesOracleGreedy) {
  auto j = nlohmann::json::parse(test::read_file(test::shared_dir() + "/oracle/stories260K/greedy48_p1_lily.json"));
  std::string ids;
  for (int id : j["prompt_ids"]) {
    if (!ids.empty()) ids += ',';
    ids += std::to_string(id);
  }
  std::string want;
  for (int id : j["generated_ids"]) {
    if (!want.empty()) want += ',';
    want += std::to_string(id);
  }
  auto r = run("run -m " + test::model_path("stories260K") + " --ids " + ids + " -n 48 --temp 0 --ignore-eos --print-ids -t 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(last_line(r.out), want);
  EXPECT_NE(r.err.find("tok/s"), std::string::npos);  // speed report
}

TEST(Cli, RunRespectsTokenLimit) {
  auto r = run("run -m " + test::model_path("stories260K") + " -p \"Once upon a time\" -n 10 --temp 0.8 --seed 3 --print-ids");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Once upon a time", 0), 0u);
  auto ids = last_line(r.out);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), ','), 9);
  auto again = run("run -m " + test::model_path("stories260K") + " -p \"Once upon a time\" -n 10 --temp 0.8 --seed 3 --print-ids");
  EXPECT_EQ(again.out, r.out);  // same seed, same text
}

TEST(Cli, LogitsFromPromptWritesEveryPosition) {
  std::string out = "/tmp/strata_cli_logits.f32";
  auto r = run("logits -m " + test::model_path("stories260K") + " -p \"The cat sat on the mat and looked at the dog.\" -o " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(last_line(r.out), "1,291,280,294,262,294,353,265,284,294,269,278,347,355,261,413,265,400,428,426");
  auto logits = test::read_f32(out);
  auto ref = test::read_f32(test::shared_dir() + "/oracle/stories260K/p2_cat.f32");
  ASSERT_EQ(logits.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(logits[i], ref[i], 0.05);
  std::remove(out.c_str());
}

TEST(Cli, InfoDescribesModel) {
  auto r = run("info -m " + test::model_path("tiny-gemma3-F16") + " --ctx 1024");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("architecture gemma3"), std::string::npos);
  EXPECT_NE(r.out.find("sliding window 32 on 2 of 4 layers"), std::string::npos);
  EXPECT_NE(r.out.find("KV cache"), std::string::npos);
  EXPECT_NE(r.out.find("blk.0.attn_q.weight"), std::string::npos);
}

TEST(Cli, BadInputGivesOneLineErrorAndNonZeroExit) {
  std::string trunc = "/tmp/strata_cli_trunc.gguf";
  {
    std::string b = test::read_file(test::model_path("stories260K"));
    std::ofstream(trunc, std::ios::binary).write(b.data(), static_cast<std::streamsize>(b.size() / 3));
  }
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"run -m /nonexistent.gguf -p hi", "cannot open"},
      {"run -m " + trunc + " -p hi", "truncated"},
      {"run -m " + test::shared_dir() + "/README.md -p hi", "not a GGUF"},
      {"run -m " + test::model_path("stories260K") + " --ids 1,x,3", "not a token id"},
      {"run -m " + test::model_path("stories260K") + " --ids 1,99999", "outside the vocabulary"},
      {"run -m " + test::model_path("stories260K"), "give a prompt"},
      {"run -m " + test::model_path("stories260K") + " -p hi --kv q9", "unknown KV format"},
      {"run -m " + test::model_path("stories260K") + " -p \"a long prompt for a tiny context\" --ctx 4", "context"},
      {"run -m " + test::model_path("tiny-qwen3moe-F16") + " -p hi", "not supported"},
      {"frobnicate", ""},
      {"run -p hi", "model"},
  };
  for (const auto& [args, needle] : cases) {
    auto r = run(args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << " -> " << r.err;
    EXPECT_LT(r.err.size(), 2000u) << args;
  }
  std::remove(trunc.c_str());
}

TEST(Cli, BenchJsonHasDocumentedFields) {
  auto r = run("bench -m " + test::model_path("stories260K") + " -p 16 -n 8 -r 2 -t 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"pp_tokens_per_s", "tg_tokens_per_s", "model_bytes_per_token", "bandwidth_gbps", "bandwidth_fraction"}) {
    ASSERT_TRUE(j.contains(k)) << k;
    EXPECT_TRUE(j[k].is_number()) << k;
    EXPECT_GT(j[k].get<double>(), 0) << k;
  }
  double want = j["model_bytes_per_token"].get<double>() * j["tg_tokens_per_s"].get<double>() / (j["bandwidth_gbps"].get<double>() * 1e9);
  EXPECT_NEAR(j["bandwidth_fraction"].get<double>(), want, 1e-9 + want * 1e-9);
  // Both readings, and the fraction's bandwidth the better of them.
  ASSERT_TRUE(j.contains("bandwidth_before_gbps") && j.contains("bandwidth_after_gbps"));
  const double before = j["bandwidth_before_gbps"].get<double>(), after = j["bandwidth_after_gbps"].get<double>();
  EXPECT_GT(before, 0);
  EXPECT_GT(after, 0);
  EXPECT_EQ(j["bandwidth_gbps"].get<double>(), std::max(before, after));
  ASSERT_TRUE(j.contains("bandwidth_moved") && j["bandwidth_moved"].is_boolean());
  EXPECT_EQ(j["bandwidth_moved"].get<bool>(), std::max(before, after) / std::min(before, after) > 1.3);
}

TEST(Cli, BenchTextReportsBothBandwidthReadings) {
  auto r = run("bench -m " + test::model_path("stories260K") + " -p 4 -n 4 -r 1 -t 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("measured read bandwidth: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" before, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" after); generation reads "), std::string::npos) << r.out;
}

// -d evaluates context tokens before the timed prompt and generation: the KV bytes a generated
// token reads count them (cells at the middle of the generation: depth + prompt + n / 2).
TEST(Cli, BenchDepthRunsAfterTheContext) {
  const std::string m = test::model_path("stories260K");
  auto j0 = nlohmann::json::parse(run("bench -m " + m + " -p 4 -n 4 -r 1 -t 2 --json").out);
  auto r = run("bench -m " + m + " -d 24 -p 4 -n 4 -r 1 -t 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["n_depth"].get<int>(), 24);
  EXPECT_EQ(j0["n_depth"].get<int>(), 0);
  EXPECT_GT(j["pp_tokens_per_s"].get<double>(), 0);
  EXPECT_GT(j["tg_tokens_per_s"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(j["kv_bytes_per_token"].get<double>() / j0["kv_bytes_per_token"].get<double>(), (24 + 4 + 2) / 6.0);
  // Generation alone at a depth (no prompt), and the table says the depth.
  auto t = run("bench -m " + m + " -d 16 -p 0 -n 4 -r 1 -t 2");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("after 16 context tokens"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("| tg4"), std::string::npos) << t.out;
  EXPECT_EQ(t.out.find("| pp"), std::string::npos) << t.out;
  EXPECT_NE(run("bench -m " + m + " -d -1 -n 4").code, 0);
}

TEST(Cli, KvCompareReportsEveryFormatAndStreamedTwin) {
  auto r = run("kv-compare -m " + test::model_path("tiny-llama-F16") + " -f " + test::shared_dir() +
               "/perplexity/story_ppl.txt --ctx 200 --kv f16,int8,q4_0,k8v4 --kv-resident 32 -t 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  std::map<std::string, nlohmann::json> by;
  for (auto& row : j["results"]) by[row["kv"]] = row;
  ASSERT_EQ(by.size(), 8u);
  EXPECT_LT(by["f16"]["mean_kl"].get<double>(), 1e-5);
  EXPECT_LT(by["int8"]["mean_kl"].get<double>(), 1e-3);
  EXPECT_LT(by["k8v4"]["mean_kl"].get<double>(), by["q4_0"]["mean_kl"].get<double>());  // k8v4 closer to f32 than q4_0
  EXPECT_LT(by["q4_0"]["kv_bytes_per_token"].get<double>(), by["k8v4"]["kv_bytes_per_token"].get<double>());
  for (const char* k : {"f16/res32", "int8/res32", "q4_0/res32", "k8v4/res32"}) {
    EXPECT_TRUE(by[k]["identical_to_unstreamed"].get<bool>()) << k;
    EXPECT_EQ(by[k]["mean_kl"], by[std::string(k).substr(0, std::string(k).find('/'))]["mean_kl"]) << k;
  }
}

TEST(Cli, ProbeAndNeedleCompareStreamedTwins) {
  auto p = run("probe -m " + test::model_path("tiny-qwen3-F16") + " --kv f16,k8v4 --kv-resident 32 -n 40 -t 2 --json");
  auto pj = nlohmann::json::parse(p.out);
  EXPECT_EQ(pj.size(), 4u * 5u);  // 4 probes x (f32, f16, k8v4, and two streamed twins)
  bool caused = false;
  for (auto& row : pj) {
    if (row["kv"].get<std::string>().find("/res") != std::string::npos) {
      EXPECT_EQ(row["identical_to_unstreamed"], "yes");
    }
    caused |= row["degenerate_by_cache"].get<bool>();
  }
  // Random weights are fragile: 4-bit V may make one of them loop. The exit code must say so.
  EXPECT_EQ(p.code, caused ? 1 : 0) << p.err;
  auto n = run("needle -m " + test::model_path("tiny-llama-F16") + " --ctx 256 --depths 10,90 --kv int8 --kv-resident 32 -t 2 --json");
  ASSERT_EQ(n.code, 0) << n.err;
  auto nj = nlohmann::json::parse(n.out);
  ASSERT_EQ(nj.size(), 4u);
  EXPECT_EQ(nj[1]["identical_to_unstreamed"], "yes");
  EXPECT_GT(nj[0]["prompt_tokens"].get<int>(), 200);
}

TEST(Cli, TokenizeShowsPieces) {
  auto r = run("tokenize -m " + test::shared_dir() + "/tokenizer/ggml-vocab-qwen2.gguf -p \"<|im_start|>hi\" --special --ids");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, 6), "151644");
}

}  // namespace

TEST(Cli, SynthThenQuantizeGivesARunnableModel) {
  const std::string f32 = "/tmp/strata_cli_synth.gguf", q = "/tmp/strata_cli_synth_q4km.gguf";
  auto r = run("synth --arch qwen3 --preset tiny --type F32 --seed 5 --vocab-from " + test::model_path("stories260K") +
               " -o " + f32);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("bits per weight"), std::string::npos) << r.err;
  r = run("quantize -m " + f32 + " -o " + q + " --type Q4_K_M -v");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("blk.0.attn_v.weight"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("-> Q6_K"), std::string::npos) << r.err;
  r = run("info -m " + q);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Q4_K"), std::string::npos) << r.out;
  r = run("run -m " + q + " -p \"Once upon a time\" -n 8");
  EXPECT_EQ(r.code, 0) << r.err;
  // Bad requests: unknown type, same file in and out, unreadable input. No output file is left.
  EXPECT_NE(run("quantize -m " + f32 + " -o /tmp/strata_cli_x.gguf --type Q9").err.find("valid:"), std::string::npos);
  EXPECT_NE(run("quantize -m " + f32 + " -o " + f32 + " --type Q8_0").code, 0);
  EXPECT_NE(run("quantize -m /nonexistent.gguf -o /tmp/strata_cli_x.gguf --type Q8_0").code, 0);
  EXPECT_NE(test::file_exists("/tmp/strata_cli_x.gguf"), true);
  std::remove(f32.c_str());
  std::remove(q.c_str());
}

TEST(Cli, ImatrixThenQuantizeWithIt) {
  const std::string f32 = "/tmp/strata_cli_im_f32.gguf", text = "/tmp/strata_cli_im.txt", im = "/tmp/strata_cli_im.gguf",
                    q = "/tmp/strata_cli_im_iq2.gguf";
  auto r = run("synth --arch llama --preset tiny --type F32 --vocab-from " + test::model_path("stories260K") + " -o " + f32);
  ASSERT_EQ(r.code, 0) << r.err;
  {
    std::FILE* f = std::fopen(text.c_str(), "wb");
    for (int i = 0; i < 30; ++i) std::fputs("The little dog ran to the park and found a big red ball. ", f);
    std::fclose(f);
  }
  r = run("imatrix -m " + f32 + " -f " + text + " -o " + im + " --chunk 64 --chunks 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("2 chunks of 64 tokens"), std::string::npos) << r.err;
  r = run("quantize -m " + f32 + " -o " + q + " --type IQ2_XS --imatrix " + im);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("importance matrix: 14 tensors weighted by it, 1 it has no entry for"), std::string::npos) << r.err;
  EXPECT_EQ(run("run -m " + q + " -p \"Once upon a time\" -n 4").code, 0);
  // A text shorter than one chunk, and a file that is no imatrix, are clear errors.
  r = run("imatrix -m " + f32 + " -f " + text + " -o " + im + " --chunk 4096");
  EXPECT_NE(r.err.find("fewer than one chunk"), std::string::npos) << r.err;
  r = run("quantize -m " + f32 + " -o " + q + " --type IQ2_XS --imatrix " + text);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("imatrix"), std::string::npos) << r.err;
  for (const auto& p : {f32, text, im, q}) std::remove(p.c_str());
}

// --repack-iq / --no-repack-iq: the lattice i-quants' grown layouts give the file layout's bits,
// so the same greedy tokens, and `run -v` reports the larger repacked size and the bytes grown.
// The default grows them where the kernel table's file-layout kernel is integer and the copy fits
// in half the available memory (Model::repack_grow_fits), and gives the same tokens either way.
// bench's JSON carries the same two figures, and how long the repacking took.
TEST(Cli, RepackIqKeepsOutputAndReportsItsMemory) {
  // "(A repacked, grown layouts adding B)" of run -v, in bytes (rounded to 0.01 of their units).
  auto memory = [](const std::string& err) {
    const std::string needle = " repacked, grown layouts adding ";
    const size_t at = err.find(needle);
    EXPECT_NE(at, std::string::npos) << err;
    auto number = [&](size_t from) {
      std::istringstream in(err.substr(from));
      double v = 0;
      std::string unit;
      in >> v >> unit;
      int k = 0;  // B, KiB, MiB, GiB
      for (const char* u : {"KiB", "MiB", "GiB"})
        if (unit.rfind(u, 0) == 0) k = u[0] == 'K' ? 1 : u[0] == 'M' ? 2 : 3;
      return v * std::pow(1024.0, k);
    };
    return std::pair<double, double>{number(err.rfind('(', at) + 1), number(at + needle.size())};
  };
  for (GgmlType t : {GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS, GgmlType::IQ3_S,
                     GgmlType::IQ1_S, GgmlType::IQ1_M}) {
    const std::string type = type_name(t), f = "/tmp/strata_cli_repack_" + type + ".gguf";
    auto r = run("synth --arch llama --preset tiny --type " + type + " --vocab-from " + test::model_path("stories260K") + " -o " + f);
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string gen = "run -m " + f + " -p \"Once upon a time\" -n 12 --temp 0 --ignore-eos --print-ids -t 2 -v";
    EXPECT_NE(run(gen + " --repack-iq --no-repack-iq").code, 0) << "the two flags exclude each other";
    auto plain = run(gen + " --no-repack-iq"), grown = run(gen + " --repack-iq"), auto_ = run(gen);
    ASSERT_EQ(plain.code, 0) << plain.err;
    ASSERT_EQ(grown.code, 0) << grown.err;
    ASSERT_EQ(auto_.code, 0) << auto_.err;
    EXPECT_EQ(last_line(plain.out), last_line(grown.out)) << type;
    EXPECT_EQ(last_line(plain.out), last_line(auto_.out)) << type;
    const auto [without, none] = memory(plain.err);
    const auto [with, grown_by] = memory(grown.err);
    EXPECT_EQ(none, 0) << type;
    // The grown matrices' copy against their file rows: +25 % (IQ3_S) to +61 % (IQ2_XXS).
    const double file_rows = with - without - grown_by;
    EXPECT_GT(grown_by, 0.2 * file_rows) << type;
    EXPECT_LT(grown_by, 0.7 * file_rows) << type;
    const bool expect_grown = kernels().dotq[static_cast<int>(t)] &&
                              model::Model::repack_grow_fits(static_cast<size_t>(with), available_memory_bytes());
    EXPECT_EQ(memory(auto_.err).first, expect_grown ? with : without) << type << " " << kernels().isa;
    // info says what run would hold.
    auto info = run("info -m " + f + " --no-tensors --repack-iq");
    ASSERT_EQ(info.code, 0) << info.err;
    EXPECT_EQ(memory(info.out), memory(grown.err)) << type;
    // By default too: both set the same context's KV cache aside (4096 cells unless --ctx).
    auto info_auto = run("info -m " + f + " --no-tensors");
    ASSERT_EQ(info_auto.code, 0) << info_auto.err;
    EXPECT_EQ(memory(info_auto.out), memory(auto_.err)) << type;
    if (t == GgmlType::IQ2_XS) {
      auto bench = [&](const std::string& extra) {
        auto b = run("bench -m " + f + " -p 8 -n 2 -r 1 -t 2 --json" + extra);
        EXPECT_EQ(b.code, 0) << b.err;
        return nlohmann::json::parse(b.out);
      };
      const auto jw = bench(" --repack-iq"), jn = bench(" --no-repack-iq");
      auto near = [](double v) { return 1e-4 * v + 16; };  // run -v's rounding to 0.01 of its unit
      EXPECT_EQ(jn["grown_bytes"], 0);
      EXPECT_NEAR(jw["grown_bytes"].get<double>(), grown_by, near(with));
      EXPECT_NEAR(jw["repacked_bytes"].get<double>(), with, near(with));
      EXPECT_NEAR(jn["repacked_bytes"].get<double>(), without, near(with));
      EXPECT_GT(jw["repack_seconds"].get<double>(), 0.0);
      EXPECT_LT(jw["repack_seconds"].get<double>(), 60.0);
    }
    std::remove(f.c_str());
  }
}

TEST(Cli, KvMatrixHasOneRowPerConfigurationAndContext) {
  auto r = run("kv-matrix -m " + test::model_path("tiny-llama-F16") + " --kv k8v4 --kv-resident 32 --ctx 256,300 -n 24 --depths 50 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 6u);  // (f32, k8v4, k8v4/res32) x 2 contexts
  for (const auto& row : rows) {
    for (const char* k : {"kv", "ctx", "needles_passed", "needles", "factual_tokens", "long_tokens", "long_degenerate",
                          "identical_to_unstreamed", "mean_kl"})
      EXPECT_TRUE(row.contains(k)) << k;
    EXPECT_EQ(row["needles"], 1);
  }
  EXPECT_EQ(rows[2]["kv"], "k8v4/res32");
  EXPECT_EQ(rows[2]["identical_to_unstreamed"], "yes");
  EXPECT_GT(rows[1]["mean_kl"].get<double>(), 0.0);
  EXPECT_EQ(rows[3]["ctx"], 300);
}
