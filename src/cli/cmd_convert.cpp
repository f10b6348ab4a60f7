// strata quantize and strata synth: write new GGUF files (see convert/).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>

#include "cli/commands.h"
#include "common.h"
#include "convert/convert.h"
#include "convert/imatrix.h"

namespace strata::cli {

namespace {
struct QuantizeOptions {
  std::string in, out, type, imatrix;
  int threads = 0;
  bool verbose = false;
};

void run_quantize(const QuantizeOptions& o) {
  const auto& ft = convert::file_type_by_name(o.type);
  if (o.in == o.out) throw Error("input and output are the same file");
  std::fprintf(stderr, "quantize: %s -> %s as %s\n", o.in.c_str(), o.out.c_str(), ft.name.c_str());
  std::optional<convert::Imatrix> im;
  if (!o.imatrix.empty()) {
    im = convert::load_imatrix(o.imatrix);
    std::fprintf(stderr, "importance matrix: %s, %zu entries, %u chunks\n", o.imatrix.c_str(), im->entries.size(), im->chunk_count);
  }
  auto report = convert::quantize_model(o.in, o.out, ft, o.threads, o.verbose ? stderr : nullptr, im ? &*im : nullptr);
  report.print(stderr);
}

void run_synth(convert::SynthOptions o, const std::string& out, const std::string& template_file) {
  if (!template_file.empty()) {
    std::ifstream f(template_file, std::ios::binary);
    if (!f) throw Error("cannot read " + template_file);
    o.chat_template.assign(std::istreambuf_iterator<char>(f), {});
    if (o.chat_template.empty()) throw Error(template_file + " is empty");
  }
  auto report = convert::synth_model(o, out, stderr);
  report.print(stderr);
  std::fprintf(stderr, "wrote %s\n", out.c_str());
}
}  // namespace

void add_quantize(CLI::App& app) {
  auto o = std::make_shared<QuantizeOptions>();
  auto* cmd = app.add_subcommand("quantize", "Re-encode an F32/F16 GGUF model in a smaller format");
  cmd->add_option("-m,--model", o->in, "Input GGUF file")->required();
  cmd->add_option("-o,--output", o->out, "Output GGUF file")->required();
  cmd->add_option("--type", o->type, "Target: " + convert::file_type_names())->required();
  cmd->add_option("-t,--threads", o->threads, "Threads (default: physical cores)");
  cmd->add_option("--imatrix", o->imatrix, "Importance matrix (strata imatrix or llama.cpp's, GGUF or .dat): "
                  "weights the quantizers' error search (i-quants, K-quants, Q4_0, Q4_1, Q5_0, Q5_1, IQ4)");
  cmd->add_flag("-v,--verbose", o->verbose, "Print each tensor's format");
  cmd->callback([o] { run_quantize(*o); });
}

void add_imatrix(CLI::App& app) {
  auto o = std::make_shared<convert::ImatrixOptions>();
  auto out = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("imatrix", "Collect an importance matrix (mean square activations) over a text");
  cmd->add_option("-m,--model", o->model, "GGUF file (F16/F32, or any format the model runs in)")->required();
  cmd->add_option("-f,--file", o->text_file, "Calibration text")->required();
  cmd->add_option("-o,--output", *out, "Output GGUF file (llama.cpp's imatrix format)")->required();
  cmd->add_option("--chunk", o->chunk_size, "Tokens per chunk, each evaluated from an empty context")
      ->capture_default_str()->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--chunks", o->max_chunks, "Use at most this many chunks (default: all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("-t,--threads", o->n_threads, "Threads (default: physical cores)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--process-output", o->process_output,
                "Also collect the output matrix (every token's logits are computed: slower, more memory)");
  cmd->callback([o, out] {
    auto m = convert::collect_imatrix(*o, stderr);
    convert::save_imatrix(m, *out);
    std::fprintf(stderr, "wrote %s: %zu weight matrices, %u chunks of %u tokens\n", out->c_str(), m.entries.size(),
                 m.chunk_count, m.chunk_size);
  });
}

void add_synth(CLI::App& app) {
  auto o = std::make_shared<convert::SynthOptions>();
  auto out = std::make_shared<std::string>();
  auto tmpl = std::make_shared<std::string>();
  std::string presets;
  for (auto& p : convert::synth_presets()) presets += (presets.empty() ? "" : ", ") + p.arch + " " + p.preset;
  auto* cmd = app.add_subcommand("synth", "Write a random-weight model with a real model's shapes (for benchmarks)");
  cmd->add_option("--arch", o->arch, "Architecture: llama, qwen2, qwen3")->required();
  cmd->add_option("--preset", o->preset, "Shape preset (" + presets + ")")->required();
  cmd->add_option("--type", o->type, "Format: " + convert::file_type_names())->capture_default_str();
  cmd->add_option("--vocab-from", o->vocab_from, "GGUF file whose tokenizer is copied")->required();
  cmd->add_option("--seed", o->seed, "Random seed (same seed, same file)")->capture_default_str();
  cmd->add_option("--layers", o->layers, "Override the number of layers");
  cmd->add_option("-t,--threads", o->n_threads, "Threads (default: physical cores)");
  cmd->add_option("--chat-template", *tmpl, "File whose text becomes tokenizer.chat_template");
  cmd->add_option("-o,--output", *out, "Output GGUF file")->required();
  cmd->callback([o, out, tmpl] { run_synth(*o, *out, *tmpl); });
}

}  // namespace strata::cli
