// Instruction throughput of the 512-bit multiplies the AVX-512 VNNI kernels are built from, as in
// isa_throughput.cpp (eight independent chains; items/s is operations, or pairs, per second). A
// pair in one chain takes the sum of its two times where they share an execution slot: on Zen 4,
// vpdpbusd, vpmulld, vpdpwssd and vfmadd231ps all take the one 512-bit multiply slot a cycle,
// while adds, shifts and shuffles go beside them. That sets the token-band kernels' ceiling: one
// vpmulld per sub-block's 16 tokens is 1 multiply in 5 with 16-value sub-blocks (Q6_K) and 1 in 9
// with 32 (IQ4_XS); paired sub-blocks (Q2_K, Q3_K, TQ, IQ1_M) halve it. The chains repeat
// isa_throughput.cpp's on 512-bit registers: a shared template would be compiled for both ISAs.
#include "isa_throughput.h"

#include <immintrin.h>

namespace strata {

namespace {

template <typename Op>
void chains512(long steps) {
  __m512i a[8];
  for (int i = 0; i < 8; ++i) a[i] = _mm512_set1_epi8(static_cast<char>(i + 1));
  const __m512i b = _mm512_set1_epi8(3);
  for (long n = 0; n < steps; ++n) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) a[i] = Op{}(a[i], b);
    __asm__ volatile("" : "+v"(a[0]), "+v"(a[1]), "+v"(a[2]), "+v"(a[3]), "+v"(a[4]), "+v"(a[5]), "+v"(a[6]), "+v"(a[7]));
  }
}

constexpr auto kDpbusd = [](__m512i x, __m512i y) { return _mm512_dpbusd_epi32(x, y, y); };
constexpr auto kMulld = [](__m512i x, __m512i y) { return _mm512_mullo_epi32(x, y); };
constexpr auto kDpwssd = [](__m512i x, __m512i y) { return _mm512_dpwssd_epi32(x, y, y); };
constexpr auto kAdd = [](__m512i x, __m512i y) { return _mm512_add_epi32(x, y); };
constexpr auto kDpbusdMulld = [](__m512i x, __m512i y) { return _mm512_mullo_epi32(_mm512_dpbusd_epi32(x, y, y), y); };

const IsaChain kChains[] = {
    {"Isa512/vpdpbusd", chains512<decltype(kDpbusd)>},
    {"Isa512/vpmulld", chains512<decltype(kMulld)>},
    {"Isa512/vpdpwssd", chains512<decltype(kDpwssd)>},
    {"Isa512/vpaddd", chains512<decltype(kAdd)>},
    {"Isa512/vpdpbusd_vpmulld", chains512<decltype(kDpbusdMulld)>},
};

}  // namespace

const IsaChain* isa_chains_avx512vnni(int* n) {
  *n = static_cast<int>(sizeof kChains / sizeof kChains[0]);
  return kChains;
}

}  // namespace strata
