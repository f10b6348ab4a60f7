// GGUF v2/v3 reader (memory-mapped, every field validated against the file size) and writer.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common.h"
#include "quant/formats.h"

namespace strata::gguf {

enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8,
  ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* value_type_name(ValueType t);

// One metadata value. Scalars are widened into i/u/f; strings and string arrays point into the
// mapped file; numeric arrays keep a pointer to their raw little-endian elements.
struct Value {
  ValueType type = ValueType::U8;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  std::string_view str;
  ValueType arr_type = ValueType::U8;
  uint64_t arr_n = 0;
  const uint8_t* arr_data = nullptr;          // numeric arrays
  std::vector<std::string_view> arr_strs;     // string arrays

  bool is_integer() const;
  bool is_float() const { return type == ValueType::F32 || type == ValueType::F64; }
  std::string to_string(size_t max_items = 8) const;
};

struct TensorInfo {
  std::string name;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the contiguous (row) dimension
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;           // relative to the data section
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr; // in place in the mapping

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  std::string shape_string() const;
};

class File {
 public:
  static std::unique_ptr<File> open(const std::string& path);
  // Parses a copy of bytes held in memory (tests, fuzzing).
  static std::unique_ptr<File> from_bytes(std::vector<uint8_t> bytes);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  uint32_t version() const { return version_; }
  uint64_t file_size() const { return size_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  const std::string& path() const { return path_; }

  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }
  // Typed getters: throw naming the key when present with a wrong type; return fallback if absent.
  std::optional<uint64_t> get_uint(const std::string& key) const;
  std::optional<int64_t> get_int(const std::string& key) const;
  std::optional<double> get_float(const std::string& key) const;
  std::optional<bool> get_bool(const std::string& key) const;
  std::optional<std::string> get_string(const std::string& key) const;
  std::vector<std::string_view> get_string_array(const std::string& key) const;
  std::vector<float> get_f32_array(const std::string& key) const;
  std::vector<int32_t> get_i32_array(const std::string& key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(const std::string& name) const;

  // Tells the kernel that bytes [p, p + n) of the mapping will not be read soon: their pages
  // leave this process's resident set (they stay in the page cache and fault back in if read).
  // A no-op for files read into memory.
  void release(const uint8_t* p, size_t n) const;

 private:
  File() = default;
  void parse();

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  void* map_ = nullptr;                // mmap region, if mapped
  std::vector<uint8_t> owned_;         // bytes, if from memory
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Writes GGUF v3 files. Values and tensors are written in the order they are added.
class Writer {
 public:
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);
  // Copies every metadata entry of another file (e.g. a tokenizer) unless the key is already set.
  void copy_metadata(const File& src, const std::string& prefix = "");
  // dims: ne[0] first (row length). data must be row_bytes(type, ne0) * rows bytes.
  void add_tensor(const std::string& name, std::vector<int64_t> dims, GgmlType type,
                  const void* data, size_t n_bytes);
  void add_tensor(const std::string& name, std::vector<int64_t> dims, GgmlType type,
                  std::vector<uint8_t>&& data);
  std::vector<uint8_t> to_bytes() const;
  // Writes to path + ".tmp" and renames it into place, so a failed write never leaves a
  // half-written file under the final name.
  void write(const std::string& path) const;

 private:
  struct Entry { std::string key; ValueType type; std::vector<uint8_t> payload; };
  struct Tensor { std::string name; std::vector<int64_t> dims; GgmlType type; std::vector<uint8_t> data; };
  void set_raw(const std::string& key, ValueType type, std::vector<uint8_t> payload);
  std::vector<uint8_t> header_bytes() const;  // everything before the first tensor's data
  std::vector<Entry> entries_;
  std::vector<Tensor> tensors_;
  uint32_t alignment_ = 32;
};

}  // namespace strata::gguf
