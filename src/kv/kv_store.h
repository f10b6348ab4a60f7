// Paged KV store. Cells are addressed by (sequence, layer, position); each sequence owns one
// page list per layer. A page holds P consecutive cells of one layer, K block then V block,
// so one copy moves a page. Every append goes through KvStore::append (one write path).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace strata::kv {

enum class Format { F32, F16 };
const char* format_name(Format f);
Format parse_format(const std::string& s);  // throws with the accepted names
size_t format_bytes_per_value(Format f);

struct Config {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim_k = 0;
  int head_dim_v = 0;
  int max_cells = 0;      // total cells per layer over all sequences
  Format format = Format::F16;
  int page_size = 16;     // cells per page
};

using SeqId = int;

// Read-only view of one page: cells [first, first + n) of one layer of one sequence.
struct PageView {
  int first = 0;
  int n = 0;
  const uint8_t* k = nullptr;  // [P][n_kv_heads][head_dim_k] in the store's format
  const uint8_t* v = nullptr;  // [P][n_kv_heads][head_dim_v]
};

class KvStore {
 public:
  explicit KvStore(const Config& cfg);
  ~KvStore();
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;

  const Config& config() const { return cfg_; }
  size_t page_bytes() const { return page_bytes_; }
  size_t bytes_per_cell_per_layer() const;
  size_t bytes_in_use() const;   // pages held by sequences
  int pages_in_use() const;
  int page_capacity() const { return n_pages_total_; }

  SeqId new_sequence();
  void free_sequence(SeqId s);
  int length(SeqId s) const;                 // cells present in every layer
  int length(SeqId s, int layer) const;

  // The one write path. Appends n cells at positions [pos, pos + n) of layer `layer` of sequence
  // s; pos must equal the layer's current length. k: [n][n_kv_heads][head_dim_k] floats, v likewise.
  void append(SeqId s, int layer, int pos, int n, const float* k, const float* v);
  // Rollback: keep the first n cells of every layer of s, free whole pages past them.
  void truncate(SeqId s, int n);

  int n_pages(SeqId s, int layer) const;
  PageView page(SeqId s, int layer, int page_index) const;

 private:
  struct Seq {
    bool live = false;
    std::vector<std::vector<int>> pages;  // [layer] -> page ids in position order
    std::vector<int> len;                 // [layer] cells
  };
  Seq& seq(SeqId s);
  const Seq& seq(SeqId s) const;
  int alloc_page(int layer);
  uint8_t* page_ptr(int id) const;
  void store_values(const float* src, uint8_t* dst, int n_values) const;

  Config cfg_;
  size_t k_bytes_per_cell_ = 0, v_bytes_per_cell_ = 0, page_bytes_ = 0;
  int n_pages_total_ = 0;
  int pages_per_layer_ = 0;
  std::vector<int> layer_pages_;                  // [layer] pages held by sequences
  std::vector<std::unique_ptr<uint8_t[]>> slabs_;  // pages are allocated lazily in slabs
  int pages_allocated_ = 0;
  std::vector<int> free_;
  std::vector<Seq> seqs_;
};

}  // namespace strata::kv
