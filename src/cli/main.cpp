// strata: run GGUF language models on the CPU.
#include <cstdio>

#include "cli/commands.h"
#include "common.h"

int main(int argc, char** argv) {
  CLI::App app{"strata: run GGUF language models on ordinary hardware"};
  app.require_subcommand(1);
  strata::cli::add_info(app);
  strata::cli::add_run(app);
  strata::cli::add_logits(app);
  strata::cli::add_tokenize(app);
  strata::cli::add_bench(app);
  strata::cli::add_tensor(app);
  strata::cli::add_kv_compare(app);
  strata::cli::add_probe(app);
  strata::cli::add_needle(app);
  strata::cli::add_kv_matrix(app);
  strata::cli::add_serve(app);
  strata::cli::add_quantize(app);
  strata::cli::add_imatrix(app);
  strata::cli::add_synth(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
