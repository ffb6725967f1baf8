// A rank's reduction thread: REDUCE_GRAD hands a stage's gradients to it and
// the compute thread goes on; the worker posts the collective over the
// stage's data-parallel group, waits for it (bounded by the timeout) and
// takes the next one. This is the overlap of gradient reduction with the
// compute that follows it (PyTorch's reduction stream, DDP's bucket hooks).
//
// Reductions run one at a time, in the order they were started, so every
// member of a group posts its collectives in the same order (the transport's
// requirement). After the first failure the remaining ones are skipped and
// the failure is reported by WaitAll().
//
// Kinds (DataParallelSpec::reduce): kAllReduce sums the gradients in place
// (every member holds the sum); kReduceScatter leaves member i's shard of
// the sum, elements [i * n, (i + 1) * n) with n = elements / group size, at
// its place in the buffer (the rest keeps this member's own values). The
// buffer is reduced as fp32 values; under kReduceScatter a tail of fewer
// than group-size elements is left out.
//
// Thread safety: Start(), Idle(), Ended(), WaitFor() and WaitAll() are
// called by the rank's compute thread; the worker thread is internal.
#ifndef JITPIPE_STAGES_EXEC_REDUCTION_WORKER_H_
#define JITPIPE_STAGES_EXEC_REDUCTION_WORKER_H_

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/transport.h"
#include "scheduler/ir/model.h"

namespace jitpipe {

struct ReductionSpan {
  int32_t index = 0;  // program index of the REDUCE_GRAD
  double start_us = 0;
  double end_us = 0;
};

class ReductionWorker {
 public:
  // Borrows `transport`, which must outlive the worker. `origin` is time
  // zero of the spans. Starts the thread.
  ReductionWorker(Transport* transport, Group group, ReduceKind kind, absl::Duration timeout,
                  std::chrono::steady_clock::time_point origin);
  ReductionWorker(const ReductionWorker&) = delete;
  ReductionWorker& operator=(const ReductionWorker&) = delete;
  // Joins the thread after the reduction in progress, if any, ends (bounded
  // by the timeout; at once once the world is aborted). Queued ones are
  // dropped.
  ~ReductionWorker();

  // Queues the reduction of `data`, described by `info` (stage, program
  // index, action). Returns its ticket: the number of reductions started
  // before it since the worker was made (WaitFor, Ended).
  // REQUIRES: `data` stays valid until WaitAll() returns.
  int64_t Start(absl::Span<float> data, const OpInfo& info);

  // Whether the reduction with `ticket` has ended (reductions end in the
  // order they started); never blocks. Its outcome comes with WaitFor() or
  // WaitAll().
  bool Ended(int64_t ticket);

  // Waits until the reduction with `ticket` has ended, at most `timeout`.
  // Returns the first failure so far (left for WaitAll() too),
  // DeadlineExceeded when the time passes first. A WAIT_REDUCE_GRAD.
  absl::Status WaitFor(int64_t ticket, absl::Duration timeout);

  // Waits until every started reduction has ended, at most `timeout`.
  // Returns the first failure (the transport's error, prefixed with the
  // action), DeadlineExceeded when the time passes first, naming the first
  // unfinished reduction and whether it had started. Clears the queue
  // of failed work so the worker can be reused for the next step.
  absl::Status WaitAll(absl::Duration timeout);

  // Whether every started reduction has ended (successfully or not); never
  // blocks. A caller that polls then collects the outcome with WaitAll().
  bool Idle();

  // The spans of the reductions ended since the last call.
  std::vector<ReductionSpan> TakeSpans();

 private:
  struct Work {
    absl::Span<float> data;
    OpInfo info;
  };

  void Loop();
  absl::Status Reduce(const Work& work);
  double NowUs() const;

  Transport* const transport_;
  const Group group_;
  const int member_;  // this rank's index in the group
  const ReduceKind kind_;
  const absl::Duration timeout_;
  const std::chrono::steady_clock::time_point origin_;

  absl::Mutex mu_;
  std::deque<Work> queue_ ABSL_GUARDED_BY(mu_);
  int unfinished_ ABSL_GUARDED_BY(mu_) = 0;  // queued or running
  std::optional<std::string> in_progress_ ABSL_GUARDED_BY(mu_);  // the running one's action
  int64_t started_ ABSL_GUARDED_BY(mu_) = 0;  // reductions started, ever
  int64_t ended_ ABSL_GUARDED_BY(mu_) = 0;    // of those, ended (or skipped)
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::vector<ReductionSpan> spans_ ABSL_GUARDED_BY(mu_);

  std::thread thread_;  // last: started once everything above exists
};

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_EXEC_REDUCTION_WORKER_H_
