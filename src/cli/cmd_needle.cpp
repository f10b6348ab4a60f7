// strata needle: hides unique codes at given depths of a long text and asks for them back.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/kv_tools.h"
#include "common.h"
#include "engine/session.h"
#include "tokenizer/tokenizer.h"

namespace strata::cli {

namespace {
struct NeedleOptions {
  std::string model, file, kv = "f16", depths = "10,50,90";
  int ctx = 8192, resident = 0, threads = 0;
  bool json = false;
};

const char* kDoors[] = {"blue", "green", "red", "yellow", "silver", "orange", "purple", "white", "black", "golden"};

std::vector<int> parse_depths(const std::string& s) {
  std::vector<int> d;
  for (int32_t v : parse_ids(s)) {
    if (v > 100) throw Error("--depths: " + std::to_string(v) + " is not a percentage");
    d.push_back(v);
  }
  return d;
}

}  // namespace

NeedleCase needle_case(const tok::Tokenizer& tk, const std::string& hay, int ctx, int depth, int index) {
  // Split the haystack into lines; repeat them until the text fills the context.
  std::vector<std::string> lines;
  std::stringstream hs(hay);
  for (std::string l; std::getline(hs, l);) lines.push_back(l + "\n");
  if (lines.empty()) throw Error("the haystack is empty");
  std::vector<int> line_tokens;
  for (auto& l : lines) line_tokens.push_back(static_cast<int>(tk.encode(l, false, false).size()));
  const int budget = ctx - 96;  // room for the question and the answer
  if (budget < 64) throw Error("--ctx is too small for a needle test");
  std::vector<int> order;  // indices into lines, repeated
  for (int used = 0, i = 0; used + line_tokens[i % lines.size()] < budget; ++i) {
    order.push_back(i % static_cast<int>(lines.size()));
    used += line_tokens[i % lines.size()];
  }
  const char* door = kDoors[index % 10];
  char code[16];
  std::snprintf(code, sizeof code, "%05d", (index + 1) * 7919 * 13 % 100000);
  std::string needle = std::string("The secret code of the ") + door + " door is " + code + ".\n";
  size_t at = order.size() * static_cast<size_t>(depth) / 100;
  std::string text;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == at) text += needle;
    text += lines[order[i]];
  }
  if (at >= order.size()) text += needle;
  text += std::string("\nQuestion: What is the secret code of the ") + door + " door?\nAnswer: The secret code of the " + door +
          " door is";
  NeedleCase c;
  c.code = code;
  c.prompt = tk.encode(text, true, false);
  if (static_cast<int>(c.prompt.size()) + 16 > ctx)
    c.prompt.erase(c.prompt.begin() + 1, c.prompt.begin() + 1 + (c.prompt.size() + 16 - ctx));
  return c;
}

std::vector<int32_t> needle_answer(const model::Model& m, const tok::Tokenizer& tk, const NeedleCase& c, const KvVariant& v,
                                   int ctx, int threads, std::string& answer) {
  engine::SessionOptions so;
  so.n_ctx = ctx;
  so.n_threads = threads;
  so.kv_format = v.format;
  so.kv_resident = v.resident;
  engine::Session s(m, so);
  engine::SamplerParams sp;
  sp.temperature = 0;
  engine::Sampler sampler(sp);
  std::vector<int32_t> ids;
  answer.clear();
  s.generate(c.prompt, 8, sampler, [&](int32_t t) {
    ids.push_back(t);
    answer += tk.piece(t);
    return true;
  }, false, [&](int32_t t) { return tk.is_eog(t); });
  return ids;
}

namespace {
void run_needle(const NeedleOptions& o) {
  auto m = model::Model::load(o.model);
  auto tk = tok::Tokenizer::from_gguf(m->file());
  std::string hay = kDefaultHaystack;
  if (!o.file.empty()) {
    std::ifstream in(o.file, std::ios::binary);
    if (!in) throw Error("cannot read " + o.file);
    std::stringstream ss;
    ss << in.rdbuf();
    hay = ss.str();
  }
  auto variants = kv_variants(o.kv, o.resident);
  auto depths = parse_depths(o.depths);
  nlohmann::json rows = nlohmann::json::array();
  bool mismatch = false;
  if (!o.json) std::printf("needle test, context %d\n| depth | kv            | answer                   | result | identical to unstreamed |\n|-------|---------------|--------------------------|--------|-------------------------|\n", o.ctx);
  for (size_t di = 0; di < depths.size(); ++di) {
    NeedleCase c = needle_case(*tk, hay, o.ctx, depths[di], static_cast<int>(di));
    std::vector<std::vector<int32_t>> answers;
    for (size_t vi = 0; vi < variants.size(); ++vi) {
      std::string answer;
      auto ids = needle_answer(*m, *tk, c, variants[vi], o.ctx, o.threads, answer);
      bool pass = answer.find(c.code) != std::string::npos;
      std::string identical = "-";
      if (variants[vi].resident > 0) {
        identical = "NO";
        for (size_t u = 0; u < vi; ++u)
          if (variants[u].resident == 0 && variants[u].format == variants[vi].format) identical = answers[u] == ids ? "yes" : "NO";
        mismatch |= identical == "NO";
      }
      answers.push_back(ids);
      std::string shown;
      for (char ch : answer) shown += ch == '\n' ? ' ' : ch;
      if (!o.json)
        std::printf("| %4d%% | %-13s | %-24s | %-6s | %-23s |\n", depths[di], variants[vi].label().c_str(), shown.substr(0, 24).c_str(),
                    pass ? "pass" : "FAIL", identical.c_str());
      rows.push_back({{"depth", depths[di]}, {"kv", variants[vi].label()}, {"code", c.code}, {"answer", answer}, {"pass", pass},
                      {"prompt_tokens", c.prompt.size()}, {"identical_to_unstreamed", identical}});
    }
  }
  if (o.json) std::printf("%s\n", rows.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  if (mismatch) throw Error("a streamed configuration answered differently from its unstreamed twin");
}
}  // namespace

void add_needle(CLI::App& app) {
  auto o = std::make_shared<NeedleOptions>();
  auto* cmd = app.add_subcommand("needle", "Needle-in-a-haystack retrieval for each KV configuration");
  cmd->add_option("-m,--model", o->model, "GGUF file")->required();
  cmd->add_option("--ctx", o->ctx, "Context to fill")->check(CLI::PositiveNumber);
  cmd->add_option("--depths", o->depths, "Comma-separated depths in percent");
  cmd->add_option("-f,--file", o->file, "Haystack text (default: the project's documentation)");
  cmd->add_option("--kv", o->kv, "Comma-separated formats");
  cmd->add_option("--kv-resident", o->resident, "Also run each format streamed with this many resident cells")->check(CLI::NonNegativeNumber);
  cmd->add_option("-t,--threads", o->threads, "Threads")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->callback([o] { run_needle(*o); });
}

}  // namespace strata::cli
