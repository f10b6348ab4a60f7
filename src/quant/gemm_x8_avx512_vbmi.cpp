// The bitalg table's packed kernels: gemm_x8_avx512_kernels.h again, built with VBMI as well,
// so the nibble lookups are one vpermb each (nibble_lookup).
#include "quant/gemm_x8_avx512_kernels.h"

namespace strata {

static_assert(STRATA_X8_VBMI, "gemm_x8_avx512_vbmi.cpp must be built with -mavx512vbmi");

void fill_avx512_vbmi_gemm_x8(KernelTable& t) { fill_avx512_x8_kernels(t); }

}  // namespace strata
