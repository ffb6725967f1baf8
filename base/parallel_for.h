// Independent tasks on a few threads, for the per-rank work of the planners
// (each rank's plan is a pure function of the schedule, so ranks can be
// planned side by side).
//
// ParallelFor(n, threads, body) calls body(i) exactly once for every i in
// [0, n), on up to `threads` threads, the caller's among them; each thread
// takes the next index not yet taken, in ascending order. It returns when
// every call has returned. Calls for different i may run concurrently:
// body must make them safe (typically each writes only its own slot of a
// vector sized beforehand). threads <= 0 means DefaultThreads(). If the
// system refuses a thread, the ones already running (at least the caller)
// do all the work.
#ifndef JITPIPE_BASE_PARALLEL_FOR_H_
#define JITPIPE_BASE_PARALLEL_FOR_H_

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jitpipe {

// The hardware's thread count (std::thread::hardware_concurrency()), at least 1.
int DefaultThreads();

void ParallelFor(int n, int threads, absl::FunctionRef<void(int)> body);

// body(i) for every i in [0, n) as ParallelFor runs them, the results in
// index order; or the error of the lowest i that failed, which is what a
// loop in index order would have returned (the other calls still run).
template <typename T>
absl::StatusOr<std::vector<T>> ParallelMap(int n, int threads,
                                           absl::FunctionRef<absl::StatusOr<T>(int)> body) {
  std::vector<absl::StatusOr<T>> slots(static_cast<size_t>(std::max(n, 0)),
                                       absl::InternalError("not run"));
  ParallelFor(n, threads, [&](int i) { slots[i] = body(i); });
  std::vector<T> out;
  out.reserve(slots.size());
  for (absl::StatusOr<T>& slot : slots) {
    if (!slot.ok()) return slot.status();
    out.push_back(*std::move(slot));
  }
  return out;
}

}  // namespace jitpipe

#endif  // JITPIPE_BASE_PARALLEL_FOR_H_
