#include "quant/formats.h"

#include "common.h"

namespace strata {

const int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                 1,    13,   25,  38,  53,  69,  89,  113};

namespace {
constexpr TypeInfo kUnknown{"unknown", 0, 0, false, false};

// Indexed by type id.
const TypeInfo kTypes[] = {
    /* 0 */ {"F32", 1, 4, true, true},
    /* 1 */ {"F16", 1, 2, true, true},
    /* 2 */ {"Q4_0", 32, 18, true, true},
    /* 3 */ {"Q4_1", 32, 20, true, true},
    /* 4 */ kUnknown,
    /* 5 */ kUnknown,
    /* 6 */ {"Q5_0", 32, 22, true, true},
    /* 7 */ {"Q5_1", 32, 24, true, true},
    /* 8 */ {"Q8_0", 32, 34, true, true},
    /* 9 */ {"Q8_1", 32, 36, true, false},
    /* 10 */ {"Q2_K", 256, 84, true, true},
    /* 11 */ {"Q3_K", 256, 110, true, true},
    /* 12 */ {"Q4_K", 256, 144, true, true},
    /* 13 */ {"Q5_K", 256, 176, true, true},
    /* 14 */ {"Q6_K", 256, 210, true, true},
    /* 15 */ {"Q8_K", 256, 292, true, false},
    /* 16 */ {"IQ2_XXS", 256, 66, true, true},
    /* 17 */ {"IQ2_XS", 256, 74, true, true},
    /* 18 */ {"IQ3_XXS", 256, 98, true, true},
    /* 19 */ {"IQ1_S", 256, 50, true, true},
    /* 20 */ {"IQ4_NL", 32, 18, true, true},
    /* 21 */ {"IQ3_S", 256, 110, true, true},
    /* 22 */ {"IQ2_S", 256, 82, true, true},
    /* 23 */ {"IQ4_XS", 256, 136, true, true},
    /* 24 */ {"I8", 1, 1, true, false},
    /* 25 */ {"I16", 1, 2, true, false},
    /* 26 */ {"I32", 1, 4, true, false},
    /* 27 */ {"I64", 1, 8, true, false},
    /* 28 */ {"F64", 1, 8, true, false},
    /* 29 */ {"IQ1_M", 256, 56, true, true},
    /* 30 */ {"BF16", 1, 2, true, true},
    /* 31 */ kUnknown,
    /* 32 */ kUnknown,
    /* 33 */ kUnknown,
    /* 34 */ {"TQ1_0", 256, 54, true, true},
    /* 35 */ {"TQ2_0", 256, 66, true, true},
};
constexpr uint32_t kNumTypes = sizeof(kTypes) / sizeof(kTypes[0]);
}  // namespace

bool type_id_valid(uint32_t id) { return id < kNumTypes && kTypes[id].known; }

const TypeInfo& type_info(GgmlType t) {
  auto id = static_cast<uint32_t>(t);
  return id < kNumTypes ? kTypes[id] : kUnknown;
}

std::string type_name(GgmlType t) {
  const auto& ti = type_info(t);
  return ti.known ? ti.name : "type#" + std::to_string(static_cast<uint32_t>(t));
}

size_t row_bytes(GgmlType t, int64_t n) {
  const auto& ti = type_info(t);
  if (!ti.known || n % ti.block_size != 0)
    throw Error("row of " + std::to_string(n) + " elements does not fit " + type_name(t) + " blocks");
  return static_cast<size_t>(n / ti.block_size) * ti.type_size;
}

}  // namespace strata
