// The 8-row packed kernels (gemm_x8_simd.h) built for AVX-512 VNNI: the integer formats' byte
// dot products go through vpdpbusd (256-bit, AVX512VL). The F16 and BF16 kernels, and the group
// counts, stay those of the AVX2 table this one is copied from.
#include "quant/gemm_x8_simd.h"

namespace strata {

void fill_avx512_gemm_x8(KernelTable& t) {
  static_assert(kX8Vnni, "gemm_x8_avx512.cpp must be built with -mavx512vnni -mavx512vl");
  t.gemm_x8[static_cast<int>(GgmlType::Q8_0)] = Dispatch<KQ8_0>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q4_0)] = Dispatch<KQ4_0>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q5_0)] = Dispatch<KQ5_0>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q4_1)] = Dispatch<KQ4_1>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q5_1)] = Dispatch<KQ5_1>::run;
  t.gemm_x8[static_cast<int>(GgmlType::IQ4_NL)] = Dispatch<KIQ4_NL>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q4_K)] = Dispatch<KQ4_K>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q5_K)] = Dispatch<KQ5_K>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q6_K)] = Dispatch<KQ6_K>::run;
  t.gemm_x8[static_cast<int>(GgmlType::IQ4_XS)] = Dispatch<KIQ4_XS>::run;
  t.gemm_groups[static_cast<int>(GgmlType::Q4_0)] = GroupsDispatch<GQ4_0, 2>::run;
  t.gemm_groups[static_cast<int>(GgmlType::Q5_0)] = GroupsDispatch<GQ5_0, 2>::run;
}

}  // namespace strata
