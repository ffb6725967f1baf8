#include "base/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>
#include <vector>

namespace jitpipe {

int DefaultThreads() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

void ParallelFor(int n, int threads, absl::FunctionRef<void(int)> body) {
  if (n <= 0) return;
  if (threads <= 0) threads = DefaultThreads();
  threads = std::min(threads, n);
  std::atomic<int> next{0};
  auto work = [&] {
    for (int i = next.fetch_add(1, std::memory_order_relaxed); i < n;
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      body(i);
    }
  };
  std::vector<std::thread> helpers;
  helpers.reserve(static_cast<size_t>(threads - 1));
  for (int t = 1; t < threads; ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // fewer threads; the loop below still takes every index
    }
  }
  work();
  for (std::thread& helper : helpers) helper.join();
}

}  // namespace jitpipe
