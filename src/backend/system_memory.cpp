#include "backend/system_memory.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace strata {
namespace {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

// A whole-number file such as memory.current; "max" (v2's no limit) and junk read as empty.
std::optional<uint64_t> read_number(const std::string& path) {
  const auto text = read_text(path);
  if (!text) return std::nullopt;
  std::istringstream in(*text);
  uint64_t v = 0;
  if (!(in >> v)) return std::nullopt;
  return v;
}

}  // namespace

std::optional<uint64_t> parse_mem_available(const std::string& meminfo) {
  std::istringstream in(meminfo);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    uint64_t kib = 0;
    std::string unit;
    if (!(fields >> kib >> unit) || unit != "kB") return std::nullopt;
    return kib * 1024;
  }
  return std::nullopt;
}

std::optional<uint64_t> cgroup_headroom(const std::string& proc_self_cgroup, const std::string& cgroup_root) {
  // Lines "id:controllers:path": v1's memory controller has its own hierarchy under memory/
  // (memory.limit_in_bytes, memory.usage_in_bytes), v2's single one is the line "0::path"
  // (memory.max, memory.current).
  std::optional<uint64_t> best;
  std::istringstream in(proc_self_cgroup);
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    std::string dir, limit_file, usage_file;
    if (controllers.empty() && line.compare(0, a, "0") == 0) {
      dir = cgroup_root, limit_file = "memory.max", usage_file = "memory.current";
    } else {
      std::istringstream names(controllers);
      std::string name;
      bool memory = false;
      while (std::getline(names, name, ',')) memory |= name == "memory";
      if (!memory) continue;
      dir = cgroup_root + "/memory", limit_file = "memory.limit_in_bytes", usage_file = "memory.usage_in_bytes";
    }
    // The group itself, then each ancestor up to the hierarchy's root.
    while (true) {
      const std::string here = dir + (path == "/" ? "" : path);
      const auto limit = read_number(here + "/" + limit_file), usage = read_number(here + "/" + usage_file);
      if (limit && usage) {
        const uint64_t room = *limit > *usage ? *limit - *usage : 0;
        best = best ? std::min(*best, room) : room;
      }
      if (path.empty() || path == "/") break;
      const size_t slash = path.rfind('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
  }
  return best;
}

std::optional<uint64_t> available_memory_bytes() {
  const auto meminfo = read_text("/proc/meminfo");
  if (!meminfo) return std::nullopt;
  auto available = parse_mem_available(*meminfo);
  if (!available) return std::nullopt;
  if (const auto cgroups = read_text("/proc/self/cgroup"))
    if (const auto room = cgroup_headroom(*cgroups, "/sys/fs/cgroup")) available = std::min(*available, *room);
  return available;
}

}  // namespace strata
