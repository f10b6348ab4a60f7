// Quantizers of the lattice i-quants: a grid search (see quantize_iq.cpp).
#pragma once
#include <cstdint>

#include "quant/formats.h"

namespace strata {

bool is_lattice_iquant(GgmlType t);  // IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S
// Encodes nb blocks of 256 floats; importance (optional, one non-negative value per element)
// weights each element's error (see quantize_iq.cpp).
void quantize_lattice(GgmlType type, const float* x, void* dst, int64_t nb, const float* importance = nullptr);

}  // namespace strata
