#include "model/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "backend/system_memory.h"
#include "common.h"
#include "quant/kernels.h"
#include "quant/quant.h"

namespace strata::model {

extern const ArchSpec kLlama, kQwen2, kQwen3, kGemma3;

const std::vector<const ArchSpec*>& architectures() {
  static const std::vector<const ArchSpec*> all = {&kLlama, &kQwen2, &kQwen3, &kGemma3};
  return all;
}

void Batch::resize(const HParams& hp, int n_tokens) {
  n = n_tokens;
  size_t N = static_cast<size_t>(n_tokens);
  x.resize(N * hp.n_embd);
  xn.resize(N * hp.n_embd);
  out.resize(N * hp.n_embd);
  q.resize(N * hp.n_head * hp.head_dim_k);
  k.resize(N * hp.n_head_kv * hp.head_dim_k);
  v.resize(N * hp.n_head_kv * hp.head_dim_v);
  att.resize(N * hp.n_head * hp.head_dim_v);
  gate.resize(N * hp.n_ff);
  up.resize(N * hp.n_ff);
}

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& options) {
  std::unique_ptr<Model> m(new Model());
  m->file_ = gguf::File::open(path);
  auto arch = m->file_->get_string("general.architecture");
  if (!arch) throw Error(path + ": missing metadata 'general.architecture'");
  for (const ArchSpec* a : architectures())
    if (*arch == a->name) m->arch_ = a;
  if (!m->arch_) {
    std::string names;
    for (const ArchSpec* a : architectures()) names += std::string(names.empty() ? "" : ", ") + a->name;
    throw Error(path + ": architecture '" + *arch + "' is not supported (supported: " + names + ")");
  }
  m->hp.arch = *arch;
  try {
    m->arch_->load(*m);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
  const char* repack = std::getenv("STRATA_REPACK");
  if (!repack || std::strcmp(repack, "0") != 0) m->pack_weights(options);
  return m;
}

bool Model::repack_grow_fits(size_t packed, std::optional<uint64_t> available) {
  return available && packed <= *available / 2;
}

void Model::pack_weights(const LoadOptions& options) {
  const Grow grow = options.repack_grow;
  std::vector<ops::Matrix*> mats = {&output};
  for (Layer& L : layers)
    for (ops::Matrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.ffn_gate, &L.ffn_up, &L.ffn_down}) mats.push_back(w);
  const KernelTable& k = kernels();
  // One buffer for all packed matrices: huge pages are whole 2 MiB, so one mapping per matrix
  // would leave a partly used page at the end of each (about 1 MiB per matrix on average).
  struct Job {
    ops::Matrix* w;
    int64_t groups;
    size_t stride, offset;
    bool grows;
  };
  std::vector<Job> jobs;
  for (ops::Matrix* w : mats) {
    const int t = static_cast<int>(w->type);
    if (w->empty() || w->packed || !packable(w->type) || !k.gemm_x8[t]) continue;
    const bool grows = packing_grows(w->type);
    // Auto grows only where the file layout's integer kernel gives the grown layout's bits (the
    // portable table dequantizes the file layout instead).
    if (grows && (grow == Grow::Never || (grow == Grow::Auto && !k.dotq[t]))) continue;
    if (w->rows < kPackRows || w->cols % 32 != 0) continue;
    jobs.push_back(Job{w, w->rows / kPackRows, packed_group_bytes(w->type, w->cols), 0, grows});
  }
  auto place = [&] {
    size_t total = 0;
    for (Job& j : jobs) {
      j.offset = total;
      total += (packed_matrix_bytes(j.w->type, j.groups, j.w->cols) + 63) / 64 * 64;  // each matrix starts on a cache line
    }
    return total;
  };
  size_t total = place();
  const bool any_grows = std::any_of(jobs.begin(), jobs.end(), [](const Job& j) { return j.grows; });
  auto room = [&]() -> std::optional<uint64_t> {  // available memory less the caller's reserve
    const std::optional<uint64_t> available = available_memory_bytes();
    const uint64_t reserve = options.reserve ? options.reserve(*this) : 0;
    if (!available) return std::nullopt;
    return *available > reserve ? *available - reserve : 0;
  };
  if (grow == Grow::Auto && any_grows && !repack_grow_fits(total, room())) {
    std::erase_if(jobs, [](const Job& j) { return j.grows; });
    total = place();
  }
  if (jobs.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  packed_ = HugeBuffer(total);
  ThreadPool pool(ThreadPool::default_threads());
  for (const Job& j : jobs) {
    uint8_t* dst = packed_.data() + j.offset;
    const ops::Matrix& src = *j.w;
    pool.parallel_for(j.groups, 16, [&](int64_t g0, int64_t g1) {
      pack_matrix8(src.type, src.data, src.row_stride, src.cols, g0, g1, dst);
    });
    j.w->packed = dst;
    j.w->packed_stride = j.stride;
    // The packed rows are never read from the file again (row lookups of a tied embedding fault
    // their pages back in).
    file_->release(src.data, static_cast<size_t>(j.groups * kPackRows) * src.row_stride);
    packed_bytes_ += j.stride * static_cast<size_t>(j.groups);
    if (j.grows) grown_bytes_ += j.stride * static_cast<size_t>(j.groups) - static_cast<size_t>(j.groups * kPackRows) * src.row_stride;
  }
  repack_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

size_t Model::weight_bytes() const {
  size_t total = 0;
  for (const auto& t : file_->tensors()) total += t.n_bytes;
  return total;
}

ops::Matrix Model::matrix(const std::string& name, int64_t rows, int64_t cols, bool required) const {
  const gguf::TensorInfo* t = file_->find_tensor(name);
  if (!t) {
    if (required) throw Error("missing tensor '" + name + "'");
    return {};
  }
  if (t->n_dims > 2 || t->ne[0] != cols || t->ne[1] != rows)
    throw Error("tensor '" + name + "' has shape " + t->shape_string() + ", expected [" + std::to_string(cols) + ", " +
                std::to_string(rows) + "]");
  if (!type_info(t->type).supported)
    throw Error("tensor '" + name + "' has type " + type_name(t->type) + ", which this build cannot compute with yet");
  ops::Matrix mat;
  mat.type = t->type;
  mat.rows = rows;
  mat.cols = cols;
  mat.data = t->data;
  mat.row_stride = row_bytes(t->type, cols);
  return mat;
}

std::vector<float> Model::vec(const std::string& name, int64_t n, bool required) const {
  const gguf::TensorInfo* t = file_->find_tensor(name);
  if (!t) {
    if (required) throw Error("missing tensor '" + name + "'");
    return {};
  }
  if (t->n_elements() != n || t->ne[0] != n)
    throw Error("tensor '" + name + "' has shape " + t->shape_string() + ", expected [" + std::to_string(n) + "]");
  if (!type_info(t->type).supported) throw Error("tensor '" + name + "' has unsupported type " + type_name(t->type));
  std::vector<float> out(n);
  dequantize_row_ref(t->type, t->data, out.data(), n);
  return out;
}

void Model::load_common_hparams() {
  const auto& f = *file_;
  auto req = [&](const std::string& k) -> int64_t {
    auto v = f.get_int(key(k));
    if (!v) throw Error("missing metadata '" + key(k) + "'");
    if (*v <= 0 || *v > (1 << 30)) throw Error("metadata '" + key(k) + "' out of range: " + std::to_string(*v));
    return *v;
  };
  hp.n_embd = static_cast<int>(req("embedding_length"));
  hp.n_layer = static_cast<int>(req("block_count"));
  hp.n_head = static_cast<int>(req("attention.head_count"));
  hp.n_head_kv = f.has(key("attention.head_count_kv")) ? static_cast<int>(req("attention.head_count_kv")) : hp.n_head;
  hp.n_ff = static_cast<int>(req("feed_forward_length"));
  hp.n_ctx_train = f.has(key("context_length")) ? static_cast<int>(req("context_length")) : 2048;
  hp.head_dim_k = f.has(key("attention.key_length")) ? static_cast<int>(req("attention.key_length")) : hp.n_embd / hp.n_head;
  hp.head_dim_v = f.has(key("attention.value_length")) ? static_cast<int>(req("attention.value_length")) : hp.n_embd / hp.n_head;
  hp.n_rot = f.has(key("rope.dimension_count")) ? static_cast<int>(req("rope.dimension_count")) : hp.head_dim_k;
  hp.rms_eps = static_cast<float>(f.get_float(key("attention.layer_norm_rms_epsilon")).value_or(1e-5));
  hp.rope_base = static_cast<float>(f.get_float(key("rope.freq_base")).value_or(10000.0));
  if (hp.n_head % hp.n_head_kv != 0) throw Error("head_count is not a multiple of head_count_kv");
  if (hp.n_rot > hp.head_dim_k || hp.n_rot % 2) throw Error("rope.dimension_count must be even and <= key_length");
  if (!(hp.rms_eps > 0) || !(hp.rope_base > 0)) throw Error("bad rms epsilon or rope base");
  hp.attn_scale = 1.f / std::sqrt(static_cast<float>(hp.head_dim_k));
  hp.layer_swa.assign(hp.n_layer, false);

  const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight");
  if (!emb) throw Error("missing tensor 'token_embd.weight'");
  hp.n_vocab = static_cast<int>(emb->ne[1]);
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (!tokens.empty() && static_cast<int>(tokens.size()) != hp.n_vocab)
    throw Error("vocabulary has " + std::to_string(tokens.size()) + " tokens but token_embd has " +
                std::to_string(hp.n_vocab) + " rows");
}

void Model::load_common_weights(bool qk_norm_required, bool bias_allowed) {
  const int E = hp.n_embd, QD = hp.n_head * hp.head_dim_k, KD = hp.n_head_kv * hp.head_dim_k,
            VD = hp.n_head_kv * hp.head_dim_v, OD = hp.n_head * hp.head_dim_v;
  tok_embd = matrix("token_embd.weight", hp.n_vocab, E);
  output_norm = vec("output_norm.weight", E);
  output = matrix("output.weight", hp.n_vocab, E, false);
  hp.tied_output = output.empty();
  if (hp.tied_output) output = tok_embd;
  layers.resize(hp.n_layer);
  for (int il = 0; il < hp.n_layer; ++il) {
    Layer& L = layers[il];
    std::string p = "blk." + std::to_string(il) + ".";
    L.attn_norm = vec(p + "attn_norm.weight", E);
    L.wq = matrix(p + "attn_q.weight", QD, E);
    L.wk = matrix(p + "attn_k.weight", KD, E);
    L.wv = matrix(p + "attn_v.weight", VD, E);
    L.wo = matrix(p + "attn_output.weight", E, OD);
    if (bias_allowed) {
      L.bq = vec(p + "attn_q.bias", QD, false);
      L.bk = vec(p + "attn_k.bias", KD, false);
      L.bv = vec(p + "attn_v.bias", VD, false);
    }
    L.q_norm = vec(p + "attn_q_norm.weight", hp.head_dim_k, qk_norm_required);
    L.k_norm = vec(p + "attn_k_norm.weight", hp.head_dim_k, qk_norm_required);
    L.ffn_norm = vec(p + "ffn_norm.weight", E);
    L.ffn_gate = matrix(p + "ffn_gate.weight", hp.n_ff, E);
    L.ffn_up = matrix(p + "ffn_up.weight", hp.n_ff, E);
    L.ffn_down = matrix(p + "ffn_down.weight", E, hp.n_ff);
  }
}

kv::Config Model::kv_config(int n_ctx, kv::Format fmt, int resident_cells, const std::string& spill_dir) const {
  kv::Config c;
  c.n_layers = hp.n_layer;
  c.n_kv_heads = hp.n_head_kv;
  c.head_dim_k = hp.head_dim_k;
  c.head_dim_v = hp.head_dim_v;
  c.max_cells = n_ctx;
  c.format = fmt;
  c.resident_cells = resident_cells;
  c.spill_dir = spill_dir;
  return c;
}

void Model::forward(Runtime& rt, kv::SeqId seq, const int32_t* tokens, int n, int pos0, bool all_logits,
                    float* logits) const {
  if (rt.kv.length(seq) != pos0)
    throw Error("forward: sequence holds " + std::to_string(rt.kv.length(seq)) + " cells, batch starts at " + std::to_string(pos0));
  forward_batch(rt, {{seq, tokens, n, all_logits}}, logits);
}

void Model::forward_batch(Runtime& rt, const std::vector<Part>& parts, float* logits) const {
  thread_local Batch b;
  int total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].n <= 0) throw Error("forward: empty part");
    for (size_t j = 0; j < i; ++j)
      if (parts[j].seq == parts[i].seq) throw Error("forward: a sequence appears twice in one batch");
    total += parts[i].n;
  }
  if (total == 0) throw Error("forward: empty batch");
  b.resize(hp, total);
  b.segs.clear();
  b.pos.resize(total);
  std::vector<int> out_rows;  // batch rows whose logits are wanted, in order
  int off = 0;
  for (const Part& p : parts) {
    int pos0 = rt.kv.length(p.seq);
    b.segs.push_back({p.seq, pos0, off, p.n});
    for (int t = 0; t < p.n; ++t) {
      int32_t id = p.tokens[t];
      if (id < 0 || id >= hp.n_vocab)
        throw Error("token id " + std::to_string(id) + " out of range [0, " + std::to_string(hp.n_vocab) + ")");
      b.pos[off + t] = pos0 + t;
      float* row = b.x.data() + static_cast<size_t>(off + t) * hp.n_embd;
      ops::get_row(tok_embd, id, row);
      if (hp.embd_scale != 1.f) ops::scale(row, hp.embd_scale, hp.n_embd);
      if (p.all_logits || t == p.n - 1) out_rows.push_back(off + t);
    }
    off += p.n;
  }
  b.out_rows = std::move(out_rows);
  b.compact = false;
  arch_->forward(*this, rt, b);
  const int n_out = static_cast<int>(b.out_rows.size());
  for (int i = 0; i < n_out; ++i)
    ops::rms_norm(b.x.data() + static_cast<size_t>(b.compact ? i : b.out_rows[i]) * hp.n_embd, output_norm.data(), hp.n_embd,
                  hp.rms_eps, b.xn.data() + static_cast<size_t>(i) * hp.n_embd);
  ops::matmul(output, b.xn.data(), n_out, logits, rt.pool);
}

}  // namespace strata::model
