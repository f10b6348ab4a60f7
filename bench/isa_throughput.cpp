// Instruction throughput on this CPU (AVX2): eight independent chains of one operation, or of the
// short sequences the int8 kernels are built from, so items/s is operations (or sequences) per
// second. They show which execution ports bound a kernel: e.g. whether vpsignb competes with the
// multiplies (it does on Zen 3), which sets the ceiling of the signed Q8_0 product.
#include <benchmark/benchmark.h>
#include <immintrin.h>

namespace {

template <typename Op>
void chains(benchmark::State& state, Op op) {
  __m256i a[8];
  for (int i = 0; i < 8; ++i) a[i] = _mm256_set1_epi8(static_cast<char>(i + 1));
  const __m256i b = _mm256_set1_epi8(3);
  constexpr int kSteps = 1024;
  for (auto _ : state) {
    for (int n = 0; n < kSteps; ++n) {
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) a[i] = op(a[i], b);
      // Keep the chains in registers and their results live.
      __asm__ volatile("" : "+x"(a[0]), "+x"(a[1]), "+x"(a[2]), "+x"(a[3]), "+x"(a[4]), "+x"(a[5]), "+x"(a[6]), "+x"(a[7]));
    }
  }
  state.SetItemsProcessed(state.iterations() * kSteps * 8);
}

// Op: a captureless lambda, so that each benchmark's loop has the operation inlined.
template <typename Op>
void reg(const char* name, Op) {
  benchmark::RegisterBenchmark(name, [](benchmark::State& s) { chains(s, Op{}); });
}

const bool kRegistered = [] {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return false;
  reg("Isa/vpmaddubsw", [](__m256i x, __m256i y) { return _mm256_maddubs_epi16(x, y); });
  reg("Isa/vpmaddwd", [](__m256i x, __m256i y) { return _mm256_madd_epi16(x, y); });
  reg("Isa/vpsignb", [](__m256i x, __m256i y) { return _mm256_sign_epi8(x, y); });
  reg("Isa/vfmadd231ps", [](__m256i x, __m256i y) {
    const __m256 fy = _mm256_castsi256_ps(y);
    return _mm256_castps_si256(_mm256_fmadd_ps(_mm256_castsi256_ps(x), fy, fy));
  });
  // The 32 products of a signed (Q8_0) weight chunk: sign, maddubs, widening madd, add.
  reg("Isa/signed_chunk", [](__m256i x, __m256i y) {
    return _mm256_add_epi32(x, _mm256_madd_epi16(_mm256_maddubs_epi16(y, _mm256_sign_epi8(y, x)), y));
  });
  // The same for unsigned 4-bit codes (Q4_0), summed in 16 bits: maddubs and add.
  reg("Isa/unsigned_chunk", [](__m256i x, __m256i y) { return _mm256_add_epi16(x, _mm256_maddubs_epi16(y, x)); });
  return true;
}();

}  // namespace
