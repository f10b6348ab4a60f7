#include "kv/kv_store.h"

#include <algorithm>
#include <cstring>

#include "common.h"
#include "quant/fp16.h"

namespace strata::kv {

namespace {
constexpr int kPagesPerSlab = 64;
}

const char* format_name(Format f) { return f == Format::F32 ? "f32" : "f16"; }

Format parse_format(const std::string& s) {
  if (s == "f32") return Format::F32;
  if (s == "f16") return Format::F16;
  throw Error("unknown KV format '" + s + "' (this build supports: f16, f32)");
}

size_t format_bytes_per_value(Format f) { return f == Format::F32 ? 4 : 2; }

KvStore::KvStore(const Config& cfg) : cfg_(cfg) {
  if (cfg.n_layers <= 0 || cfg.n_kv_heads <= 0 || cfg.head_dim_k <= 0 || cfg.head_dim_v <= 0 || cfg.page_size <= 0 ||
      cfg.max_cells <= 0)
    throw Error("invalid KV store configuration");
  size_t bpv = format_bytes_per_value(cfg.format);
  k_bytes_per_cell_ = bpv * cfg.n_kv_heads * cfg.head_dim_k;
  v_bytes_per_cell_ = bpv * cfg.n_kv_heads * cfg.head_dim_v;
  page_bytes_ = (k_bytes_per_cell_ + v_bytes_per_cell_) * cfg.page_size;
  pages_per_layer_ = (cfg.max_cells + cfg.page_size - 1) / cfg.page_size;
  n_pages_total_ = pages_per_layer_ * cfg.n_layers;
  layer_pages_.assign(cfg.n_layers, 0);
}

KvStore::~KvStore() = default;

size_t KvStore::bytes_per_cell_per_layer() const { return k_bytes_per_cell_ + v_bytes_per_cell_; }

int KvStore::pages_in_use() const { return pages_allocated_ - static_cast<int>(free_.size()); }
size_t KvStore::bytes_in_use() const { return static_cast<size_t>(pages_in_use()) * page_bytes_; }

SeqId KvStore::new_sequence() {
  for (size_t i = 0; i < seqs_.size(); ++i)
    if (!seqs_[i].live) {
      seqs_[i].live = true;
      seqs_[i].pages.assign(cfg_.n_layers, {});
      seqs_[i].len.assign(cfg_.n_layers, 0);
      return static_cast<SeqId>(i);
    }
  Seq s;
  s.live = true;
  s.pages.assign(cfg_.n_layers, {});
  s.len.assign(cfg_.n_layers, 0);
  seqs_.push_back(std::move(s));
  return static_cast<SeqId>(seqs_.size() - 1);
}

KvStore::Seq& KvStore::seq(SeqId s) {
  if (s < 0 || static_cast<size_t>(s) >= seqs_.size() || !seqs_[s].live) throw Error("unknown KV sequence " + std::to_string(s));
  return seqs_[s];
}
const KvStore::Seq& KvStore::seq(SeqId s) const { return const_cast<KvStore*>(this)->seq(s); }

void KvStore::free_sequence(SeqId s) {
  truncate(s, 0);
  seq(s).live = false;
}

int KvStore::length(SeqId s) const {
  const Seq& q = seq(s);
  return *std::min_element(q.len.begin(), q.len.end());
}
int KvStore::length(SeqId s, int layer) const { return seq(s).len.at(layer); }

uint8_t* KvStore::page_ptr(int id) const {
  return slabs_[id / kPagesPerSlab].get() + static_cast<size_t>(id % kPagesPerSlab) * page_bytes_;
}

int KvStore::alloc_page(int layer) {
  ++layer_pages_[layer];
  if (!free_.empty()) {
    int id = free_.back();
    free_.pop_back();
    return id;
  }
  if (pages_allocated_ % kPagesPerSlab == 0)
    slabs_.emplace_back(new uint8_t[page_bytes_ * kPagesPerSlab]());
  return pages_allocated_++;
}

void KvStore::store_values(const float* src, uint8_t* dst, int n_values) const {
  if (cfg_.format == Format::F32) {
    std::memcpy(dst, src, static_cast<size_t>(n_values) * 4);
  } else {
    auto* h = reinterpret_cast<uint16_t*>(dst);
    for (int i = 0; i < n_values; ++i) h[i] = fp32_to_fp16(src[i]);
  }
}

void KvStore::append(SeqId s, int layer, int pos, int n, const float* k, const float* v) {
  Seq& q = seq(s);
  if (layer < 0 || layer >= cfg_.n_layers) throw Error("KV append: bad layer " + std::to_string(layer));
  if (pos != q.len[layer])
    throw Error("KV append: position " + std::to_string(pos) + " but layer " + std::to_string(layer) + " holds " +
                std::to_string(q.len[layer]) + " cells");
  const int P = cfg_.page_size;
  // Check capacity before writing anything, so a refused append changes nothing.
  int need = (pos + n + P - 1) / P - static_cast<int>(q.pages[layer].size());
  if (need > 0 && layer_pages_[layer] + need > pages_per_layer_)
    throw Error("KV cache full: appending " + std::to_string(n) + " cells needs " + std::to_string(need) +
                " more pages, layer " + std::to_string(layer) + " has " + std::to_string(pages_per_layer_ - layer_pages_[layer]) +
                " of " + std::to_string(pages_per_layer_) + " free (raise --ctx)");
  const int kv_k = cfg_.n_kv_heads * cfg_.head_dim_k, kv_v = cfg_.n_kv_heads * cfg_.head_dim_v;
  for (int i = 0; i < n; ++i) {
    int p = pos + i;
    int page_idx = p / P, slot = p % P;
    auto& pages = q.pages[layer];
    if (page_idx == static_cast<int>(pages.size())) pages.push_back(alloc_page(layer));
    uint8_t* base = page_ptr(pages[page_idx]);
    store_values(k + static_cast<size_t>(i) * kv_k, base + slot * k_bytes_per_cell_, kv_k);
    store_values(v + static_cast<size_t>(i) * kv_v, base + P * k_bytes_per_cell_ + slot * v_bytes_per_cell_, kv_v);
  }
  q.len[layer] = pos + n;
}

void KvStore::truncate(SeqId s, int n) {
  Seq& q = seq(s);
  if (n < 0) throw Error("KV truncate: negative length");
  const int P = cfg_.page_size;
  for (int l = 0; l < cfg_.n_layers; ++l) {
    if (n >= q.len[l]) continue;
    q.len[l] = n;
    size_t keep = static_cast<size_t>((n + P - 1) / P);
    auto& pages = q.pages[l];
    while (pages.size() > keep) {
      free_.push_back(pages.back());
      pages.pop_back();
      --layer_pages_[l];
    }
  }
}

int KvStore::n_pages(SeqId s, int layer) const { return static_cast<int>(seq(s).pages.at(layer).size()); }

PageView KvStore::page(SeqId s, int layer, int page_index) const {
  const Seq& q = seq(s);
  const int P = cfg_.page_size;
  PageView pv;
  pv.first = page_index * P;
  pv.n = std::min(P, q.len[layer] - pv.first);
  const uint8_t* base = page_ptr(q.pages[layer].at(page_index));
  pv.k = base;
  pv.v = base + P * k_bytes_per_cell_;
  return pv;
}

}  // namespace strata::kv
