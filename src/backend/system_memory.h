// What the operating system reports about memory, for choices made at load time.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace strata {

// Bytes this process can still allocate without swapping or meeting a container's limit: the
// smaller of MemAvailable (/proc/meminfo; counts reclaimable page cache) and the headroom of the
// process's memory cgroup and each cgroup above it (limit less usage, v1 or v2). Empty where
// MemAvailable cannot be read (not Linux, no /proc).
std::optional<uint64_t> available_memory_bytes();

// The parts, exposed for tests.
// MemAvailable of meminfo text, in bytes.
std::optional<uint64_t> parse_mem_available(const std::string& meminfo);
// The smallest (limit - usage) over the memory cgroup named in proc_self_cgroup (the text of
// /proc/self/cgroup) and its ancestors, under cgroup_root (normally /sys/fs/cgroup); empty when
// no level sets a limit.
std::optional<uint64_t> cgroup_headroom(const std::string& proc_self_cgroup, const std::string& cgroup_root);

}  // namespace strata
