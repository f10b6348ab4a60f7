// Shared pieces of the KV quality tools (kv-compare, probe, needle).
#pragma once
#include <string>
#include <vector>

#include "kv/formats.h"

namespace strata::cli {

// One KV configuration under test: a format, and a fast-tier size (0 = unstreamed).
struct KvVariant {
  kv::Format format = kv::Format::F16;
  int resident = 0;
  std::string label() const;
};

// "--kv int8,q4_0" plus "--kv-resident N" -> each format unstreamed, then (if N > 0) streamed.
std::vector<KvVariant> kv_variants(const std::string& formats, int resident);

// Longest run of one n-gram (n = 1..8 tokens) repeated back to back, in repetitions.
int longest_repeat_run(const std::vector<int32_t>& ids);
// len(text) / len(zlib(text)): high for looping text.
double compression_ratio(const std::string& text);

}  // namespace strata::cli
