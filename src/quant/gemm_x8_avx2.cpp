// The 8-row packed kernels (gemm_x8_simd.h) built for AVX2 + FMA + F16C.
#include "quant/gemm_x8_simd.h"

namespace strata {

void fill_avx2_gemm_x8(KernelTable& t) {
  t.gemm_x8[static_cast<int>(GgmlType::Q8_0)] = Dispatch<KQ8_0>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q4_0)] = Dispatch<KQ4_0>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q5_0)] = Dispatch<KQ5_0>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q4_1)] = Dispatch<KQ4_1>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q5_1)] = Dispatch<KQ5_1>::run;
  t.gemm_x8[static_cast<int>(GgmlType::IQ4_NL)] = Dispatch<KIQ4_NL>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q2_K)] = Dispatch<KQ2_K>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q3_K)] = Dispatch<KQ3_K>::run;
  // Prefill of packed Q2_K and Q3_K: decoded once per matmul, then gemm_decoded8 (dot_avx2.cpp),
  // whose unsigned path measured faster than their packed kernels on several tokens.
  t.decode_packed8[static_cast<int>(GgmlType::Q2_K)] = decode_packed8_q23<BlockQ2_Kx8>;
  t.decode_packed8[static_cast<int>(GgmlType::Q3_K)] = decode_packed8_q23<BlockQ3_Kx8>;
  t.gemm_x8[static_cast<int>(GgmlType::TQ2_0)] = Dispatch<KTQ2_0>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q4_K)] = Dispatch<KQ4_K>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q5_K)] = Dispatch<KQ5_K>::run;
  t.gemm_x8[static_cast<int>(GgmlType::Q6_K)] = Dispatch<KQ6_K>::run;
  // Prefill of packed Q6_K: decoded once per matmul (values code - 32, within gemm_decoded8's 63),
  // then gemm_decoded8, which gives the packed kernel's bits.
  t.decode_packed8[static_cast<int>(GgmlType::Q6_K)] = decode_packed8_q6_k;
  t.gemm_x8[static_cast<int>(GgmlType::F16)] = Dispatch<KF16>::run;
  t.gemm_x8[static_cast<int>(GgmlType::BF16)] = Dispatch<KBF16>::run;
  t.gemm_x8[static_cast<int>(GgmlType::IQ4_XS)] = Dispatch<KIQ4_XS>::run;
  // The lattice i-quants' grown layouts (packed when memory allows or on request, packing_grows); prefill with
  // more than 4 rows decodes them once per matmul, as the file layout is.
  t.gemm_x8[static_cast<int>(GgmlType::IQ2_XXS)] = Dispatch<KIQ2_XXS>::run;
  t.decode_packed8[static_cast<int>(GgmlType::IQ2_XXS)] = decode_packed8_iq2<BlockIQ2XXSLevelsx8>;
  for (GgmlType iq2 : {GgmlType::IQ2_XS, GgmlType::IQ2_S}) {
    t.gemm_x8[static_cast<int>(iq2)] = Dispatch<KIQ2>::run;
    t.decode_packed8[static_cast<int>(iq2)] = decode_packed8_iq2<BlockIQ2Levelsx8>;
  }
  for (GgmlType iq1 : {GgmlType::IQ1_S, GgmlType::IQ1_M}) {
    t.gemm_x8[static_cast<int>(iq1)] = Dispatch<KIQ1>::run;
    t.decode_packed8[static_cast<int>(iq1)] = decode_packed8_iq1;
  }
  t.gemm_x8[static_cast<int>(GgmlType::IQ3_XXS)] = Dispatch<KIQ3_XXSOffset>::run;
  t.decode_packed8[static_cast<int>(GgmlType::IQ3_XXS)] = decode_packed8_nibble_values<IQ3_XXSValues>;
  t.gemm_x8[static_cast<int>(GgmlType::IQ3_S)] = Dispatch<KIQ3_SOffset>::run;
  t.decode_packed8[static_cast<int>(GgmlType::IQ3_S)] = decode_packed8_nibble_values<IQ3_SValues>;
  // Several groups per call (gemm_x8.h); the scalar table uses the same counts.
  t.gemm_groups[static_cast<int>(GgmlType::F16)] = HalfGroupsAvx2<GF16>::run;
  t.gemm_groups[static_cast<int>(GgmlType::BF16)] = HalfGroupsAvx2<GBF16>::run;
  t.gemm_groups[static_cast<int>(GgmlType::Q4_0)] = GroupsDispatch<GQ4_0, 2>::run;
  t.gemm_groups[static_cast<int>(GgmlType::Q5_0)] = GroupsDispatch<GQ5_0, 2>::run;
  // Prefill of F16 and BF16 on more than 4 tokens: the weights widened once per chunk of columns.
  t.gemm_half_wide[static_cast<int>(GgmlType::F16)] = gemm_half_wide<LanesAvx2, WidenF16, 6>;
  t.gemm_half_wide[static_cast<int>(GgmlType::BF16)] = gemm_half_wide<LanesAvx2, WidenBF16, 6>;
  t.half_wide_groups[static_cast<int>(GgmlType::F16)] = 2;
  t.half_wide_groups[static_cast<int>(GgmlType::BF16)] = 2;
  t.groups_per_call[static_cast<int>(GgmlType::F16)] = kHalfBlockGroups;
  t.groups_per_call[static_cast<int>(GgmlType::BF16)] = kHalfBlockGroups;
  t.groups_per_call[static_cast<int>(GgmlType::Q4_0)] = 2;
  t.groups_per_call[static_cast<int>(GgmlType::Q5_0)] = 2;
  // AMD hosts decode Q4_0 and Q5_0 (this table's pairs) one group per call, as the AVX-512 table
  // does there (decode_one_group_per_call): a pair's two streams read memory slowly. Zen 4 with this table
  // (STRATA_ISA=avx2), Matvec from memory (MV_KIB=262144 MV_COLS=1024, two threads, best of 2,
  // four alternated rounds), pairs -> one group: Q4_0 21.0, 22.6, 22.5, 23.8 -> 37.5, 43.3, 33.8,
  // 33.2 GB/s; Q5_0 20.6, 19.5, 19.1, 18.3 -> 36.3, 49.0, 33.1, 30.6 (Q8_0 in the same runs
  // 30.3-33.3 and 32.2-35.6). Zen 1-3, which take this table, are unmeasured.
  if (__builtin_cpu_is("amd")) decode_one_group_per_call(t);
  share_tq1_0_packed_kernels(t);
}

}  // namespace strata
