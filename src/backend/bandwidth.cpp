#include "backend/bandwidth.h"

#include "backend/huge_buffer.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

namespace strata {
namespace {

uint64_t fold(const uint64_t* w, int n) {
  uint64_t r = 0;
  for (int i = 0; i < n; ++i) r ^= w[i];
  return r;
}

// The reading loop uses the widest loads the CPU has: with 8-byte loads two cores of an AVX-512
// host could issue too few of them to keep memory busy (17 GB/s where 64-byte loads read 25),
// and the weight-streaming kernels it bounds read with whole vectors.
[[gnu::target("avx512f")]] uint64_t xor_lines_avx512(const uint8_t* p, size_t lines) {
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  for (size_t i = 0; i + 4 <= lines; i += 4, p += 256) {
    a = _mm512_xor_si512(a, _mm512_load_si512(p));
    b = _mm512_xor_si512(b, _mm512_load_si512(p + 64));
    c = _mm512_xor_si512(c, _mm512_load_si512(p + 128));
    d = _mm512_xor_si512(d, _mm512_load_si512(p + 192));
  }
  alignas(64) uint64_t w[8];
  _mm512_store_si512(w, _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d)));
  return fold(w, 8);
}

[[gnu::target("avx2")]] uint64_t xor_lines_avx2(const uint8_t* p, size_t lines) {
  __m256i a = _mm256_setzero_si256(), b = a;
  for (size_t i = 0; i < lines; ++i, p += 64) {
    a = _mm256_xor_si256(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
    b = _mm256_xor_si256(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32)));
  }
  alignas(32) uint64_t w[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(w), _mm256_xor_si256(a, b));
  return fold(w, 4);
}

uint64_t xor_lines_sse2(const uint8_t* p, size_t lines) {
  __m128i a = _mm_setzero_si128(), b = a, c = a, d = a;
  for (size_t i = 0; i < lines; ++i, p += 64) {
    const auto* v = reinterpret_cast<const __m128i*>(p);
    a = _mm_xor_si128(a, _mm_load_si128(v));
    b = _mm_xor_si128(b, _mm_load_si128(v + 1));
    c = _mm_xor_si128(c, _mm_load_si128(v + 2));
    d = _mm_xor_si128(d, _mm_load_si128(v + 3));
  }
  alignas(16) uint64_t w[2];
  _mm_store_si128(reinterpret_cast<__m128i*>(w), _mm_xor_si128(_mm_xor_si128(a, b), _mm_xor_si128(c, d)));
  return fold(w, 2);
}

using XorLines = uint64_t (*)(const uint8_t*, size_t);

XorLines widest_reader() {
  if (__builtin_cpu_supports("avx512f")) return xor_lines_avx512;
  if (__builtin_cpu_supports("avx2")) return xor_lines_avx2;
  return xor_lines_sse2;
}

}  // namespace

double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int passes) {
  constexpr size_t kLine = 64;
  const size_t lines = bytes / kLine / 4 * 4;
  // Huge pages, as the repacked weights it is compared with have (backend/huge_buffer.h).
  HugeBuffer mem(lines * kLine);
  auto* buf = reinterpret_cast<uint64_t*>(mem.data());
  const size_t n = lines * kLine / sizeof(uint64_t);
  pool.parallel_for(static_cast<int64_t>(n), 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) buf[i] = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;  // touch every page
  });
  const XorLines read = widest_reader();
  std::vector<uint64_t> sinks(1024, 0);
  double best = 0;
  for (int p = 0; p < passes; ++p) {
    auto t0 = std::chrono::steady_clock::now();
    // Contiguous shares of whole 256-byte steps, one per thread: the access pattern of a
    // weight-streaming matvec.
    const int64_t shares = pool.size();
    pool.parallel_for(shares, 1, [&](int64_t b, int64_t e) {
      for (int64_t s = b; s < e; ++s) {
        const size_t lo = lines / 4 * s / shares * 4, hi = lines / 4 * (s + 1) / shares * 4;
        sinks[static_cast<size_t>(s) % sinks.size()] = read(mem.data() + lo * kLine, hi - lo);
      }
    });
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(lines * kLine) / sec / 1e9);
  }
  volatile uint64_t keep = sinks[0];
  (void)keep;
  return best;
}

}  // namespace strata
