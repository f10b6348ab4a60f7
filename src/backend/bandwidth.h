// Measures the machine's sustained memory read bandwidth with the engine's own thread pool.
#pragma once
#include "backend/thread_pool.h"

namespace strata {

// Streams `bytes` (default 512 MiB, far beyond any cache) `passes` times; returns the best GB/s
// (1e9 bytes per second).
double measure_read_bandwidth(ThreadPool& pool, size_t bytes = size_t(512) << 20, int passes = 5);

}  // namespace strata
