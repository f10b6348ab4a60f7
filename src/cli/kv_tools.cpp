#include "cli/kv_tools.h"

#include <zlib.h>

#include <sstream>

namespace strata::cli {

std::string KvVariant::label() const {
  std::string s = kv::format_name(format);
  if (resident > 0) s += "/res" + std::to_string(resident);
  return s;
}

std::vector<KvVariant> kv_variants(const std::string& formats, int resident) {
  std::vector<KvVariant> out;
  std::stringstream ss(formats);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    out.push_back({kv::parse_format(item), 0});
  }
  if (resident > 0) {
    size_t n = out.size();
    for (size_t i = 0; i < n; ++i) out.push_back({out[i].format, resident});
  }
  return out;
}

int longest_repeat_run(const std::vector<int32_t>& ids) {
  int best = ids.empty() ? 0 : 1;
  const int N = static_cast<int>(ids.size());
  for (int n = 1; n <= 8; ++n) {
    for (int start = 0; start + 2 * n <= N; ++start) {
      int reps = 1;
      int pos = start + n;
      while (pos + n <= N && std::equal(ids.begin() + start, ids.begin() + start + n, ids.begin() + pos)) {
        ++reps;
        pos += n;
      }
      best = std::max(best, reps);
    }
  }
  return best;
}

double compression_ratio(const std::string& text) {
  if (text.empty()) return 1.0;
  uLongf len = compressBound(text.size());
  std::vector<Bytef> buf(len);
  if (compress2(buf.data(), &len, reinterpret_cast<const Bytef*>(text.data()), text.size(), 9) != Z_OK) return 1.0;
  return static_cast<double>(text.size()) / static_cast<double>(len);
}

}  // namespace strata::cli
