// Block formats of GGUF tensors: ids, block geometry and byte sizes exactly as GGUF defines them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace strata {

enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35,
};

struct TypeInfo {
  const char* name;
  int block_size;      // elements per block
  size_t type_size;    // bytes per block
  bool known;          // layout is known to the reader (size can be computed)
  bool supported;      // this build can dequantize / dot it
};

const TypeInfo& type_info(GgmlType t);
bool type_id_valid(uint32_t id);
std::string type_name(GgmlType t);
// Bytes of one row of n elements; n must be a multiple of the block size.
size_t row_bytes(GgmlType t, int64_t n);

constexpr int QK4_0 = 32, QK4_1 = 32, QK5_0 = 32, QK5_1 = 32, QK8_0 = 32, QK4_NL = 32, QK_K = 256;

// Block structs, byte-for-byte the GGUF layouts. uint16_t fields hold IEEE half floats.
#pragma pack(push, 1)
struct BlockQ4_0 { uint16_t d; uint8_t qs[16]; };
struct BlockQ4_1 { uint16_t d, m; uint8_t qs[16]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ8_0 { uint16_t d; int8_t qs[32]; };
struct BlockIQ4_NL { uint16_t d; uint8_t qs[16]; };
struct BlockQ2_K { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; };
struct BlockQ3_K { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; };
struct BlockQ4_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct BlockQ5_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct BlockQ6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };
struct BlockQ8_K { float d; int8_t qs[256]; int16_t bsums[16]; };
// i-quants: 8 (IQ2/IQ1) or 4 (IQ3) values come from one entry of a fixed lattice grid, with
// per-group signs and scales. TQ: ternary values {-1, 0, 1}.
struct BlockIQ2_XXS { uint16_t d; uint16_t qs[32]; };
struct BlockIQ2_XS { uint16_t d; uint16_t qs[32]; uint8_t scales[8]; };
struct BlockIQ2_S { uint16_t d; uint8_t qs[32]; uint8_t signs[32]; uint8_t qh[8]; uint8_t scales[8]; };
struct BlockIQ3_XXS { uint16_t d; uint8_t qs[64]; uint8_t scales_signs[32]; };
struct BlockIQ3_S { uint16_t d; uint8_t qs[64]; uint8_t qh[8]; uint8_t signs[32]; uint8_t scales[4]; };
struct BlockIQ1_S { uint16_t d; uint8_t qs[32]; uint16_t qh[8]; };
struct BlockIQ1_M { uint8_t qs[32]; uint8_t qh[16]; uint16_t scales[4]; };
struct BlockIQ4_XS { uint16_t d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; };
struct BlockTQ1_0 { uint8_t qs[48]; uint8_t qh[4]; uint16_t d; };
struct BlockTQ2_0 { uint8_t qs[64]; uint16_t d; };
#pragma pack(pop)

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ2_XXS) == 66 && sizeof(BlockIQ2_XS) == 74 && sizeof(BlockIQ2_S) == 82);
static_assert(sizeof(BlockIQ3_XXS) == 98 && sizeof(BlockIQ3_S) == 110 && sizeof(BlockIQ1_S) == 50);
static_assert(sizeof(BlockIQ1_M) == 56 && sizeof(BlockIQ4_XS) == 136 && sizeof(BlockTQ1_0) == 54);
static_assert(sizeof(BlockTQ2_0) == 66);

// IQ1_M's fp16 block factor, spread over the top nibbles of its four scale words.
inline uint16_t iq1m_d_bits(const BlockIQ1_M& b) {
  return static_cast<uint16_t>((b.scales[0] >> 12) | ((b.scales[1] >> 8) & 0xF0) | ((b.scales[2] >> 4) & 0xF00) |
                               (b.scales[3] & 0xF000));
}

// The 16 non-linear levels of IQ4_NL (a fact of the format).
extern const int8_t kIq4nlValues[16];

}  // namespace strata
