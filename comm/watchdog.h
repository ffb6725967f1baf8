// The watchdog of a device backend (comm/cuda, comm/nccl), after PyTorch's
// NCCL watchdog: a thread that looks at the rank's pending operations --
// each one a probe of its completion event (cudaEventQuery), which never
// blocks -- and, once the oldest has been pending longer than the timeout,
// reports it, once, to a handler: the world's, which lets the replay driver
// dump every local rank's flight record and then aborts the job
// (ncclCommAbort), so that a rank whose host thread is stuck behind the
// device (a synchronous copy in a stage, a graph launch waiting on a hung
// receive) still fails within seconds of the timeout.
//
// The host-side executor has its own timeout for the waits it makes (the
// step end); the watchdog covers the time its thread is not waiting in the
// transport. Both name the operation the same way.
//
// The logic (Check) is separate from the thread (WatchdogThread) and reads
// time from a Clock, so that it is tested with a fake clock on the CPU.
//
// Thread safety: Watch, Forget, Check and the accessors may be called from
// any thread; probes run on the thread that calls Check, outside the lock.
#ifndef JITPIPE_COMM_WATCHDOG_H_
#define JITPIPE_COMM_WATCHDOG_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace jitpipe {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() = 0;
};
// absl::Now(); a process-wide object, never destroyed.
Clock* RealClock();

class Watchdog {
 public:
  // True once the operation has completed; an error when it failed (it
  // counts as ended: its owner reports the failure). Never blocks.
  using Probe = std::function<absl::StatusOr<bool>()>;
  // Called once, on the thread that calls Check, with the owner of the
  // operation that timed out (its rank) and DeadlineExceeded
  // "watchdog: <what> not complete after <timeout>".
  using Handler = std::function<void(int owner, const absl::Status&)>;

  // REQUIRES: timeout > 0; `clock` (borrowed) outlives the watchdog.
  Watchdog(absl::Duration timeout, Handler on_timeout, Clock* clock = RealClock());
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Watches operation `id` (unique among those watched) of `owner` (a
  // rank), described as `what` ("rank 1: receive 1RECV_F2 from rank 0
  // (index 3)"), posted now.
  void Watch(uint64_t id, int owner, std::string what, Probe done) ABSL_LOCKS_EXCLUDED(mu_);
  // Stops watching `id` (its owner saw it end); unknown ids are ignored.
  void Forget(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);

  // One round: probes every watched operation in the order they were
  // watched and drops those that ended; then, if the oldest still pending
  // was watched longer ago than the timeout, calls the handler (the first
  // time only) and returns its status. OK otherwise, and after it fired.
  absl::Status Check() ABSL_LOCKS_EXCLUDED(mu_);

  bool fired() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t pending() const ABSL_LOCKS_EXCLUDED(mu_);
  absl::Duration timeout() const { return timeout_; }

 private:
  struct Op {
    uint64_t id = 0;
    int owner = -1;
    std::string what;
    absl::Time since;
    Probe done;
  };

  const absl::Duration timeout_;
  const Handler on_timeout_;
  Clock* const clock_;

  mutable absl::Mutex mu_;
  std::vector<Op> ops_ ABSL_GUARDED_BY(mu_);  // in the order watched
  bool fired_ ABSL_GUARDED_BY(mu_) = false;
};

// Calls watchdog->Check() every `interval` on a thread of its own, until
// destroyed (or until the watchdog fired). Borrows the watchdog.
class WatchdogThread {
 public:
  WatchdogThread(Watchdog* watchdog, absl::Duration interval);
  WatchdogThread(const WatchdogThread&) = delete;
  WatchdogThread& operator=(const WatchdogThread&) = delete;
  ~WatchdogThread();

 private:
  Watchdog* const watchdog_;
  const absl::Duration interval_;
  absl::Notification stop_;
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace jitpipe

#endif  // JITPIPE_COMM_WATCHDOG_H_
