#include "backend/bandwidth.h"

#include "backend/huge_buffer.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

namespace strata {

double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int passes) {
  const size_t n = bytes / sizeof(uint64_t);
  // Huge pages, as the repacked weights it is compared with have (backend/huge_buffer.h).
  HugeBuffer mem(n * sizeof(uint64_t));
  auto* buf = reinterpret_cast<uint64_t*>(mem.data());
  pool.parallel_for(static_cast<int64_t>(n), 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) buf[i] = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;  // touch every page
  });
  std::vector<uint64_t> sinks(1024, 0);
  double best = 0;
  for (int p = 0; p < passes; ++p) {
    auto t0 = std::chrono::steady_clock::now();
    // Contiguous shares, one per thread: the access pattern of a weight-streaming matvec.
    const int64_t shares = pool.size();
    pool.parallel_for(shares, 1, [&](int64_t b, int64_t e) {
      for (int64_t s = b; s < e; ++s) {
        size_t lo = n * s / shares, hi = n * (s + 1) / shares;
        uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (size_t i = lo; i + 4 <= hi; i += 4) {
          a0 ^= buf[i];
          a1 ^= buf[i + 1];
          a2 ^= buf[i + 2];
          a3 ^= buf[i + 3];
        }
        sinks[static_cast<size_t>(s) % sinks.size()] = a0 ^ a1 ^ a2 ^ a3;
      }
    });
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / sec / 1e9);
  }
  volatile uint64_t keep = sinks[0];
  (void)keep;
  return best;
}

}  // namespace strata
