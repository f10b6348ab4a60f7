// Paged KV store with two tiers.
//
// Cells are addressed by (sequence, layer, position). Each sequence owns one page list per layer;
// a page holds P consecutive cells of one layer, K block then V block, so one copy moves a page.
// Within each block the cells are head-major: a KV head's P vectors lie one after another, so
// attention, which works one KV head at a time, reads each page as one contiguous run per block.
// Backing tier: the authoritative copy of every page (host RAM, or a file under --kv-spill).
// Fast tier: at most `resident_cells` cells per layer, in slots; a page table maps page -> slot.
// Residency is a cache: attention reads a resident page from its slot and any other page from
// the backing tier, in page order, so where a page lives never changes the result.
// Every cell enters through append_encoded(), which writes the backing copy first and then the
// resident copy (DESIGN.md, "one write path").
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/huge_buffer.h"
#include "kv/formats.h"

namespace strata::kv {

struct Config {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim_k = 0;
  int head_dim_v = 0;
  int max_cells = 0;       // cells per layer over all sequences
  Format format = Format::F16;
  int page_size = 16;      // cells per page
  int resident_cells = 0;  // fast-tier cells per layer (rounded up to whole pages); 0: no fast tier limit
  std::string spill_dir;   // non-empty: the backing tier lives in a file in this directory
};

using SeqId = int;

// Read-only view of one page: cells [first, first + n) of one layer of one sequence.
struct PageView {
  int first = 0;
  int n = 0;
  const uint8_t* k = nullptr;  // [n_kv_heads][P] encoded K vectors
  const uint8_t* v = nullptr;  // [n_kv_heads][P] encoded V vectors
  bool resident = false;
  int page_size = 0;
  size_t k_bytes = 0, v_bytes = 0;  // one encoded vector
  // Head h's encoded K (V) vector of the page's cell c; cell c + 1's follows it.
  const uint8_t* k_at(int h, int c) const { return k + (static_cast<size_t>(h) * page_size + c) * k_bytes; }
  const uint8_t* v_at(int h, int c) const { return v + (static_cast<size_t>(h) * page_size + c) * v_bytes; }
};

struct TierStats {
  uint64_t resident_reads = 0, backing_reads = 0, evictions = 0, admissions = 0;
};

class KvStore {
 public:
  explicit KvStore(const Config& cfg);
  ~KvStore();
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;

  const Config& config() const { return cfg_; }
  const FormatSpec& spec() const { return spec_; }
  size_t k_bytes_per_head() const { return k_head_bytes_; }
  size_t v_bytes_per_head() const { return v_head_bytes_; }
  size_t page_bytes() const { return page_bytes_; }
  size_t bytes_per_cell_per_layer() const { return (k_head_bytes_ + v_head_bytes_) * cfg_.n_kv_heads; }
  bool streaming() const { return slots_per_layer_ < pages_per_layer_; }
  int resident_cells_per_layer() const { return slots_per_layer_ * cfg_.page_size; }
  size_t backing_capacity_bytes() const { return static_cast<size_t>(n_pages_total_) * page_bytes_; }
  size_t resident_capacity_bytes() const { return static_cast<size_t>(slots_per_layer_) * cfg_.n_layers * page_bytes_; }
  size_t bytes_in_use() const;  // backing pages held by sequences
  // The most RAM a store of this configuration holds: every backing page unless they live in a
  // spill file, plus the fast tier (backing_capacity_bytes + resident_capacity_bytes of a store
  // built from it, less what is spilled).
  static size_t ram_bytes(const Config& cfg);
  int pages_in_use() const;
  TierStats stats() const;
  std::string describe() const;  // one line: format, residency, sizes per tier

  SeqId new_sequence();
  void free_sequence(SeqId s);
  int length(SeqId s) const;  // cells present in every layer
  int length(SeqId s, int layer) const;

  // Encodes n rows of K and V ([n][n_kv_heads][head_dim] floats), rotating first where the
  // format says so, and appends them at positions [pos, pos + n) (pos = current length).
  void append(SeqId s, int layer, int pos, int n, const float* k, const float* v);
  // The one write path. k: [n][n_kv_heads] encoded K vectors, v likewise.
  void append_encoded(SeqId s, int layer, int pos, int n, const uint8_t* k, const uint8_t* v);
  // Restores cells [0, n) of every layer of src into the empty sequence dst (a saved prefix).
  void copy_prefix(SeqId src, SeqId dst, int n);
  // Rollback: keep the first n cells of every layer of s; whole pages past them are freed.
  void truncate(SeqId s, int n);

  int n_pages(SeqId s, int layer) const;
  PageView page(SeqId s, int layer, int page_index) const;
  // Adds page reads to stats(): readers count the views they used and report them once per run
  // of pages, so threads reading pages at once do not share a counter's cache line per page.
  void count_reads(uint64_t resident, uint64_t backing) const;

  // Test hook reproducing the bug class of DESIGN.md: an append to a resident page skips the
  // backing copy. Tests switch it on to prove that the streaming tests catch such a bug.
  void inject_fault_skip_backing_write(bool on) { fault_skip_backing_ = on; }

 private:
  struct Seq {
    bool live = false;
    std::vector<std::vector<int>> pages;  // [layer] -> backing page ids in position order
    std::vector<int> len;                 // [layer] cells
  };
  Seq& seq(SeqId s);
  const Seq& seq(SeqId s) const;
  int alloc_page(int layer, int index_in_seq);
  void release_page(int layer, int page);
  uint8_t* backing_ptr(int page) const;
  uint8_t* slot_ptr(int layer, int slot) const;
  int ensure_slot(int layer, int page);  // admits a page to the fast tier, evicting if needed
  // Writes (reads) one cell's encoded vectors, [n_kv_heads] of K and of V, into (from) a page.
  void put_cell(uint8_t* page, int cell, const uint8_t* k, const uint8_t* v) const;
  void get_cell(const uint8_t* page, int cell, uint8_t* k, uint8_t* v) const;

  Config cfg_;
  FormatSpec spec_;
  size_t k_head_bytes_ = 0, v_head_bytes_ = 0, k_cell_bytes_ = 0, v_cell_bytes_ = 0, page_bytes_ = 0;
  int pages_per_layer_ = 0, n_pages_total_ = 0, slots_per_layer_ = 0;

  // Backing tier: lazily allocated slabs in RAM, or one mapping of a spill file.
  std::vector<HugeBuffer> slabs_;  // of pages_per_slab_ pages each
  int pages_per_slab_ = 0;
  uint8_t* spill_map_ = nullptr;
  int spill_fd_ = -1;
  std::string spill_path_;
  int pages_allocated_ = 0;
  std::vector<int> free_;
  std::vector<int> layer_pages_;  // [layer] backing pages held

  // Fast tier and page table.
  std::vector<std::unique_ptr<uint8_t[]>> slot_arena_;  // [layer] slots_per_layer * page_bytes
  std::vector<int> page_slot_;                          // [page] slot or -1
  std::vector<int> page_index_;                         // [page] index of the page in its sequence
  std::vector<std::vector<int>> slot_page_;             // [layer][slot] page or -1
  std::vector<std::vector<uint64_t>> slot_used_;        // [layer][slot] last append tick (LRU)
  uint64_t tick_ = 0;

  std::vector<Seq> seqs_;
  mutable std::atomic<uint64_t> resident_reads_{0}, backing_reads_{0};
  uint64_t evictions_ = 0, admissions_ = 0;
  bool fault_skip_backing_ = false;
};

}  // namespace strata::kv
