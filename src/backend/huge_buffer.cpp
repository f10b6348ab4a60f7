#include "backend/huge_buffer.h"

#include <sys/mman.h>

#include <new>
#include <utility>

namespace strata {

namespace {
constexpr size_t kHugePage = size_t(2) << 20;
}

HugeBuffer::HugeBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  // Over-map by one huge page so the start can be aligned to one, then return the slack.
  const size_t want = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = mmap(nullptr, want + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t raw = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (raw + kHugePage - 1) & ~(kHugePage - 1);
  if (aligned > raw) munmap(p, aligned - raw);
  const uintptr_t end = raw + want + kHugePage;
  if (end > aligned + want) munmap(reinterpret_cast<void*>(aligned + want), end - (aligned + want));
  data_ = reinterpret_cast<uint8_t*>(aligned);
  mapped_ = want;
#ifdef MADV_HUGEPAGE
  madvise(data_, mapped_, MADV_HUGEPAGE);  // advice only: ordinary pages if refused
#endif
}

HugeBuffer::~HugeBuffer() {
  if (data_) munmap(data_, mapped_);
}

HugeBuffer::HugeBuffer(HugeBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), mapped_(std::exchange(o.mapped_, 0)) {}

HugeBuffer& HugeBuffer::operator=(HugeBuffer&& o) noexcept {
  if (this != &o) {
    if (data_) munmap(data_, mapped_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, 0);
  }
  return *this;
}

}  // namespace strata
