// strata info: metadata, tensor table, sizes and the architecture summary of a GGUF file.
#include <cstdio>
#include <map>

#include "cli/commands.h"
#include "model/model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace strata::cli {

namespace {
struct InfoOptions {
  std::string model;
  bool tensors = true;
  int ctx = 4096;
  std::string kv = "f16";
  int kv_resident = 0;
  model::Model::LoadOptions load;
};

void run_info(const InfoOptions& o) {
  kv::parse_format(o.kv);  // a bad --kv is the command line's error, not the file's
  auto f = gguf::File::open(o.model);
  std::printf("file: %s\n", o.model.c_str());
  std::printf("gguf version %u, %s, %zu metadata entries, %zu tensors, data at offset %llu\n", f->version(),
              human_bytes(static_cast<double>(f->file_size())).c_str(), f->metadata().size(), f->tensors().size(),
              static_cast<unsigned long long>(f->data_offset()));
  std::printf("\nmetadata:\n");
  for (const auto& [k, v] : f->metadata()) std::printf("  %-48s %s\n", k.c_str(), v.to_string().c_str());

  std::map<std::string, std::pair<int, uint64_t>> by_type;
  uint64_t total = 0, params = 0;
  if (o.tensors) std::printf("\ntensors:\n  %-40s %-8s %-24s %12s\n", "name", "type", "shape", "bytes");
  for (const auto& t : f->tensors()) {
    if (o.tensors)
      std::printf("  %-40s %-8s %-24s %12llu\n", t.name.c_str(), type_name(t.type).c_str(), t.shape_string().c_str(),
                  static_cast<unsigned long long>(t.n_bytes));
    auto& e = by_type[type_name(t.type)];
    ++e.first;
    e.second += t.n_bytes;
    total += t.n_bytes;
    params += static_cast<uint64_t>(t.n_elements());
  }
  std::printf("\ntensor bytes by type:\n");
  for (const auto& [name, e] : by_type)
    std::printf("  %-8s %5d tensors  %s\n", name.c_str(), e.first, human_bytes(static_cast<double>(e.second)).c_str());
  std::printf("total: %.2fM parameters, %s, %.2f bits per weight\n", params / 1e6, human_bytes(static_cast<double>(total)).c_str(),
              params ? 8.0 * total / params : 0.0);

  try {
    // Growth of the i-quants sets the KV cache aside as run does, at this --ctx, --kv and
    // --kv-resident (the format's own check is reported below).
    model::Model::LoadOptions load = o.load;
    load.reserve = [&o](const model::Model& m) -> uint64_t {
      const auto& hp = m.hparams();
      const kv::Format f = kv::parse_format(o.kv);
      if (!kv::format_unsupported_reason(f, hp.head_dim_k, hp.head_dim_v).empty()) return 0;
      return kv::KvStore::ram_bytes(m.kv_config(o.ctx, f, o.kv_resident));
    };
    auto m = model::Model::load(o.model, load);
    const auto& hp = m->hparams();
    std::printf("\narchitecture %s: %d layers, n_embd %d, %d heads / %d KV heads, head_dim %d/%d, FFN %d, vocab %d,\n",
                hp.arch.c_str(), hp.n_layer, hp.n_embd, hp.n_head, hp.n_head_kv, hp.head_dim_k, hp.head_dim_v, hp.n_ff,
                hp.n_vocab);
    std::printf("  rope %s over %d dims, base %g; rms eps %g; trained context %d; %s output\n",
                hp.rope_neox ? "neox" : "normal", hp.n_rot, hp.rope_base, hp.rms_eps, hp.n_ctx_train,
                hp.tied_output ? "tied" : "separate");
    // What run and serve would hold with the same options on this machine now (the i-quants'
    // growth depends on the memory available).
    std::printf("  weights: %s in the file (%s, at load)\n", human_bytes(static_cast<double>(m->weight_bytes())).c_str(),
                repack_summary(*m).c_str());
    if (hp.sliding_window > 0) {
      int n_swa = 0;
      for (bool b : hp.layer_swa) n_swa += b;
      std::printf("  sliding window %d on %d of %d layers (rope base %g there)\n", hp.sliding_window, n_swa, hp.n_layer,
                  hp.rope_base_swa);
    }
    std::string why = kv::format_unsupported_reason(kv::parse_format(o.kv), hp.head_dim_k, hp.head_dim_v);
    if (!why.empty()) {
      std::printf("  KV cache: %s\n", why.c_str());
    } else {
      kv::KvStore store(m->kv_config(o.ctx, kv::parse_format(o.kv), o.kv_resident));
      double per_cell_layer = static_cast<double>(store.bytes_per_cell_per_layer());
      std::printf("  KV cache (%s): %s per cell per layer, %s per token, %s for a context of %d\n", o.kv.c_str(),
                  human_bytes(per_cell_layer).c_str(), human_bytes(per_cell_layer * hp.n_layer).c_str(),
                  human_bytes(per_cell_layer * hp.n_layer * o.ctx).c_str(), o.ctx);
      if (o.kv_resident > 0)
        std::printf("  tiers: fast %s (%d cells per layer), backing %s\n",
                    human_bytes(static_cast<double>(store.resident_capacity_bytes())).c_str(), store.resident_cells_per_layer(),
                    human_bytes(static_cast<double>(store.backing_capacity_bytes())).c_str());
    }
    auto tk = tok::Tokenizer::from_gguf(m->file());
    std::printf("tokenizer: %s, %d tokens, bos %d, eos %d, add_bos %s\n", tk->kind() == tok::Kind::Spm ? "sentencepiece" : ("bpe/" + tk->pre()).c_str(),
                tk->n_vocab(), tk->bos(), tk->eos(), tk->add_bos() ? "yes" : "no");
    std::printf("chat: %s\n", tok::detect_chat_template(tk->chat_template(), hp.arch).note.c_str());
  } catch (const Error& e) {
    std::printf("\nmodel: cannot run this file: %s\n", e.what());
  }
}
}  // namespace

void add_info(CLI::App& app) {
  auto o = std::make_shared<InfoOptions>();
  auto* cmd = app.add_subcommand("info", "Show metadata, tensors, sizes and architecture of a GGUF file");
  cmd->add_option("-m,--model", o->model, "GGUF file")->required();
  cmd->add_flag("!--no-tensors", o->tensors, "Omit the tensor table");
  cmd->add_option("--ctx", o->ctx, "Context size for the KV memory estimate")->check(CLI::PositiveNumber);
  cmd->add_option("--kv", o->kv, "KV cache format for the estimate (f16, f32, int8, q4_0, k8v4)");
  cmd->add_option("--kv-resident", o->kv_resident, "Fast-tier cells per layer for the estimate")->check(CLI::NonNegativeNumber);
  add_load_options(cmd, o->load);
  cmd->callback([o] { run_info(*o); });
}

}  // namespace strata::cli
