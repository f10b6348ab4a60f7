#include "backend/thread_scratch.h"

#include <new>

namespace strata {

namespace {

struct Buffer {
  static constexpr std::align_val_t kAlign{64};
  void* p = nullptr;
  size_t size = 0;
  ~Buffer() { ::operator delete(p, kAlign); }
};

}  // namespace

void* thread_scratch(ScratchSlot slot, size_t bytes) {
  thread_local Buffer buffers[static_cast<size_t>(ScratchSlot::Count)];
  Buffer& b = buffers[static_cast<size_t>(slot)];
  if (bytes > b.size || !b.p) {
    // Grown by half again at least, so a slowly growing request does not reallocate every call.
    size_t size = b.size + b.size / 2;
    if (size < bytes) size = bytes;
    if (size == 0) size = 64;
    ::operator delete(b.p, Buffer::kAlign);
    b.p = nullptr;
    b.size = 0;
    b.p = ::operator new(size, Buffer::kAlign);  // throws std::bad_alloc, leaving the slot empty
    b.size = size;
  }
  return b.p;
}

}  // namespace strata
