#include <cstdio>
#include <cstring>
#include <fstream>

#include "gguf/gguf.h"

namespace strata::gguf {

namespace {
template <typename T>
void put(std::vector<uint8_t>& b, T v) {
  uint8_t tmp[sizeof(T)];
  std::memcpy(tmp, &v, sizeof(T));
  b.insert(b.end(), tmp, tmp + sizeof(T));
}
void put_str(std::vector<uint8_t>& b, std::string_view s) {
  put<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}
}  // namespace

void Writer::set_raw(const std::string& key, ValueType type, std::vector<uint8_t> payload) {
  for (auto& e : entries_)
    if (e.key == key) { e.type = type; e.payload = std::move(payload); return; }
  entries_.push_back({key, type, std::move(payload)});
  if (key == "general.alignment" && type == ValueType::U32) std::memcpy(&alignment_, entries_.back().payload.data(), 4);
}

void Writer::set_u32(const std::string& k, uint32_t v) { std::vector<uint8_t> b; put(b, v); set_raw(k, ValueType::U32, b); }
void Writer::set_i32(const std::string& k, int32_t v) { std::vector<uint8_t> b; put(b, v); set_raw(k, ValueType::I32, b); }
void Writer::set_u64(const std::string& k, uint64_t v) { std::vector<uint8_t> b; put(b, v); set_raw(k, ValueType::U64, b); }
void Writer::set_f32(const std::string& k, float v) { std::vector<uint8_t> b; put(b, v); set_raw(k, ValueType::F32, b); }
void Writer::set_bool(const std::string& k, bool v) { std::vector<uint8_t> b; put<uint8_t>(b, v ? 1 : 0); set_raw(k, ValueType::BOOL, b); }
void Writer::set_string(const std::string& k, const std::string& v) { std::vector<uint8_t> b; put_str(b, v); set_raw(k, ValueType::STRING, b); }
void Writer::set_string_array(const std::string& k, const std::vector<std::string>& v) {
  std::vector<uint8_t> b;
  put<uint32_t>(b, static_cast<uint32_t>(ValueType::STRING));
  put<uint64_t>(b, v.size());
  for (auto& s : v) put_str(b, s);
  set_raw(k, ValueType::ARRAY, b);
}
void Writer::set_f32_array(const std::string& k, const std::vector<float>& v) {
  std::vector<uint8_t> b;
  put<uint32_t>(b, static_cast<uint32_t>(ValueType::F32));
  put<uint64_t>(b, v.size());
  for (float x : v) put(b, x);
  set_raw(k, ValueType::ARRAY, b);
}
void Writer::set_i32_array(const std::string& k, const std::vector<int32_t>& v) {
  std::vector<uint8_t> b;
  put<uint32_t>(b, static_cast<uint32_t>(ValueType::I32));
  put<uint64_t>(b, v.size());
  for (int32_t x : v) put(b, x);
  set_raw(k, ValueType::ARRAY, b);
}

void Writer::copy_metadata(const File& src, const std::string& prefix) {
  for (const auto& [key, v] : src.metadata()) {
    if (key.rfind(prefix, 0) != 0) continue;
    bool exists = false;
    for (auto& e : entries_) exists |= e.key == key;
    if (exists) continue;
    std::vector<uint8_t> b;
    switch (v.type) {
      case ValueType::STRING: put_str(b, v.str); break;
      case ValueType::ARRAY:
        put<uint32_t>(b, static_cast<uint32_t>(v.arr_type));
        put<uint64_t>(b, v.arr_n);
        if (v.arr_type == ValueType::STRING) {
          for (auto s : v.arr_strs) put_str(b, s);
        } else {
          size_t es = 0;
          switch (v.arr_type) {
            case ValueType::U8: case ValueType::I8: case ValueType::BOOL: es = 1; break;
            case ValueType::U16: case ValueType::I16: es = 2; break;
            case ValueType::U32: case ValueType::I32: case ValueType::F32: es = 4; break;
            default: es = 8;
          }
          b.insert(b.end(), v.arr_data, v.arr_data + v.arr_n * es);
        }
        break;
      case ValueType::F32: put<float>(b, static_cast<float>(v.f)); break;
      case ValueType::F64: put<double>(b, v.f); break;
      case ValueType::U8: case ValueType::I8: case ValueType::BOOL: put<uint8_t>(b, static_cast<uint8_t>(v.u)); break;
      case ValueType::U16: case ValueType::I16: put<uint16_t>(b, static_cast<uint16_t>(v.u)); break;
      case ValueType::U32: case ValueType::I32: put<uint32_t>(b, static_cast<uint32_t>(v.u)); break;
      default: put<uint64_t>(b, v.u);
    }
    entries_.push_back({key, v.type, std::move(b)});
  }
}

void Writer::add_tensor(const std::string& name, std::vector<int64_t> dims, GgmlType type,
                        const void* data, size_t n_bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  add_tensor(name, std::move(dims), type, std::vector<uint8_t>(p, p + n_bytes));
}

void Writer::add_tensor(const std::string& name, std::vector<int64_t> dims, GgmlType type,
                        std::vector<uint8_t>&& data) {
  if (dims.empty() || dims.size() > 4) throw Error("tensor '" + name + "': 1 to 4 dimensions");
  size_t rows = 1;
  for (size_t d = 1; d < dims.size(); ++d) rows *= static_cast<size_t>(dims[d]);
  if (row_bytes(type, dims[0]) * rows != data.size()) throw Error("tensor '" + name + "': byte size does not match shape");
  for (auto& t : tensors_)
    if (t.name == name) throw Error("tensor '" + name + "' added twice");
  tensors_.push_back({name, std::move(dims), type, std::move(data)});
}

std::vector<uint8_t> Writer::header_bytes() const {
  std::vector<uint8_t> b;
  b.reserve(1 << 16);
  put<uint32_t>(b, 0x46554747);  // "GGUF" read as a little-endian u32
  put<uint32_t>(b, 3);
  put<uint64_t>(b, tensors_.size());
  put<uint64_t>(b, entries_.size());
  for (auto& e : entries_) {
    put_str(b, e.key);
    put<uint32_t>(b, static_cast<uint32_t>(e.type));
    b.insert(b.end(), e.payload.begin(), e.payload.end());
  }
  uint64_t offset = 0;
  auto align = [&](uint64_t x) { return (x + alignment_ - 1) / alignment_ * alignment_; };
  for (auto& t : tensors_) {
    put_str(b, t.name);
    put<uint32_t>(b, static_cast<uint32_t>(t.dims.size()));
    for (auto d : t.dims) put<uint64_t>(b, static_cast<uint64_t>(d));
    put<uint32_t>(b, static_cast<uint32_t>(t.type));
    put<uint64_t>(b, offset);
    offset = align(offset + t.data.size());
  }
  b.resize(align(b.size()), 0);
  return b;
}

std::vector<uint8_t> Writer::to_bytes() const {
  auto b = header_bytes();
  for (auto& t : tensors_) {
    b.insert(b.end(), t.data.begin(), t.data.end());
    b.resize((b.size() + alignment_ - 1) / alignment_ * alignment_, 0);
  }
  return b;
}

void Writer::write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw Error("cannot write " + tmp);
    auto put_bytes = [&](const uint8_t* p, size_t n) {
      f.write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(n));
    };
    auto header = header_bytes();
    put_bytes(header.data(), header.size());
    const std::vector<uint8_t> zeros(alignment_, 0);
    for (auto& t : tensors_) {
      put_bytes(t.data.data(), t.data.size());
      size_t pad = (alignment_ - t.data.size() % alignment_) % alignment_;
      put_bytes(zeros.data(), pad);
    }
    f.flush();
    if (!f) {
      f.close();
      std::remove(tmp.c_str());
      throw Error("write failed: " + tmp + " (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error("cannot rename " + tmp + " to " + path);
  }
}

}  // namespace strata::gguf
