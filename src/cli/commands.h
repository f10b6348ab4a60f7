// Subcommands of the strata binary.
#pragma once
#include <CLI/CLI.hpp>

#include "engine/session.h"
#include "model/model.h"

namespace strata::cli {

void add_info(CLI::App& app);
void add_run(CLI::App& app);
void add_logits(CLI::App& app);
void add_tokenize(CLI::App& app);
void add_bench(CLI::App& app);
void add_tensor(CLI::App& app);
void add_kv_compare(CLI::App& app);
void add_probe(CLI::App& app);
void add_needle(CLI::App& app);
void add_serve(CLI::App& app);
void add_quantize(CLI::App& app);
void add_imatrix(CLI::App& app);
void add_synth(CLI::App& app);
void add_kv_matrix(CLI::App& app);

// The KV cache options shared by run, logits and bench.
struct KvOptions {
  std::string format;
  int resident = 0;
  std::string spill;
};
void add_kv_options(CLI::App* cmd, KvOptions& o, const std::string& default_format);
// Copies the options into a session's settings (validating the format name).
void apply_kv_options(const KvOptions& o, strata::engine::SessionOptions& so);

// --repack-iq / --no-repack-iq (run, serve, bench, logits, info): Model::LoadOptions::repack_grow
// (default auto).
void add_load_options(CLI::App* cmd, model::Model::LoadOptions& o);

// Shared parsing helpers.
std::vector<int32_t> parse_ids(const std::string& s);  // "1,2,3" -> {1,2,3}; throws on junk
std::string join_ids(const std::vector<int32_t>& ids);
std::string human_bytes(double b);
// "A repacked, grown layouts adding B, in S s": the weights a loaded model copied into 8-row
// layouts, what the grown layouts (lattice i-quants, TQ1_0) added, and how long the copy took (run -v, serve, info).
std::string repack_summary(const model::Model& m);

// Writes bytes to stdout, holding back an incomplete UTF-8 sequence at the end until it completes.
class Utf8Stream {
 public:
  void write(const std::string& bytes);
  void flush();  // emits whatever is held back

 private:
  std::string pending_;
};

}  // namespace strata::cli
