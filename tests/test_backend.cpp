// The backend layer's memory: huge-page buffers for streamed weights.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "backend/huge_buffer.h"

namespace strata {
namespace {

// The VmFlags line of the mapping that holds address p, from /proc/self/smaps ("" if none).
std::string vm_flags_of(const void* p) {
  std::ifstream in("/proc/self/smaps");
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    unsigned long lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = a >= lo && a < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

TEST(HugeBuffer, IsAlignedZeroFilledAndWritableToTheEnd) {
  const size_t n = (size_t(5) << 20) + 12345;  // not a whole number of huge pages
  HugeBuffer b(n);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b.size(), n);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % (size_t(2) << 20), 0u);
  uint64_t nonzero = 0;
  for (size_t i = 0; i < n; i += 4096) nonzero += b.data()[i];
  nonzero += b.data()[n - 1];
  EXPECT_EQ(nonzero, 0u);
  for (size_t i = 0; i < n; ++i) b.data()[i] = static_cast<uint8_t>(i * 7);
  EXPECT_EQ(b.data()[n - 1], static_cast<uint8_t>((n - 1) * 7));
}

TEST(HugeBuffer, AsksTheKernelForHugePages) {
  if (!std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled")) GTEST_SKIP() << "kernel without huge pages";
  HugeBuffer b(size_t(4) << 20);
  const std::string flags = vm_flags_of(b.data());
  if (flags.empty()) GTEST_SKIP() << "/proc/self/smaps has no VmFlags here";
  // "hg": the mapping carries MADV_HUGEPAGE advice (granting it is the kernel's choice).
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
}

TEST(HugeBuffer, MovesOwnershipAndFreesOnce) {
  HugeBuffer a(size_t(3) << 20);
  uint8_t* p = a.data();
  p[100] = 42;
  HugeBuffer b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.data()[100], 42);
  HugeBuffer c(1);
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(b.data(), nullptr);
  HugeBuffer empty(0);
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.size(), 0u);
}

}  // namespace
}  // namespace strata
