// Large read-mostly buffers (repacked weights, the bandwidth probe) backed by anonymous memory
// the kernel is asked to map with 2 MiB pages: streaming a matrix through 4 KiB pages costs a
// TLB miss every 4 KiB (a two-thread streaming read here: about 21.5 GB/s with 4 KiB pages,
// 23.2 GB/s with huge ones, means of three alternated pairs).
#pragma once
#include <cstddef>
#include <cstdint>

namespace strata {

class HugeBuffer {
 public:
  HugeBuffer() = default;
  // Zero-filled; throws std::bad_alloc when the memory cannot be had. Falls back to ordinary
  // pages where the kernel does not offer huge ones.
  explicit HugeBuffer(size_t bytes);
  ~HugeBuffer();
  HugeBuffer(HugeBuffer&& o) noexcept;
  HugeBuffer& operator=(HugeBuffer&& o) noexcept;
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;    // bytes asked for
  size_t mapped_ = 0;  // bytes mapped (whole huge pages)
};

}  // namespace strata
