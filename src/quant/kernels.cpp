#include "quant/kernels.h"

#include <cpuid.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "common.h"
#include "quant/quant.h"

namespace strata {

DotFn KernelTable::dot_for(GgmlType t) const {
  auto id = static_cast<uint32_t>(t);
  if (id >= kMaxTypes || !dot[id]) throw Error("no " + std::string(isa) + " kernel for tensor type " + type_name(t));
  return dot[id];
}

DequantFn KernelTable::dequant_for(GgmlType t) const {
  auto id = static_cast<uint32_t>(t);
  if (id >= kMaxTypes || !dequant[id]) throw Error("no " + std::string(isa) + " kernel for tensor type " + type_name(t));
  return dequant[id];
}

GgmlType activation_type(GgmlType w) {
  switch (w) {
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q8_0:
    case GgmlType::IQ4_NL:
      return GgmlType::Q8_0;
    case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
    case GgmlType::IQ2_XXS: case GgmlType::IQ2_XS: case GgmlType::IQ2_S: case GgmlType::IQ3_XXS:
    case GgmlType::IQ3_S: case GgmlType::IQ1_S: case GgmlType::IQ1_M: case GgmlType::IQ4_XS:
    case GgmlType::TQ1_0: case GgmlType::TQ2_0:
      return GgmlType::Q8_K;
    default:
      return GgmlType::F32;
  }
}

const KernelTable& scalar_kernels() {
  static const KernelTable t = [] {
    KernelTable k;
    fill_scalar_kernels(k);
    fill_scalar_gemm_x8(k);
    k.scale = [](int n, float a, float* y) {
      for (int i = 0; i < n; ++i) y[i] *= a;
    };
    k.exp_shift = [](int n, const float* x, float shift, float* out) {
      for (int i = 0; i < n; ++i) out[i] = std::exp(x[i] - shift);
    };
    k.attn_scores = [](int dk, int nc, const float* kr, const float* q, int group, float* out, int ld) {
      for (int g = 0; g < group; ++g)
        for (int c = 0; c < nc; ++c) {
          const float* qg = q + static_cast<size_t>(g) * dk;
          const float* kc = kr + static_cast<size_t>(c) * dk;
          float s[8] = {};
          int d = 0;
          for (; d + 8 <= dk; d += 8)
            for (int j = 0; j < 8; ++j) s[j] += qg[d + j] * kc[d + j];
          float t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
          for (; d < dk; ++d) t += qg[d] * kc[d];
          out[static_cast<size_t>(g) * ld + c] = t;
        }
    };
    k.attn_values = [](int dv, int nc, const float* v, const float* w, int ld, int group, float* acc) {
      for (int g = 0; g < group; ++g)
        for (int c = 0; c < nc; ++c) {
          const float wc = w[static_cast<size_t>(g) * ld + c];
          float* a = acc + static_cast<size_t>(g) * dv;
          for (int d = 0; d < dv; ++d) a[d] += wc * v[static_cast<size_t>(c) * dv + d];
        }
    };
    k.quantize_act[static_cast<int>(GgmlType::Q8_0)] = [](const float* x, void* d, int64_t n) { quantize_row(GgmlType::Q8_0, x, d, n); };
    k.quantize_act[static_cast<int>(GgmlType::Q8_K)] = [](const float* x, void* d, int64_t n) { quantize_row(GgmlType::Q8_K, x, d, n); };
    return k;
  }();
  return t;
}

// CPUID leaf 1, ECX bit 29.
static bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
}

const KernelTable* avx2_kernels() {
  static const KernelTable* t = []() -> const KernelTable* {
    __builtin_cpu_init();
    // the flags the AVX2 files are built with (STRATA_AVX2_FLAGS); F16C is read from CPUID
    // directly, as clang's __builtin_cpu_supports does not know it
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !cpu_has_f16c()) return nullptr;
    static KernelTable k;
    fill_scalar_kernels(k);  // formats without a SIMD kernel keep the portable one
    fill_avx2_kernels(k);
    fill_avx2_gemm_x8(k);
    fill_avx2_quantizers(k);
    fill_avx2_vec(k);
    return &k;
  }();
  return t;
}

const KernelTable* avx512_kernels() {
  static const KernelTable* t = []() -> const KernelTable* {
    if (!avx2_kernels()) return nullptr;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vl") ||
        !__builtin_cpu_supports("avx512vnni"))
      return nullptr;
    static KernelTable k = *avx2_kernels();
    fill_avx512_kernels(k);
    fill_avx512_gemm_x8(k);
    fill_avx512_vec(k);
    return &k;
  }();
  return t;
}

const KernelTable* avx512_bitalg_kernels() {
  static const KernelTable* t = []() -> const KernelTable* {
    if (!avx512_kernels()) return nullptr;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512bitalg") || !__builtin_cpu_supports("avx512vbmi") || !__builtin_cpu_supports("gfni"))
      return nullptr;
    static KernelTable k = *avx512_kernels();
    fill_avx512_bitalg_kernels(k);
    fill_avx512_vbmi_gemm_x8(k);
    return &k;
  }();
  return t;
}

const KernelTable* amx_kernels() {
  static const KernelTable* t = []() -> const KernelTable* {
    const KernelTable* base = avx512_bitalg_kernels() ? avx512_bitalg_kernels() : avx512_kernels();
    if (!base || !amx_usable()) return nullptr;
    static KernelTable k = *base;
    k.isa = base == avx512_bitalg_kernels() ? "avx512vnni+bitalg+amx" : "avx512vnni+amx";
    fill_amx_kernels(k);
    return &k;
  }();
  return t;
}

const KernelTable& kernels() {
  static const KernelTable* t = [] {
    const char* want = std::getenv("STRATA_ISA");
    if (want && std::strcmp(want, "scalar") == 0) return &scalar_kernels();
    const bool avx2_only = want && std::strcmp(want, "avx2") == 0;
    const bool avx512_only = want && std::strcmp(want, "avx512") == 0;
    if (const KernelTable* a = amx_kernels(); a && !want) return a;
    if (const KernelTable* a = avx512_bitalg_kernels(); a && !avx2_only && !avx512_only) return a;
    if (const KernelTable* a = avx512_kernels(); a && !avx2_only) return a;
    if (const KernelTable* a = avx2_kernels()) return a;
    return &scalar_kernels();
  }();
  return *t;
}

}  // namespace strata
