// Scratch memory that stays with a thread, for the kernel files compiled with ISA flags.
//
// Those files must not instantiate std templates or other inline functions out of line: such a
// copy is a weak symbol, the linker keeps one copy of it for the whole program, and if it keeps
// the AVX-512 one, baseline code that calls std::vector<float>::resize faults on a CPU without
// AVX-512 (it happened: vmovdqu8 in _M_default_append from gemm_amx.cpp, in the ASan build).
// So their buffers come from here, compiled for the baseline, and the Build.IsaObjectsDefineNo
// WeakFunctions test checks every ISA object for weak functions.
#pragma once
#include <cstddef>

namespace strata {

// One buffer per use, so the buffers a kernel holds at once never overlap.
enum class ScratchSlot {
  IqPermutedActivations,  // dot_avx2.cpp: a call's Q8_K values in the i-quant kernels' order
  BitalgGatherOrder,      // dot_avx512_bitalg.cpp: Q8_K values in gather order
  BitalgPlanes4,          // dot_avx512_bitalg.cpp: Q8_K values in 4 planes and their signs
  BitalgPlanes8,          // dot_avx512_bitalg.cpp: the same in 8 planes
  AmxStagedBlocks,        // gemm_amx.cpp: 32-value blocks staged for the tiles
  AmxStagedFactors,       // gemm_amx.cpp: their factors and offsets
  AmxStagedDecoded,       // gemm_amx.cpp: decoded 256-value blocks staged for the tiles
  Count
};

// At least `bytes` bytes, 64-byte aligned, for this thread; valid until the next call with the
// same slot on this thread. The contents are unspecified (a grown buffer does not keep them).
void* thread_scratch(ScratchSlot slot, size_t bytes);

}  // namespace strata
