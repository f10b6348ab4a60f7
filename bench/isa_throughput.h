// Instruction throughput loops compiled for AVX2 (isa_throughput.cpp): call them only where the
// CPU has AVX2, FMA and F16C. That file holds the loops alone, with no benchmark code: any inline
// function it compiled out of line would be compiled for AVX2 and might be the copy the linker
// keeps for the whole binary.
#pragma once

namespace strata {

struct IsaChain {
  const char* name;
  void (*run)(long steps);  // `steps` steps of eight independent chains of the operation
};

// The loops; *n is set to their number.
const IsaChain* isa_chains(int* n);
// The 512-bit loops (isa_throughput_avx512.cpp): only where the CPU has AVX-512 F and VNNI.
const IsaChain* isa_chains_avx512vnni(int* n);

}  // namespace strata
