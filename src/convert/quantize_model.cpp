#include <algorithm>
#include <cstring>

#include "backend/thread_pool.h"
#include "common.h"
#include "convert/convert.h"
#include "convert/imatrix.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

namespace strata::convert {

std::vector<uint8_t> encode_rows(ThreadPool& pool, GgmlType type, int64_t ne0, int64_t rows,
                                 const std::function<void(int64_t, float*)>& row_source, const float* importance) {
  if (!can_quantize(type))
    throw Error("cannot quantize to " + type_name(type) + ": this build has no quantizer for it");
  const size_t rb = row_bytes(type, ne0);
  std::vector<uint8_t> out(rb * static_cast<size_t>(rows));
  // About 1M elements per task keeps both cores busy without a buffer per row.
  const int64_t grain = std::max<int64_t>(1, (1 << 20) / std::max<int64_t>(ne0, 1));
  pool.parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
    std::vector<float> buf(static_cast<size_t>(ne0));
    for (int64_t r = r0; r < r1; ++r) {
      row_source(r, buf.data());
      quantize_row_best(type, buf.data(), out.data() + rb * static_cast<size_t>(r), ne0, importance);
    }
  });
  return out;
}

void ConvertReport::add(GgmlType type, int64_t n_elements, uint64_t bytes) {
  auto& e = by_type[type_name(type)];
  e.first += 1;
  e.second += bytes;
  n_params += static_cast<uint64_t>(n_elements);
  n_bytes += bytes;
}

void ConvertReport::print(std::FILE* out) const {
  for (auto& [name, e] : by_type)
    std::fprintf(out, "  %-8s %4d tensors %10.2f MiB\n", name.c_str(), e.first, e.second / 1048576.0);
  std::fprintf(out, "  total    %.1fM parameters, %.2f MiB, %.3f bits per weight\n", n_params / 1e6,
               n_bytes / 1048576.0, n_params ? 8.0 * static_cast<double>(n_bytes) / static_cast<double>(n_params) : 0.0);
  if (with_importance || without_importance)
    std::fprintf(out, "  importance matrix: %d tensors weighted by it, %d it has no entry for\n", with_importance,
                 without_importance);
}

ConvertReport quantize_model(const std::string& in_path, const std::string& out_path,
                             const FileType& ft, int n_threads, std::FILE* log, const Imatrix* imatrix) {
  auto in = gguf::File::open(in_path);
  auto arch = in->get_string("general.architecture").value_or("");
  int n_layer = 0;
  if (auto n = in->get_uint(arch + ".block_count")) n_layer = static_cast<int>(*n);
  const bool output_tied = in->find_tensor("output.weight") == nullptr;

  gguf::Writer w;
  w.set_string("general.architecture", arch);
  w.set_u32("general.quantization_version", 2);
  w.set_u32("general.file_type", ft.gguf_file_type);
  w.copy_metadata(*in);

  ThreadPool pool(n_threads > 0 ? n_threads : ThreadPool::default_threads());
  ConvertReport report;
  bool requantized = false;
  for (const auto& t : in->tensors()) {
    std::vector<int64_t> dims(t.ne, t.ne + t.n_dims);
    if (!type_info(t.type).supported)
      throw Error("tensor '" + t.name + "' is " + type_name(t.type) + ", which this build cannot read");
    GgmlType type = choose_type(ft, {t.name, dims}, n_layer, output_tied);
    std::vector<uint8_t> bytes;
    if (type == t.type) {
      bytes.assign(t.data, t.data + t.n_bytes);
    } else {
      const bool src_float = t.type == GgmlType::F32 || t.type == GgmlType::F16 || t.type == GgmlType::BF16;
      requantized |= !src_float;
      const size_t src_rb = row_bytes(t.type, t.ne[0]);
      std::vector<float> importance;
      if (imatrix && uses_importance(type)) {
        importance = imatrix->importance(t.name, t.ne[0]);
        if (importance.empty()) ++report.without_importance;
        else ++report.with_importance;
      }
      bytes = encode_rows(pool, type, t.ne[0], t.n_rows(), [&](int64_t r, float* row) {
        dequantize_row_ref(t.type, t.data + src_rb * static_cast<size_t>(r), row, t.ne[0]);
      }, importance.empty() ? nullptr : importance.data());
    }
    report.add(type, t.n_elements(), bytes.size());
    if (log) std::fprintf(log, "  %-32s %-14s %-6s -> %s\n", t.name.c_str(), t.shape_string().c_str(),
                          type_name(t.type).c_str(), type_name(type).c_str());
    w.add_tensor(t.name, dims, type, std::move(bytes));
  }
  if (requantized && log)
    std::fprintf(log, "note: some source tensors were already quantized; requantizing adds their error to the new format's\n");
  w.write(out_path);
  return report;
}

}  // namespace strata::convert
