// Fuzz target: any byte string given to the GGUF reader (and, when it parses, to the tokenizer
// loader and the tensor views) or to the importance-matrix reader (GGUF or the older binary
// layout) must produce a value or a strata::Error, never a crash.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "convert/imatrix.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto m = strata::convert::parse_imatrix(std::vector<uint8_t>(data, data + size), "input");
    for (const auto& [name, e] : m.entries) (void)m.importance(name, static_cast<int64_t>(e.sum2.size()));
  } catch (const strata::Error&) {
  }
  try {
    auto f = strata::gguf::File::from_bytes(std::vector<uint8_t>(data, data + size));
    volatile uint8_t sink = 0;
    for (const auto& t : f->tensors())
      if (t.n_bytes) sink = sink ^ t.data[0] ^ t.data[t.n_bytes - 1];  // every view lies inside the file
    for (const auto& [k, v] : f->metadata()) (void)v.to_string();
    try {
      auto tk = strata::tok::Tokenizer::from_gguf(*f);
      auto ids = tk->encode("Hello world <s> 123", true, true);
      (void)tk->decode(ids);
    } catch (const strata::Error&) {
    }
  } catch (const strata::Error&) {
  }
  return 0;
}
