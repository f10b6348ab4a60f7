// Shared error type: every user-facing failure is a strata::Error with a one-line message.
#pragma once
#include <stdexcept>
#include <string>

namespace strata {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace strata
