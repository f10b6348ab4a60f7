// The AVX-512 table's packed kernels (gemm_x8_avx512_kernels.h), built with VNNI.
#include "quant/gemm_x8_avx512_kernels.h"

namespace strata {

void fill_avx512_gemm_x8(KernelTable& t) { fill_avx512_x8_kernels(t); }

}  // namespace strata
