#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <limits>

#include "gguf/gguf.h"

namespace strata::gguf {

namespace {

constexpr uint64_t kMaxStringLen = 1ull << 30;     // no metadata string is a gigabyte
constexpr uint64_t kMaxTensors = 1ull << 20;
constexpr uint64_t kMaxKv = 1ull << 20;

size_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::BOOL: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    default: return 0;
  }
}

// Bounds-checked little-endian cursor over the file bytes.
class Cursor {
 public:
  Cursor(const uint8_t* p, uint64_t n) : p_(p), n_(n) {}
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return n_ - pos_; }
  void need(uint64_t k, const std::string& what) const {
    if (k > remaining())
      throw Error("GGUF truncated: " + what + " needs " + std::to_string(k) + " bytes at offset " +
                  std::to_string(pos_) + ", file has " + std::to_string(remaining()) + " left");
  }
  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string_view read_string(const std::string& what) {
    uint64_t len = read<uint64_t>(what + " (string length)");
    if (len > kMaxStringLen) throw Error("GGUF bad " + what + ": string length " + std::to_string(len));
    need(len, what);
    std::string_view s(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return s;
  }
  const uint8_t* skip(uint64_t k, const std::string& what) {
    need(k, what);
    const uint8_t* at = p_ + pos_;
    pos_ += k;
    return at;
  }

 private:
  const uint8_t* p_;
  uint64_t n_;
  uint64_t pos_ = 0;
};

void read_scalar(Cursor& c, ValueType t, Value& v, const std::string& what) {
  switch (t) {
    case ValueType::U8: v.u = c.read<uint8_t>(what); v.i = (int64_t)v.u; break;
    case ValueType::I8: v.i = c.read<int8_t>(what); v.u = (uint64_t)v.i; break;
    case ValueType::U16: v.u = c.read<uint16_t>(what); v.i = (int64_t)v.u; break;
    case ValueType::I16: v.i = c.read<int16_t>(what); v.u = (uint64_t)v.i; break;
    case ValueType::U32: v.u = c.read<uint32_t>(what); v.i = (int64_t)v.u; break;
    case ValueType::I32: v.i = c.read<int32_t>(what); v.u = (uint64_t)v.i; break;
    case ValueType::U64: v.u = c.read<uint64_t>(what); v.i = (int64_t)v.u; break;
    case ValueType::I64: v.i = c.read<int64_t>(what); v.u = (uint64_t)v.i; break;
    case ValueType::F32: v.f = c.read<float>(what); break;
    case ValueType::F64: v.f = c.read<double>(what); break;
    case ValueType::BOOL: {
      uint8_t b = c.read<uint8_t>(what);
      if (b > 1) throw Error("GGUF bad " + what + ": bool value " + std::to_string(b));
      v.u = b; v.i = b;
      break;
    }
    case ValueType::STRING: v.str = c.read_string(what); break;
    default: throw Error("GGUF bad " + what + ": value type " + std::to_string((uint32_t)t));
  }
}

}  // namespace

const char* value_type_name(ValueType t) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                "bool", "string", "array", "u64", "i64", "f64"};
  auto id = static_cast<uint32_t>(t);
  return id < 13 ? names[id] : "invalid";
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::U8: case ValueType::I8: case ValueType::U16: case ValueType::I16:
    case ValueType::U32: case ValueType::I32: case ValueType::U64: case ValueType::I64:
      return true;
    default: return false;
  }
}

std::string Value::to_string(size_t max_items) const {
  switch (type) {
    case ValueType::STRING: {
      std::string s(str.substr(0, 80));
      for (auto& ch : s) if (ch == '\n') ch = ' ';
      return "\"" + s + (str.size() > 80 ? "...\"" : "\"");
    }
    case ValueType::BOOL: return u ? "true" : "false";
    case ValueType::F32: case ValueType::F64: return std::to_string(f);
    case ValueType::ARRAY: {
      std::string s = std::string("[") + value_type_name(arr_type) + " x " + std::to_string(arr_n) + "]";
      if (arr_type == ValueType::STRING && !arr_strs.empty()) {
        s += " {";
        for (size_t k = 0; k < arr_strs.size() && k < max_items; ++k)
          s += (k ? ", \"" : "\"") + std::string(arr_strs[k].substr(0, 24)) + "\"";
        s += arr_strs.size() > max_items ? ", ...}" : "}";
      }
      return s;
    }
    default:
      if (type == ValueType::I8 || type == ValueType::I16 || type == ValueType::I32 || type == ValueType::I64)
        return std::to_string(i);
      return std::to_string(u);
  }
}

std::string TensorInfo::shape_string() const {
  std::string s = "[";
  for (int d = 0; d < n_dims; ++d) s += (d ? ", " : "") + std::to_string(ne[d]);
  return s + "]";
}

void File::release(const uint8_t* p, size_t n) const {
  if (!map_ || n == 0 || p < base_ || p + n > base_ + size_) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);  // whole pages inside the range
  uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + n) & ~(page - 1);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

std::unique_ptr<File> File::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error("cannot open " + path + ": " + std::strerror(errno));
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + " is not a regular file");
  }
  std::unique_ptr<File> f(new File());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    void* m = mmap(nullptr, f->size_, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      throw Error("cannot map " + path + ": " + std::strerror(errno));
    }
    f->map_ = m;
    f->base_ = static_cast<const uint8_t*>(m);
  }
  ::close(fd);
  try {
    f->parse();
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
  return f;
}

std::unique_ptr<File> File::from_bytes(std::vector<uint8_t> bytes) {
  std::unique_ptr<File> f(new File());
  f->path_ = "<memory>";
  f->owned_ = std::move(bytes);
  f->base_ = f->owned_.data();
  f->size_ = f->owned_.size();
  f->parse();
  return f;
}

File::~File() {
  if (map_) munmap(map_, size_);
}

void File::parse() {
  Cursor c(base_, size_);
  c.need(4, "magic");
  if (std::memcmp(base_, "GGUF", 4) != 0) throw Error("not a GGUF file (bad magic)");
  c.skip(4, "magic");
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3)
    throw Error("unsupported GGUF version " + std::to_string(version_) + " (2 and 3 are supported)");
  uint64_t n_tensors = c.read<uint64_t>("tensor count");
  uint64_t n_kv = c.read<uint64_t>("metadata count");
  if (n_tensors > kMaxTensors) throw Error("GGUF bad tensor count " + std::to_string(n_tensors));
  if (n_kv > kMaxKv) throw Error("GGUF bad metadata count " + std::to_string(n_kv));
  // Each entry needs at least 12 bytes, so counts beyond the file size are rejected early.
  if (n_kv * 12 > c.remaining()) throw Error("GGUF bad metadata count " + std::to_string(n_kv) + " for file size");

  kv_.reserve(n_kv);
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string what = "metadata key #" + std::to_string(k);
    std::string key(c.read_string(what));
    what = "metadata '" + key + "'";
    if (kv_index_.count(key)) throw Error("GGUF duplicate " + what);
    Value v;
    uint32_t t = c.read<uint32_t>(what + " type");
    if (t > 12) throw Error("GGUF bad " + what + ": value type " + std::to_string(t));
    v.type = static_cast<ValueType>(t);
    if (v.type == ValueType::ARRAY) {
      uint32_t at = c.read<uint32_t>(what + " array type");
      if (at > 12 || at == static_cast<uint32_t>(ValueType::ARRAY))
        throw Error("GGUF bad " + what + ": array element type " + std::to_string(at));
      v.arr_type = static_cast<ValueType>(at);
      v.arr_n = c.read<uint64_t>(what + " array length");
      if (v.arr_type == ValueType::STRING) {
        if (v.arr_n > c.remaining() / 8) throw Error("GGUF bad " + what + ": array length " + std::to_string(v.arr_n));
        v.arr_strs.reserve(v.arr_n);
        for (uint64_t j = 0; j < v.arr_n; ++j) v.arr_strs.push_back(c.read_string(what + "[" + std::to_string(j) + "]"));
      } else {
        size_t es = scalar_size(v.arr_type);
        if (v.arr_n > c.remaining() / es) throw Error("GGUF bad " + what + ": array length " + std::to_string(v.arr_n));
        v.arr_data = c.skip(v.arr_n * es, what);
      }
    } else {
      read_scalar(c, v.type, v, what);
    }
    kv_index_[key] = kv_.size();
    kv_.emplace_back(std::move(key), std::move(v));
  }

  if (auto a = find("general.alignment")) {
    if (!a->is_integer() || a->u == 0 || a->u > (1u << 20) || (a->u & (a->u - 1)) != 0)
      throw Error("GGUF bad metadata 'general.alignment': must be a power of two");
    alignment_ = a->u;
  }

  tensors_.reserve(n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) {
    TensorInfo ti;
    std::string what = "tensor #" + std::to_string(k);
    ti.name = std::string(c.read_string(what + " name"));
    what = "tensor '" + ti.name + "'";
    if (tensor_index_.count(ti.name)) throw Error("GGUF duplicate " + what);
    uint32_t nd = c.read<uint32_t>(what + " n_dims");
    if (nd == 0 || nd > 4) throw Error("GGUF bad " + what + ": n_dims " + std::to_string(nd));
    ti.n_dims = static_cast<int>(nd);
    int64_t total = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      uint64_t ne = c.read<uint64_t>(what + " dim");
      if (ne == 0 || ne > (1ull << 40)) throw Error("GGUF bad " + what + ": dimension " + std::to_string(ne));
      ti.ne[d] = static_cast<int64_t>(ne);
      if (total > std::numeric_limits<int64_t>::max() / ti.ne[d]) throw Error("GGUF bad " + what + ": element count overflows");
      total *= ti.ne[d];
    }
    uint32_t type = c.read<uint32_t>(what + " type");
    if (!type_id_valid(type)) throw Error("GGUF bad " + what + ": unknown tensor type " + std::to_string(type));
    ti.type = static_cast<GgmlType>(type);
    const auto& info = type_info(ti.type);
    if (ti.ne[0] % info.block_size != 0)
      throw Error("GGUF bad " + what + ": row length " + std::to_string(ti.ne[0]) + " is not a multiple of the " +
                  info.name + " block size " + std::to_string(info.block_size));
    ti.n_bytes = static_cast<uint64_t>(ti.ne[0] / info.block_size) * info.type_size;
    uint64_t rows = static_cast<uint64_t>(ti.n_rows());
    if (ti.n_bytes != 0 && rows > (1ull << 62) / ti.n_bytes) throw Error("GGUF bad " + what + ": byte size overflows");
    ti.n_bytes *= rows;
    ti.offset = c.read<uint64_t>(what + " offset");
    if (ti.offset % alignment_ != 0) throw Error("GGUF bad " + what + ": offset " + std::to_string(ti.offset) + " is not aligned");
    tensor_index_[ti.name] = tensors_.size();
    tensors_.push_back(std::move(ti));
  }

  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (n_tensors > 0 && data_offset_ > size_) throw Error("GGUF truncated: data section starts past the end of the file");
  uint64_t data_size = size_ > data_offset_ ? size_ - data_offset_ : 0;
  for (auto& ti : tensors_) {
    if (ti.offset > data_size || ti.n_bytes > data_size - ti.offset)
      throw Error("GGUF truncated: tensor '" + ti.name + "' data [" + std::to_string(ti.offset) + ", +" +
                  std::to_string(ti.n_bytes) + ") lies past the end of the file (data section has " +
                  std::to_string(data_size) + " bytes)");
    ti.data = base_ + data_offset_ + ti.offset;
  }
}

const Value* File::find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

static Error wrong_type(const std::string& key, const Value& v, const char* want) {
  return Error("metadata '" + key + "' has type " + value_type_name(v.type) + ", expected " + want);
}

std::optional<uint64_t> File::get_uint(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer() || (v->i < 0 && v->type != ValueType::U64)) throw wrong_type(key, *v, "an unsigned integer");
  return v->u;
}
std::optional<int64_t> File::get_int(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer()) throw wrong_type(key, *v, "an integer");
  return v->i;
}
std::optional<double> File::get_float(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->is_float()) return v->f;
  if (v->is_integer()) return static_cast<double>(v->i);
  throw wrong_type(key, *v, "a number");
}
std::optional<bool> File::get_bool(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::BOOL) throw wrong_type(key, *v, "bool");
  return v->u != 0;
}
std::optional<std::string> File::get_string(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::STRING) throw wrong_type(key, *v, "string");
  return std::string(v->str);
}
std::vector<std::string_view> File::get_string_array(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return {};
  if (v->type != ValueType::ARRAY || v->arr_type != ValueType::STRING) throw wrong_type(key, *v, "array of strings");
  return v->arr_strs;
}
std::vector<float> File::get_f32_array(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return {};
  if (v->type != ValueType::ARRAY || v->arr_type != ValueType::F32) throw wrong_type(key, *v, "array of f32");
  std::vector<float> out(v->arr_n);
  if (v->arr_n) std::memcpy(out.data(), v->arr_data, v->arr_n * 4);
  return out;
}
std::vector<int32_t> File::get_i32_array(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return {};
  if (v->type != ValueType::ARRAY) throw wrong_type(key, *v, "array of integers");
  std::vector<int32_t> out(v->arr_n);
  for (uint64_t j = 0; j < v->arr_n; ++j) {
    const uint8_t* p = v->arr_data;
    switch (v->arr_type) {
      case ValueType::I32: case ValueType::U32: { int32_t x; std::memcpy(&x, p + 4 * j, 4); out[j] = x; break; }
      case ValueType::I8: case ValueType::U8: case ValueType::BOOL: out[j] = v->arr_type == ValueType::I8 ? (int8_t)p[j] : p[j]; break;
      case ValueType::I16: case ValueType::U16: { int16_t x; std::memcpy(&x, p + 2 * j, 2); out[j] = v->arr_type == ValueType::I16 ? x : (uint16_t)x; break; }
      default: throw wrong_type(key, *v, "array of integers");
    }
  }
  return out;
}

const TensorInfo* File::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace strata::gguf
