// Importance matrices: collection through the matmul observer (the file formats are in
// imatrix_file.cpp).
#include "convert/imatrix.h"

#include <chrono>
#include <fstream>
#include <iterator>

#include "common.h"
#include "engine/session.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "ops/ops.h"
#include "tokenizer/tokenizer.h"

namespace strata::convert {

namespace {

struct Collector {
  std::map<const uint8_t*, ImatrixEntry*> by_data;
};

void observe(const ops::Matrix& w, const float* x, int n_tok, void* ctx) {
  auto& c = *static_cast<Collector*>(ctx);
  const auto it = c.by_data.find(w.data);
  if (it == c.by_data.end()) return;
  ImatrixEntry& e = *it->second;
  for (int t = 0; t < n_tok; ++t) {
    const float* xt = x + static_cast<size_t>(t) * w.cols;
    for (int64_t j = 0; j < w.cols; ++j) e.sum2[static_cast<size_t>(j)] += static_cast<double>(xt[j]) * xt[j];
  }
  e.count += n_tok;
}

}  // namespace

Imatrix collect_imatrix(const ImatrixOptions& o, std::FILE* log) {
  if (o.chunk_size < 2) throw Error("chunk size must be at least 2 tokens");
  std::ifstream f(o.text_file, std::ios::binary);
  if (!f) throw Error("cannot read " + o.text_file);
  const std::string text((std::istreambuf_iterator<char>(f)), {});
  auto model = model::Model::load(o.model);
  auto tk = tok::Tokenizer::from_gguf(model->file());
  const std::vector<int32_t> ids = tk->encode(text, false, false);
  // Each chunk starts with BOS where the vocabulary asks for one, as a prompt would.
  const bool bos = tk->add_bos() && tk->bos() >= 0;
  const size_t per_chunk = static_cast<size_t>(o.chunk_size) - (bos ? 1 : 0);
  size_t n_chunks = ids.size() / per_chunk;
  if (n_chunks == 0) throw Error(o.text_file + " has " + std::to_string(ids.size()) + " tokens, fewer than one chunk of " +
                                 std::to_string(per_chunk));
  if (o.max_chunks > 0) n_chunks = std::min(n_chunks, static_cast<size_t>(o.max_chunks));

  Imatrix m;
  m.datasets.push_back(o.text_file);
  m.chunk_size = static_cast<uint32_t>(o.chunk_size);
  Collector c;
  const std::string output_name = model->file().find_tensor("output.weight") ? "output.weight" : "token_embd.weight";
  for (const auto& t : model->file().tensors()) {
    const bool wanted = t.name.rfind("blk.", 0) == 0 || (o.process_output && t.name == output_name);
    if (!wanted || t.n_dims != 2) continue;
    ImatrixEntry& e = m.entries[t.name];
    e.sum2.assign(static_cast<size_t>(t.ne[0]), 0.0);
    c.by_data[t.data] = &e;
  }
  engine::SessionOptions so;
  so.n_ctx = o.chunk_size;
  so.n_threads = o.n_threads;
  ops::set_matmul_observer(observe, &c);
  try {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t k = 0; k < n_chunks; ++k) {
      std::vector<int32_t> chunk;
      chunk.reserve(static_cast<size_t>(o.chunk_size));
      if (bos) chunk.push_back(tk->bos());
      for (size_t i = k * per_chunk; i < (k + 1) * per_chunk; ++i) chunk.push_back(ids[i]);
      engine::Session s(*model, so);
      s.eval(chunk, o.process_output);
      m.chunk_count = static_cast<uint32_t>(k + 1);
      if (log) {
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(log, "chunk %zu/%zu (%.1f s)\n", k + 1, n_chunks, secs);
      }
    }
  } catch (...) {
    ops::set_matmul_observer(nullptr, nullptr);
    throw;
  }
  ops::set_matmul_observer(nullptr, nullptr);
  // Weights no matmul read (e.g. unused by this architecture) are left out.
  for (auto it = m.entries.begin(); it != m.entries.end();) it = it->second.count > 0 ? std::next(it) : m.entries.erase(it);
  return m;
}

}  // namespace strata::convert
