#include "backend/thread_pool.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <string>

namespace strata {

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_start_.notify_all();
  for (auto& t : workers_) t.join();
}

int ThreadPool::default_threads() {
  // Count distinct (physical id, core id) pairs; fall back to the logical count.
  std::ifstream f("/proc/cpuinfo");
  std::set<std::pair<std::string, std::string>> cores;
  std::string line, phys = "0";
  while (std::getline(f, line)) {
    auto val = [&] { auto p = line.find(':'); return p == std::string::npos ? std::string() : line.substr(p + 2); };
    if (line.rfind("physical id", 0) == 0) phys = val();
    if (line.rfind("core id", 0) == 0) cores.insert({phys, val()});
  }
  int n = static_cast<int>(cores.size());
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, n);
}

void ThreadPool::run_chunks() {
  for (;;) {
    int64_t b = next_.fetch_add(chunk_);
    if (b >= n_) break;
    (*fn_)(b, std::min(n_, b + chunk_));
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_start_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_chunks();
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (--pending_ == 0) cv_done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  // About 4 chunks per thread balances uneven rows without much contention.
  int64_t chunk = std::max(grain, (n + 4 * n_threads_ - 1) / (4 * n_threads_));
  {
    std::lock_guard<std::mutex> lk(mu_);
    fn_ = &fn;
    n_ = n;
    chunk_ = chunk;
    next_.store(0);
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  cv_start_.notify_all();
  run_chunks();
  std::unique_lock<std::mutex> lk(mu_);
  cv_done_.wait(lk, [&] { return pending_ == 0; });
  fn_ = nullptr;
}

}  // namespace strata
