// strata probe: greedy degeneration probes under each KV configuration.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/kv_tools.h"
#include "common.h"
#include "engine/session.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace strata::cli {

namespace {

struct ProbeOptions {
  std::string model, kv = "f16,int8,q4_0,k8v4";
  int resident = 0, threads = 0, ctx = 1024, max_tokens = 400;
  bool json = false;
};

struct Probe {
  const char* name;
  const char* chat;        // the request, for models with a chat format
  const char* completion;  // the same task as plain text, for base models
  int max_tokens;
  bool short_answer;  // stops at the end of the first line of the answer
};

const Probe kProbes[] = {
    {"count_words", "Count from one to sixty in words, separated by commas.",
     "Counting from one to sixty in words: one, two, three,", 400, false},
    {"count_lines", "Count from 1 to 300, one number per line.", "Counting from 1 to 300, one number per line:\n1\n2\n3\n", 400, false},
    {"primary_colours", "What are the three primary colours? Answer in one short sentence.",
     "Question: What are the three primary colours?\nAnswer:", 64, true},
    {"json_list", "Give a JSON list of three fruit names, nothing else.", "A JSON list of three fruit names: [", 64, true},
};

const Probe& find_probe(const std::string& name) {
  for (const Probe& p : kProbes)
    if (name == p.name) return p;
  throw Error("no probe named '" + name + "'");
}
}  // namespace

std::vector<std::string> probe_names() {
  std::vector<std::string> n;
  for (const Probe& p : kProbes) n.push_back(p.name);
  return n;
}

ProbeOutcome run_probe(const model::Model& m, const tok::Tokenizer& tk, const std::string& name, const KvVariant& v,
                       int ctx, int threads, int max_tokens) {
  const Probe& p = find_probe(name);
  auto ct = tok::detect_chat_template(tk.chat_template(), m.hparams().arch);
  const bool chat = tk.chat_template().has_value() && ct.recognised;
  std::string text = chat ? tok::apply_chat_template(ct.format, {{"user", p.chat}}, true) : p.completion;
  auto prompt = tk.encode(text, true, chat);
  engine::SessionOptions so;
  so.n_ctx = ctx;
  so.n_threads = threads;
  so.kv_format = v.format;
  so.kv_resident = v.resident;
  engine::Session s(m, so);
  engine::SamplerParams sp;
  sp.temperature = 0;
  engine::Sampler sampler(sp);
  ProbeOutcome r;
  const int limit = std::min(p.max_tokens, max_tokens);
  auto st = s.generate(prompt, limit, sampler, [&](int32_t t) {
    r.ids.push_back(t);
    r.text += tk.piece(t);
    if (p.short_answer) {  // a short answer ends with its first line
      size_t nl = r.text.find('\n');
      if (nl != std::string::npos && r.text.find_first_not_of(" \t\n") < nl) {
        r.stopped = true;
        return false;
      }
    }
    return true;
  }, false, [&](int32_t t) { return tk.is_eog(t); });
  r.stopped |= st.stopped_at_eog;
  r.run = longest_repeat_run(r.ids);
  r.ratio = compression_ratio(r.text);
  return r;
}

namespace {
void run_probes(const ProbeOptions& o) {
  auto m = model::Model::load(o.model);
  auto tk = tok::Tokenizer::from_gguf(m->file());
  auto variants = kv_variants(o.kv, o.resident);
  variants.insert(variants.begin(), KvVariant{kv::Format::F32, 0});  // the reference
  const bool chat = tk->chat_template().has_value() &&
                    tok::detect_chat_template(tk->chat_template(), m->hparams().arch).recognised;
  nlohmann::json out = nlohmann::json::array();
  bool failed = false;
  if (!o.json)
    std::printf("%s, %s prompts; degenerate = an n-gram (n <= 8) repeated %d+ times in a row\n\n", o.model.c_str(),
                chat ? "chat" : "plain-text", kDegenerateRun);
  for (const Probe& p : kProbes) {
    std::vector<ProbeOutcome> results;
    if (!o.json) {
      std::printf("probe %s\n| kv            | tokens | stopped | longest repeat | compression | degenerate | identical to unstreamed |\n", p.name);
      std::printf("|---------------|--------|---------|----------------|-------------|------------|-------------------------|\n");
    }
    for (size_t vi = 0; vi < variants.size(); ++vi) {
      ProbeOutcome r = run_probe(*m, *tk, p.name, variants[vi], o.ctx, o.threads, o.max_tokens);
      std::string identical = "-";
      if (variants[vi].resident > 0) {
        identical = "NO";
        for (size_t u = 0; u < vi; ++u)
          if (variants[u].resident == 0 && variants[u].format == variants[vi].format)
            identical = results[u].ids == r.ids ? "yes" : "NO";
        failed |= identical == "NO";
      }
      bool caused = r.degenerate() && !results.empty() && !results[0].degenerate();
      failed |= caused;
      if (!o.json)
        std::printf("| %-13s | %6zu | %-7s | %14d | %11.2f | %-10s | %-23s |\n", variants[vi].label().c_str(), r.ids.size(),
                    r.stopped ? "yes" : "no", r.run, r.ratio, r.degenerate() ? (caused ? "YES (cache)" : "yes (model)") : "no",
                    identical.c_str());
      out.push_back({{"probe", p.name},
                     {"kv", variants[vi].label()},
                     {"tokens", r.ids.size()},
                     {"stopped", r.stopped},
                     {"longest_repeat", r.run},
                     {"compression_ratio", r.ratio},
                     {"degenerate", r.degenerate()},
                     {"degenerate_by_cache", caused},
                     {"identical_to_unstreamed", identical},
                     {"text", r.text}});
      results.push_back(std::move(r));
    }
    if (!o.json) std::printf("answer (f32 reference): %s\n\n", results[0].text.substr(0, 160).c_str());
  }
  if (o.json) std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  if (failed)
    throw Error("probe failed: a streamed configuration differs from its unstreamed twin, or a cache format made the output degenerate");
}
}  // namespace

void add_probe(CLI::App& app) {
  auto o = std::make_shared<ProbeOptions>();
  auto* cmd = app.add_subcommand("probe", "Greedy degeneration probes for each KV configuration (exit 1 on failure)");
  cmd->add_option("-m,--model", o->model, "GGUF file")->required();
  cmd->add_option("--kv", o->kv, "Comma-separated formats (an f32 reference always runs first)");
  cmd->add_option("--kv-resident", o->resident, "Also run each format streamed with this many resident cells")->check(CLI::NonNegativeNumber);
  cmd->add_option("-n,--max-tokens", o->max_tokens, "Cap on generated tokens per probe")->check(CLI::PositiveNumber);
  cmd->add_option("--ctx", o->ctx, "Context size")->check(CLI::PositiveNumber);
  cmd->add_option("-t,--threads", o->threads, "Threads")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->callback([o] { run_probes(*o); });
}

}  // namespace strata::cli
