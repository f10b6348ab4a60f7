#include <cstdio>

#include "cli/commands.h"
#include "common.h"
#include "tokenizer/tokenizer.h"

namespace strata::cli {

void add_kv_options(CLI::App* cmd, KvOptions& o, const std::string& default_format) {
  o.format = default_format;
  cmd->add_option("--kv", o.format, "KV cache format (f16, f32, int8, q4_0, k8v4)");
  cmd->add_option("--kv-resident", o.resident, "Fast-tier KV cells per layer; the rest streams from the backing tier (min 32)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--kv-spill", o.spill, "Directory for a file-backed KV backing tier");
}

void apply_kv_options(const KvOptions& o, engine::SessionOptions& so) {
  so.kv_format = kv::parse_format(o.format);
  so.kv_resident = o.resident;
  so.kv_spill = o.spill;
}

void add_load_options(CLI::App* cmd, model::Model::LoadOptions& o) {
  using Grow = model::Model::Grow;
  auto* on = cmd->add_flag_callback(
      "--repack-iq", [&o] { o.repack_grow = Grow::Always; },
      "Repack IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S weights into level codes, and TQ1_0 into "
      "TQ2_0's 2-bit codes, at load: faster generation, 22-61 % more memory for those weights. Default: when the repacked weights take at most half the "
      "memory available beside the KV cache and the output stays bit for bit the same");
  auto* off = cmd->add_flag_callback(
      "--no-repack-iq", [&o] { o.repack_grow = Grow::Never; }, "Keep those weights in the file's layout (least memory)");
  on->excludes(off);
}

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b == std::string::npos) throw Error("--ids: empty item in '" + s + "'");
    item = item.substr(b, e - b + 1);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    if (used != item.size() || v < 0 || v > INT32_MAX) throw Error("--ids: '" + item + "' is not a token id");
    ids.push_back(static_cast<int32_t>(v));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ids;
}

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", b, units[u]);
  return buf;
}

std::string repack_summary(const model::Model& m) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.2f s", m.repack_seconds());
  return human_bytes(static_cast<double>(m.packed_bytes())) + " repacked, grown layouts adding " +
         human_bytes(static_cast<double>(m.grown_bytes())) + ", in " + seconds;
}

void Utf8Stream::write(const std::string& bytes) {
  pending_ += bytes;
  // Find the start of a trailing, incomplete UTF-8 sequence.
  size_t cut = pending_.size();
  for (size_t back = 1; back <= 4 && back <= pending_.size(); ++back) {
    unsigned char c = static_cast<unsigned char>(pending_[pending_.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    if (c >= 0xC0 && tok::utf8_len(c) > static_cast<int>(back)) cut = pending_.size() - back;
    break;
  }
  if (cut > 0) {
    std::fwrite(pending_.data(), 1, cut, stdout);
    std::fflush(stdout);
    pending_.erase(0, cut);
  }
}

void Utf8Stream::flush() {
  if (!pending_.empty()) std::fwrite(pending_.data(), 1, pending_.size(), stdout);
  pending_.clear();
  std::fflush(stdout);
}

}  // namespace strata::cli
