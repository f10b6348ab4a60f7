// The backend layer: the thread pool's loop splitting, huge-page buffers for streamed weights, per-thread
// scratch, and what the system reports about memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <vector>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

#include <unistd.h>

#include "backend/huge_buffer.h"
#include "backend/system_memory.h"
#include "backend/thread_pool.h"
#include "backend/thread_scratch.h"
#include "model/model.h"

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

TEST(ThreadPool, ParallelForCoversEveryIndexOnceInChunksOfAtLeastTheGrain) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 7, 16, 100, 1000, 4097}) {
      for (int64_t grain : {1, 4, 16, 5000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::mutex mu;
        std::vector<std::pair<int64_t, int64_t>> chunks;
        pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
          std::lock_guard<std::mutex> lk(mu);
          chunks.emplace_back(b, e);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << " " << grain << " " << i;
        // Only the chunk that ends the range may be shorter than the grain.
        for (auto [b, e] : chunks) {
          if (e != n) {
            EXPECT_GE(e - b, std::min(grain, n)) << n << " " << grain;
          }
        }
        if (threads > 1 && n >= 16 * grain) {
          // Guided: a chunk starting in the last quarter takes at most 1/threads of what is
          // left, so a thread that runs out of work waits at most that long for the other.
          for (auto [b, e] : chunks) {
            if (b >= n - n / 4) {
              EXPECT_LE(e - b, std::max(grain, n / (4 * threads))) << n << " " << grain << " " << b;
            }
          }
        }
      }
    }
  }
}

TEST(ThreadPool, RunsManyLoopsInARowEachSeeingThePreviousResults) {
  ThreadPool pool(2);
  std::vector<int64_t> v(1000, 0);
  for (int round = 0; round < 500; ++round)
    pool.parallel_for(static_cast<int64_t>(v.size()), 8, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) v[static_cast<size_t>(i)] += i;
    });
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], static_cast<int64_t>(i) * 500);
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

TEST(ThreadScratch, AlignedPerSlotPerThreadAndKeptWhileLargeEnough) {
  auto* a = static_cast<uint8_t*>(thread_scratch(ScratchSlot::AmxStagedBlocks, 1000));
  auto* b = static_cast<uint8_t*>(thread_scratch(ScratchSlot::AmxStagedFactors, 1000));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 64, 0u);
  // Two slots never overlap: fill both to the end and read each back.
  std::fill(a, a + 1000, uint8_t{1});
  std::fill(b, b + 1000, uint8_t{2});
  EXPECT_TRUE(std::all_of(a, a + 1000, [](uint8_t x) { return x == 1; }));
  // A request that fits keeps the buffer; a larger one gets a buffer of its size.
  EXPECT_EQ(thread_scratch(ScratchSlot::AmxStagedBlocks, 10), a);
  auto* big = static_cast<uint8_t*>(thread_scratch(ScratchSlot::AmxStagedBlocks, size_t(1) << 20));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % 64, 0u);
  std::fill(big, big + (size_t(1) << 20), uint8_t{3});  // ASan: every byte is the buffer's
  EXPECT_EQ(thread_scratch(ScratchSlot::AmxStagedBlocks, 1), big);
  EXPECT_NE(thread_scratch(ScratchSlot::AmxStagedBlocks, 0), nullptr);
  // Another thread has its own.
  void* other = nullptr;
  std::thread t([&] { other = thread_scratch(ScratchSlot::AmxStagedBlocks, 1000); });
  t.join();
  EXPECT_NE(other, big);
}

TEST(SystemMemory, ReadsMemAvailableInBytesAndNothingElse) {
  const std::string meminfo = "MemTotal:       24683792 kB\nMemFree:        23301968 kB\nMemAvailable:   24279268 kB\n";
  EXPECT_EQ(parse_mem_available(meminfo), std::optional<uint64_t>(24279268ull * 1024));
  EXPECT_EQ(parse_mem_available("MemTotal: 1000 kB\nMemFree: 10 kB\n"), std::nullopt);  // kernels before 3.14
  EXPECT_EQ(parse_mem_available("MemAvailable: lots\n"), std::nullopt);
  EXPECT_EQ(parse_mem_available("MemAvailable: 12 MB\n"), std::nullopt);
  EXPECT_EQ(parse_mem_available(""), std::nullopt);
  // This host reports it (the tests run on Linux), and it is more than nothing.
  const auto here = available_memory_bytes();
  ASSERT_TRUE(here.has_value());
  EXPECT_GT(*here, 0u);
}

// A container's memory limit counts: the tightest limit less usage over the process's cgroup and
// its ancestors, in either cgroup version's files.
TEST(SystemMemory, CgroupHeadroomIsTheTightestLevel) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("strata_cgroup_" + std::to_string(::getpid()));
  fs::remove_all(root);
  auto put = [&](const fs::path& dir, const char* name, const std::string& text) {
    fs::create_directories(root / dir);
    std::ofstream(root / dir / name) << text << "\n";
  };
  // v2: no limit at the root and on the group itself, 1000 with 400 used on its parent.
  put("", "memory.max", "max");
  put("", "memory.current", "100");
  put("a", "memory.max", "1000");
  put("a", "memory.current", "400");
  put("a/b", "memory.max", "max");
  put("a/b", "memory.current", "100");
  EXPECT_EQ(cgroup_headroom("0::/a/b\n", root), std::optional<uint64_t>(600));
  EXPECT_EQ(cgroup_headroom("0::/\n", root), std::nullopt);  // no level sets a limit
  // v1: the memory hierarchy, its root "unlimited" (the kernel's largest page multiple), the
  // group over its limit (no room), named with other controllers.
  put("memory", "memory.limit_in_bytes", "9223372036854771712");
  put("memory", "memory.usage_in_bytes", "5");
  put("memory/x", "memory.limit_in_bytes", "2000");
  put("memory/x", "memory.usage_in_bytes", "2500");
  EXPECT_EQ(cgroup_headroom("7:cpu,memory:/x\n0::/\n", root), std::optional<uint64_t>(0));
  EXPECT_EQ(cgroup_headroom("4:memory:/\n", root), std::optional<uint64_t>(9223372036854771712ull - 5));
  EXPECT_EQ(cgroup_headroom("3:cpu:/x\n", root), std::nullopt);  // no memory controller
  EXPECT_EQ(cgroup_headroom("", root), std::nullopt);
  fs::remove_all(root);
}

// The default repack rule grows the i-quant layouts only when the whole copy takes at most half
// of the available memory, and never when that is unknown.
TEST(SystemMemory, GrownRepackFitsInHalfTheAvailableMemory) {
  using model::Model;
  EXPECT_TRUE(Model::repack_grow_fits(500, 1000));
  EXPECT_FALSE(Model::repack_grow_fits(501, 1000));
  EXPECT_FALSE(Model::repack_grow_fits(1, std::nullopt));
  EXPECT_TRUE(Model::repack_grow_fits(size_t(324) << 20, uint64_t(24) << 30));
  EXPECT_FALSE(Model::repack_grow_fits(size_t(30) << 30, uint64_t(24) << 30));  // a 70B IQ2_XS grown, on 24 GiB
}

}  // namespace
}  // namespace strata
