// Fuzz target: any request body given to the API parsers must give a request or a RequestError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/requests.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string body(reinterpret_cast<const char*>(data), size);
  try {
    auto j = strata::server::parse_body(body);
    try { (void)strata::server::parse_chat(j); } catch (const strata::server::RequestError&) {}
    try { (void)strata::server::parse_completion(j); } catch (const strata::server::RequestError&) {}
    try { (void)strata::server::parse_anthropic(j); } catch (const strata::server::RequestError&) {}
  } catch (const strata::server::RequestError&) {
  }
  return 0;
}
