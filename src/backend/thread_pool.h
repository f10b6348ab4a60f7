// Persistent worker pool: threads are created once and reused for every op (no per-token spawn).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace strata {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Calls fn(begin, end) on disjoint chunks covering [0, n); the caller works too and the call
  // returns when every chunk is done. Chunks are at least `grain` long.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  static int default_threads();  // physical cores (logical / SMT width), at least 1

 private:
  void worker_loop();
  void run_chunks();

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;  // guards sleeping and waking; the loop itself runs on the atomics below
  std::condition_variable cv_start_, cv_done_;
  std::atomic<uint64_t> gen_{0};  // bumped once per loop (and at shutdown)
  std::atomic<int> pending_{0};   // workers that have not finished the current loop
  std::atomic<bool> stop_{false};
  int sleepers_ = 0;  // workers blocked on cv_start_ (under mu_)
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, grain_ = 1;
  std::atomic<int64_t> next_{0};
};

}  // namespace strata
