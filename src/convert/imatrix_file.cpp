// Importance matrices: the two file formats (llama.cpp's GGUF layout and its older binary
// layout) and the per-column importance read from them. Collection, which runs a model, is in
// imatrix.cpp; this file needs only the GGUF layer, so the fuzz targets link it on its own.
#include "convert/imatrix.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "common.h"
#include "gguf/gguf.h"

namespace strata::convert {

namespace {

constexpr const char* kSums = ".in_sum2";
constexpr const char* kCounts = ".counts";

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() > n && s.compare(s.size() - n, n, suffix) == 0;
}

Imatrix load_gguf(const std::string& path, std::vector<uint8_t> bytes) {
  auto f = gguf::File::from_bytes(std::move(bytes));
  Imatrix m;
  for (auto v : f->get_string_array("imatrix.datasets")) m.datasets.emplace_back(v);
  m.chunk_count = static_cast<uint32_t>(f->get_uint("imatrix.chunk_count").value_or(0));
  m.chunk_size = static_cast<uint32_t>(f->get_uint("imatrix.chunk_size").value_or(0));
  for (const auto& t : f->tensors()) {
    const bool sums = ends_with(t.name, kSums), counts = ends_with(t.name, kCounts);
    if (!sums && !counts) continue;
    if (t.type != GgmlType::F32) throw Error(path + ": imatrix tensor '" + t.name + "' is not F32");
    const std::string name = t.name.substr(0, t.name.size() - std::strlen(sums ? kSums : kCounts));
    const auto* v = reinterpret_cast<const float*>(t.data);
    ImatrixEntry& e = m.entries[name];
    // One expert per entry is read (dense models); a mixture's tensors have more.
    if (t.n_rows() != 1) throw Error(path + ": imatrix tensor '" + t.name + "' has " + std::to_string(t.n_rows()) +
                                     " rows (per-expert importance is not supported)");
    if (sums) e.sum2.assign(v, v + t.ne[0]);
    else if (t.ne[0] != 1) throw Error(path + ": imatrix tensor '" + t.name + "' should hold one count");
    else e.count = v[0];
  }
  for (const auto& [name, e] : m.entries)
    if (e.sum2.empty() || !(e.count >= 0) || !std::isfinite(e.count))
      throw Error(path + ": imatrix entry '" + name + "' lacks " + (e.sum2.empty() ? kSums : kCounts) + " or has a bad count");
  return m;
}

// The older format: int32 n_entries; per entry int32 name length, name, int32 ncall, int32 nval,
// float values[nval] (ncall times the mean square); then optionally int32 chunk count and a
// length-prefixed dataset name.
Imatrix load_legacy(const std::string& path, const std::vector<uint8_t>& bytes) {
  size_t pos = 0;
  auto take = [&](void* dst, size_t n, const char* what) {
    if (bytes.size() - pos < n) throw Error(path + ": truncated imatrix file (reading " + what + ")");
    std::memcpy(dst, bytes.data() + pos, n);
    pos += n;
  };
  auto take_i32 = [&](const char* what) {
    int32_t v;
    take(&v, 4, what);
    return v;
  };
  Imatrix m;
  const int32_t n = take_i32("the entry count");
  if (n < 0 || static_cast<size_t>(n) > bytes.size() / 12) throw Error(path + ": not an imatrix file (bad entry count)");
  for (int32_t i = 0; i < n; ++i) {
    const int32_t len = take_i32("a name length");
    if (len <= 0 || static_cast<size_t>(len) > bytes.size() - pos) throw Error(path + ": bad name length in imatrix file");
    std::string name(static_cast<size_t>(len), '\0');
    take(name.data(), name.size(), "a name");
    const int32_t ncall = take_i32("a call count"), nval = take_i32("a value count");
    if (ncall < 0 || nval <= 0 || static_cast<size_t>(nval) > (bytes.size() - pos) / 4)
      throw Error(path + ": bad counts for '" + name + "' in imatrix file");
    std::vector<float> v(static_cast<size_t>(nval));
    take(v.data(), v.size() * 4, "values");
    ImatrixEntry& e = m.entries[name];
    e.sum2.assign(v.begin(), v.end());
    e.count = ncall;
  }
  if (bytes.size() - pos >= 4) {
    const int32_t chunks = take_i32("the chunk count");
    if (chunks > 0) m.chunk_count = static_cast<uint32_t>(chunks);
    if (bytes.size() - pos >= 4) {
      const int32_t len = take_i32("the dataset name length");
      if (len > 0 && static_cast<size_t>(len) <= bytes.size() - pos)
        m.datasets.emplace_back(reinterpret_cast<const char*>(bytes.data()) + pos, static_cast<size_t>(len));
    }
  }
  return m;
}

}  // namespace

std::vector<float> Imatrix::importance(const std::string& weight, int64_t cols) const {
  const auto it = entries.find(weight);
  if (it == entries.end() || !(it->second.count > 0)) return {};
  const ImatrixEntry& e = it->second;
  if (static_cast<int64_t>(e.sum2.size()) != cols)
    throw Error("imatrix entry '" + weight + "' has " + std::to_string(e.sum2.size()) + " columns, the tensor " + std::to_string(cols));
  std::vector<float> out(e.sum2.size());
  for (size_t j = 0; j < out.size(); ++j) out[j] = static_cast<float>(e.sum2[j] / e.count);
  return out;
}

Imatrix parse_imatrix(std::vector<uint8_t> bytes, const std::string& name) {
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0) {
    try {
      return load_gguf(name, std::move(bytes));
    } catch (const Error& e) {
      const std::string what = e.what();
      throw Error(what.rfind(name, 0) == 0 ? what : name + ": " + what);
    }
  }
  return load_legacy(name, bytes);
}

Imatrix load_imatrix(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot read " + path);
  return parse_imatrix(std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), {}), path);
}

void save_imatrix(const Imatrix& m, const std::string& path) {
  gguf::Writer w;
  w.set_string("general.type", "imatrix");
  w.set_string_array("imatrix.datasets", m.datasets);
  w.set_u32("imatrix.chunk_count", m.chunk_count);
  w.set_u32("imatrix.chunk_size", m.chunk_size);
  for (const auto& [name, e] : m.entries) {
    std::vector<float> sums(e.sum2.begin(), e.sum2.end());
    const float count = static_cast<float>(e.count);
    w.add_tensor(name + kSums, {static_cast<int64_t>(sums.size())}, GgmlType::F32, sums.data(), sums.size() * 4);
    w.add_tensor(name + kCounts, {1}, GgmlType::F32, &count, 4);
  }
  w.write(path);
}

}  // namespace strata::convert
