// What the operating system reports about memory, for choices made at load time.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace strata {

// MemAvailable of /proc/meminfo in bytes: what can be allocated without swapping, counting
// reclaimable page cache. Empty where it cannot be read (not Linux, no /proc).
std::optional<uint64_t> available_memory_bytes();
// The same from meminfo text (exposed for tests).
std::optional<uint64_t> parse_mem_available(const std::string& meminfo);

}  // namespace strata
