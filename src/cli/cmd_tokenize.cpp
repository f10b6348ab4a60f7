// strata tokenize: show the token ids (and pieces) a model's tokenizer makes of a text.
#include <cstdio>

#include "cli/commands.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace strata::cli {

namespace {
struct TokenizeOptions {
  std::string model, prompt;
  bool special = false, no_bos = false, ids_only = false;
};

void run_tokenize(const TokenizeOptions& o) {
  auto f = gguf::File::open(o.model);
  auto tk = tok::Tokenizer::from_gguf(*f);
  auto ids = tk->encode(o.prompt, !o.no_bos, o.special);
  if (o.ids_only) {
    std::printf("%s\n", join_ids(ids).c_str());
    return;
  }
  for (int32_t id : ids) {
    std::string p = tk->piece(id, true);
    std::string shown;
    for (char c : p) {
      if (c == '\n') shown += "\\n";
      else if (c == '\t') shown += "\\t";
      else shown += c;
    }
    std::printf("%7d  '%s'\n", id, shown.c_str());
  }
  std::printf("%zu tokens\n", ids.size());
}
}  // namespace

void add_tokenize(CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  auto* cmd = app.add_subcommand("tokenize", "Show the tokens of a text");
  cmd->add_option("-m,--model", o->model, "GGUF file (only its tokenizer is read)")->required();
  cmd->add_option("-p,--prompt", o->prompt, "Text")->required();
  cmd->add_flag("--special", o->special, "Parse special-token text such as <|im_start|>");
  cmd->add_flag("--no-bos", o->no_bos, "Do not add BOS");
  cmd->add_flag("--ids", o->ids_only, "Print only the comma-separated ids");
  cmd->callback([o] { run_tokenize(*o); });
}

}  // namespace strata::cli
