#include "kv/kv_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common.h"

namespace strata::kv {

namespace {
// Slabs of at least 64 pages and of at least one 2 MiB page, mapped with huge pages where the
// kernel gives them (HugeBuffer): attention reads one KV head's vectors of every cell, a few
// hundred bytes from each 2 KiB or so, and through 4 KiB pages each of those reads took a TLB miss.
constexpr int kMinPagesPerSlab = 64;
constexpr size_t kSlabMinBytes = size_t(2) << 20;

std::string gib(double b) {
  char buf[32];
  if (b >= 1 << 30) std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1 << 30));
  else std::snprintf(buf, sizeof buf, "%.2f MiB", b / (1 << 20));
  return buf;
}
}  // namespace

KvStore::KvStore(const Config& cfg) : cfg_(cfg), spec_(format_spec(cfg.format)) {
  if (cfg.n_layers <= 0 || cfg.n_kv_heads <= 0 || cfg.head_dim_k <= 0 || cfg.head_dim_v <= 0 || cfg.page_size <= 0 ||
      cfg.max_cells <= 0 || cfg.resident_cells < 0)
    throw Error("invalid KV store configuration");
  std::string why = format_unsupported_reason(cfg.format, cfg.head_dim_k, cfg.head_dim_v);
  if (!why.empty()) throw Error(why);
  k_head_bytes_ = codec_bytes(spec_.k, cfg.head_dim_k);
  v_head_bytes_ = codec_bytes(spec_.v, cfg.head_dim_v);
  k_cell_bytes_ = k_head_bytes_ * cfg.n_kv_heads;
  v_cell_bytes_ = v_head_bytes_ * cfg.n_kv_heads;
  page_bytes_ = (k_cell_bytes_ + v_cell_bytes_) * cfg.page_size;
  pages_per_slab_ = std::max<int>(kMinPagesPerSlab, static_cast<int>((kSlabMinBytes + page_bytes_ - 1) / page_bytes_));
  pages_per_layer_ = (cfg.max_cells + cfg.page_size - 1) / cfg.page_size;
  n_pages_total_ = pages_per_layer_ * cfg.n_layers;
  layer_pages_.assign(cfg.n_layers, 0);
  page_slot_.assign(n_pages_total_, -1);
  page_index_.assign(n_pages_total_, -1);
  if (cfg.resident_cells > 0) {
    // At least two pages: the attention sink and the page being written.
    slots_per_layer_ = std::min(pages_per_layer_, std::max(2, (cfg.resident_cells + cfg.page_size - 1) / cfg.page_size));
    for (int l = 0; l < cfg.n_layers; ++l) slot_arena_.emplace_back(new uint8_t[page_bytes_ * slots_per_layer_]());
    slot_page_.assign(cfg.n_layers, std::vector<int>(slots_per_layer_, -1));
    slot_used_.assign(cfg.n_layers, std::vector<uint64_t>(slots_per_layer_, 0));
  } else {
    slots_per_layer_ = pages_per_layer_;  // no fast tier: every page is read where it lives
  }
  if (!cfg.spill_dir.empty()) {
    spill_path_ = cfg.spill_dir + "/strata-kv-XXXXXX";
    spill_fd_ = mkstemp(spill_path_.data());
    if (spill_fd_ < 0) throw Error("--kv-spill: cannot create a file in " + cfg.spill_dir + ": " + std::strerror(errno));
    unlink(spill_path_.c_str());  // the space is returned when the store closes
    size_t bytes = backing_capacity_bytes();
    if (ftruncate(spill_fd_, static_cast<off_t>(bytes)) != 0) {
      close(spill_fd_);
      throw Error("--kv-spill: cannot size the spill file to " + gib(static_cast<double>(bytes)) + ": " + std::strerror(errno));
    }
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, spill_fd_, 0);
    if (m == MAP_FAILED) {
      close(spill_fd_);
      throw Error("--kv-spill: cannot map the spill file: " + std::string(std::strerror(errno)));
    }
    spill_map_ = static_cast<uint8_t*>(m);
  }
}

size_t KvStore::ram_bytes(const Config& cfg) {
  const FormatSpec spec = format_spec(cfg.format);
  const size_t page = (codec_bytes(spec.k, cfg.head_dim_k) + codec_bytes(spec.v, cfg.head_dim_v)) *
                      static_cast<size_t>(cfg.n_kv_heads) * static_cast<size_t>(cfg.page_size);
  const int pages_per_layer = (cfg.max_cells + cfg.page_size - 1) / cfg.page_size;
  size_t bytes = cfg.spill_dir.empty() ? page * static_cast<size_t>(pages_per_layer) * static_cast<size_t>(cfg.n_layers) : 0;
  if (cfg.resident_cells > 0) {
    const int slots = std::min(pages_per_layer, std::max(2, (cfg.resident_cells + cfg.page_size - 1) / cfg.page_size));
    bytes += page * static_cast<size_t>(slots) * static_cast<size_t>(cfg.n_layers);
  }
  return bytes;
}

KvStore::~KvStore() {
  if (spill_map_) munmap(spill_map_, backing_capacity_bytes());
  if (spill_fd_ >= 0) close(spill_fd_);
}

int KvStore::pages_in_use() const { return pages_allocated_ - static_cast<int>(free_.size()); }
size_t KvStore::bytes_in_use() const { return static_cast<size_t>(pages_in_use()) * page_bytes_; }

TierStats KvStore::stats() const {
  return {resident_reads_.load(std::memory_order_relaxed), backing_reads_.load(std::memory_order_relaxed), evictions_,
          admissions_};
}

std::string KvStore::describe() const {
  std::string where = cfg_.spill_dir.empty() ? "in RAM" : "in a file under " + cfg_.spill_dir;
  std::string s = std::string("KV ") + format_name(cfg_.format) + ": " + std::to_string(bytes_per_cell_per_layer()) +
                  " B per cell per layer; ";
  if (cfg_.resident_cells == 0)
    return s + "all " + std::to_string(cfg_.max_cells) + " cells per layer in one tier, up to " +
           gib(static_cast<double>(backing_capacity_bytes())) + " " + where;
  return s + (streaming() ? "KV streaming: " : "no streaming: ") + std::to_string(resident_cells_per_layer()) + " of " +
         std::to_string(pages_per_layer_ * cfg_.page_size) + " cells per layer resident (" +
         gib(static_cast<double>(resident_capacity_bytes())) + "), backing K/V up to " +
         gib(static_cast<double>(backing_capacity_bytes())) + " " + where;
}

SeqId KvStore::new_sequence() {
  size_t i = 0;
  while (i < seqs_.size() && seqs_[i].live) ++i;
  if (i == seqs_.size()) seqs_.emplace_back();
  seqs_[i].live = true;
  seqs_[i].pages.assign(cfg_.n_layers, {});
  seqs_[i].len.assign(cfg_.n_layers, 0);
  return static_cast<SeqId>(i);
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

uint8_t* KvStore::backing_ptr(int page) const {
  if (spill_map_) return spill_map_ + static_cast<size_t>(page) * page_bytes_;
  return slabs_[page / pages_per_slab_].data() + static_cast<size_t>(page % pages_per_slab_) * page_bytes_;
}

uint8_t* KvStore::slot_ptr(int layer, int slot) const { return slot_arena_[layer].get() + static_cast<size_t>(slot) * page_bytes_; }

int KvStore::alloc_page(int layer, int index_in_seq) {
  int id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    if (!spill_map_ && pages_allocated_ % pages_per_slab_ == 0) slabs_.emplace_back(page_bytes_ * pages_per_slab_);
    id = pages_allocated_++;
  }
  ++layer_pages_[layer];
  page_index_[id] = index_in_seq;
  return id;
}

void KvStore::release_page(int layer, int page) {
  if (page_slot_[page] >= 0) {
    slot_page_[layer][page_slot_[page]] = -1;
    page_slot_[page] = -1;
  }
  page_index_[page] = -1;
  free_.push_back(page);
  --layer_pages_[layer];
}

int KvStore::ensure_slot(int layer, int page) {
  if (page_slot_[page] >= 0) return page_slot_[page];
  auto& owners = slot_page_[layer];
  auto& used = slot_used_[layer];
  int victim = -1;
  for (int sl = 0; sl < slots_per_layer_ && victim < 0; ++sl)
    if (owners[sl] < 0) victim = sl;
  if (victim < 0) {
    // Least recently appended page that is not a sequence's first page (the attention sink);
    // if every slot holds a sink, the least recent of them.
    for (bool spare_sinks : {true, false}) {
      for (int sl = 0; sl < slots_per_layer_; ++sl) {
        if (spare_sinks && page_index_[owners[sl]] == 0) continue;
        if (victim < 0 || used[sl] < used[victim]) victim = sl;
      }
      if (victim >= 0) break;
    }
    page_slot_[owners[victim]] = -1;  // the backing copy is authoritative: nothing to write back
    ++evictions_;
  }
  // Bring the page in from the backing tier (it may already hold cells).
  std::memcpy(slot_ptr(layer, victim), backing_ptr(page), page_bytes_);
  owners[victim] = page;
  page_slot_[page] = victim;
  ++admissions_;
  return victim;
}

void KvStore::append(SeqId s, int layer, int pos, int n, const float* k, const float* v) {
  const int nkv = cfg_.n_kv_heads, dk = cfg_.head_dim_k, dv = cfg_.head_dim_v;
  thread_local std::vector<uint8_t> ek, ev;
  thread_local std::vector<float> tmp;
  ek.resize(k_cell_bytes_ * n);
  ev.resize(v_cell_bytes_ * n);
  tmp.resize(std::max(dk, dv));
  for (int i = 0; i < n; ++i)
    for (int h = 0; h < nkv; ++h) {
      const float* kh = k + (static_cast<size_t>(i) * nkv + h) * dk;
      const float* vh = v + (static_cast<size_t>(i) * nkv + h) * dv;
      std::copy(kh, kh + dk, tmp.begin());
      if (spec_.rotate_k) hadamard(tmp.data(), dk);
      encode(spec_.k, tmp.data(), ek.data() + (static_cast<size_t>(i) * nkv + h) * k_head_bytes_, dk);
      std::copy(vh, vh + dv, tmp.begin());
      if (spec_.rotate_v) hadamard(tmp.data(), dv);
      encode(spec_.v, tmp.data(), ev.data() + (static_cast<size_t>(i) * nkv + h) * v_head_bytes_, dv);
    }
  append_encoded(s, layer, pos, n, ek.data(), ev.data());
}

void KvStore::append_encoded(SeqId s, int layer, int pos, int n, const uint8_t* k, const uint8_t* v) {
  Seq& q = seq(s);
  if (layer < 0 || layer >= cfg_.n_layers) throw Error("KV append: bad layer " + std::to_string(layer));
  if (pos != q.len[layer])
    throw Error("KV append: position " + std::to_string(pos) + " but layer " + std::to_string(layer) + " holds " +
                std::to_string(q.len[layer]) + " cells");
  const int P = cfg_.page_size;
  // Check capacity before writing anything, so a refused append changes nothing.
  int need = (pos + n + P - 1) / P - static_cast<int>(q.pages[layer].size());
  if (need > 0 && layer_pages_[layer] + need > pages_per_layer_)
    throw Error("KV cache full: appending " + std::to_string(n) + " cells needs " + std::to_string(need) + " more pages, layer " +
                std::to_string(layer) + " has " + std::to_string(pages_per_layer_ - layer_pages_[layer]) + " of " +
                std::to_string(pages_per_layer_) + " free (raise --ctx)");
  const bool tiered = !slot_arena_.empty();
  auto& pages = q.pages[layer];
  for (int i = 0; i < n; ++i) {
    const int p = pos + i, page_idx = p / P, cell = p % P;
    if (page_idx == static_cast<int>(pages.size())) pages.push_back(alloc_page(layer, page_idx));
    const int page = pages[page_idx];
    const uint8_t* kc = k + static_cast<size_t>(i) * k_cell_bytes_;
    const uint8_t* vc = v + static_cast<size_t>(i) * v_cell_bytes_;
    // 1. The authoritative copy.
    if (!(fault_skip_backing_ && tiered && page_slot_[page] >= 0)) put_cell(backing_ptr(page), cell, kc, vc);
    // 2. The resident copy: the page being written is the newest, so it holds a slot.
    if (tiered) {
      int slot = ensure_slot(layer, page);
      put_cell(slot_ptr(layer, slot), cell, kc, vc);
      slot_used_[layer][slot] = ++tick_;
    }
  }
  q.len[layer] = pos + n;
}

void KvStore::copy_prefix(SeqId src, SeqId dst, int n) {
  if (length(dst) != 0) throw Error("KV restore: the target sequence is not empty");
  if (n > length(src)) throw Error("KV restore: the source holds fewer than " + std::to_string(n) + " cells");
  const int P = cfg_.page_size;
  std::vector<uint8_t> kb, vb;
  for (int l = 0; l < cfg_.n_layers; ++l) {
    for (int first = 0; first < n; first += P) {
      int cnt = std::min(P, n - first);
      // Read the authoritative copy, then enter the cells through the one write path.
      const uint8_t* b = backing_ptr(seq(src).pages[l][first / P]);
      kb.resize(cnt * k_cell_bytes_);
      vb.resize(cnt * v_cell_bytes_);
      for (int c = 0; c < cnt; ++c) get_cell(b, c, kb.data() + c * k_cell_bytes_, vb.data() + c * v_cell_bytes_);
      append_encoded(dst, l, first, cnt, kb.data(), vb.data());
    }
  }
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
      release_page(l, pages.back());
      pages.pop_back();
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
  const int page = q.pages[layer].at(page_index);
  const uint8_t* base;
  if (!slot_arena_.empty() && page_slot_[page] >= 0) {
    base = slot_ptr(layer, page_slot_[page]);
    pv.resident = true;
  } else {
    base = backing_ptr(page);  // streamed: read in place from the backing tier
  }
  pv.k = base;
  pv.v = base + P * k_cell_bytes_;
  pv.page_size = P;
  pv.k_bytes = k_head_bytes_;
  pv.v_bytes = v_head_bytes_;
  return pv;
}

void KvStore::count_reads(uint64_t resident, uint64_t backing) const {
  if (resident) resident_reads_.fetch_add(resident, std::memory_order_relaxed);
  if (backing) backing_reads_.fetch_add(backing, std::memory_order_relaxed);
}

// A cell's vectors arrive and leave head after head ([n_kv_heads] encoded vectors); in the page
// each head's go to its own run of P.
void KvStore::put_cell(uint8_t* page, int cell, const uint8_t* k, const uint8_t* v) const {
  const int P = cfg_.page_size;
  uint8_t* pk = page + cell * k_head_bytes_;
  uint8_t* pv = page + P * k_cell_bytes_ + cell * v_head_bytes_;
  for (int h = 0; h < cfg_.n_kv_heads; ++h) {
    std::memcpy(pk + static_cast<size_t>(h) * P * k_head_bytes_, k + h * k_head_bytes_, k_head_bytes_);
    std::memcpy(pv + static_cast<size_t>(h) * P * v_head_bytes_, v + h * v_head_bytes_, v_head_bytes_);
  }
}
void KvStore::get_cell(const uint8_t* page, int cell, uint8_t* k, uint8_t* v) const {
  const int P = cfg_.page_size;
  const uint8_t* pk = page + cell * k_head_bytes_;
  const uint8_t* pv = page + P * k_cell_bytes_ + cell * v_head_bytes_;
  for (int h = 0; h < cfg_.n_kv_heads; ++h) {
    std::memcpy(k + h * k_head_bytes_, pk + static_cast<size_t>(h) * P * k_head_bytes_, k_head_bytes_);
    std::memcpy(v + h * v_head_bytes_, pv + static_cast<size_t>(h) * P * v_head_bytes_, v_head_bytes_);
  }
}

}  // namespace strata::kv
