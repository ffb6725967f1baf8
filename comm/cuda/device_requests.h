// The requests of a device transport (comm/cuda, comm/nccl): each an
// operation whose completion is a CUDA event, with the rules every device
// backend shares -- Test is cudaEventQuery and forgets a completed request,
// Wait polls it until the timeout or an abort, StreamWait enqueues
// cudaStreamWaitEvent, an abort fails every pending request, and the
// watchdog (comm/watchdog.h) probes the same events. The backends decide
// when a request is issued (its done event recorded: NCCL at the post, the
// one-GPU backend once both sides of a transfer have posted).
//
// Messages, as the host backends word them (comm/inproc):
//   Wait:  DeadlineExceeded "timed out after 50ms waiting for <what>"
//   abort: Aborted "<message> (while waiting for <what>)"
//   unknown or already reported: NotFound "unknown request <id>"
//
// Thread safety: every method may be called from any thread; the probes
// and queries run under the object's lock (cudaEventQuery does not block).
#ifndef JITPIPE_COMM_CUDA_DEVICE_REQUESTS_H_
#define JITPIPE_COMM_CUDA_DEVICE_REQUESTS_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "comm/cuda/cuda_device.h"
#include "comm/transport.h"
#include "comm/watchdog.h"

namespace jitpipe {

class DeviceRequests {
 public:
  explicit DeviceRequests(absl::Duration poll_sleep) : poll_sleep_(poll_sleep) {}
  DeviceRequests(const DeviceRequests&) = delete;
  DeviceRequests& operator=(const DeviceRequests&) = delete;
  // Stops the watchdog. The events go with the pool.
  ~DeviceRequests();

  // The events every backend takes its ready and done events from.
  EventPool& events() { return events_; }

  // A new request of `rank`, described as `what` ("receive 1RECV_F3 from
  // rank 0 (index 17)"), not issued yet, with a done event of its own.
  // Watched by the watchdog once it runs. Errors: a CUDA error.
  absl::StatusOr<RequestId> New(int rank, std::string what) ABSL_LOCKS_EXCLUDED(mu_);
  // The request's done event (null once it completed without one).
  // REQUIRES: the request exists.
  cudaEvent_t done(RequestId id) const ABSL_LOCKS_EXCLUDED(mu_);
  std::string what(RequestId id) const ABSL_LOCKS_EXCLUDED(mu_);
  // Its done event is recorded: Test and StreamWait look at it from now on.
  void Issued(RequestId id) ABSL_LOCKS_EXCLUDED(mu_);
  // It completed without device work (a matching that failed the other
  // side): Test reports it done.
  void Complete(RequestId id) ABSL_LOCKS_EXCLUDED(mu_);
  // It failed: Test, Wait and StreamWait report `status`.
  void Fail(RequestId id, absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets it (a post that failed after New).
  void Drop(RequestId id) ABSL_LOCKS_EXCLUDED(mu_);

  // Transport::Test, Wait, StreamWait.
  absl::StatusOr<bool> Test(RequestId id) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Wait(RequestId id, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<bool> StreamWait(RequestId id, cudaStream_t stream) ABSL_LOCKS_EXCLUDED(mu_);

  // Fails every request that has not completed with Aborted "<message>
  // (while waiting for <what>)"; later ones fail at New with Aborted
  // "<message>". The first call wins.
  void Abort(const std::string& message) ABSL_LOCKS_EXCLUDED(mu_);
  // OK, or Aborted with the abort's message.
  absl::Status AbortStatus() const ABSL_LOCKS_EXCLUDED(mu_);

  // Starts the watchdog thread (once): `on_timeout` gets the rank and the
  // DeadlineExceeded of the oldest request pending longer than `timeout`.
  void StartWatchdog(absl::Duration timeout, absl::Duration interval, Watchdog::Handler on_timeout)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Request {
    int rank = -1;
    std::string what;
    bool issued = false;
    cudaEvent_t done = nullptr;  // null once issued: complete
    bool failed = false;
    absl::Status status;
  };

  // Done (true), pending (false) or the request's failure, without
  // forgetting it.
  absl::StatusOr<bool> Look(RequestId id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Forget(RequestId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const absl::Duration poll_sleep_;
  EventPool events_;

  mutable absl::Mutex mu_;
  RequestId last_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<RequestId, Request> requests_ ABSL_GUARDED_BY(mu_);
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  std::string abort_message_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Watchdog> watchdog_;  // set once, by StartWatchdog, before the thread
  std::unique_ptr<WatchdogThread> watchdog_thread_;
};

}  // namespace jitpipe

#endif  // JITPIPE_COMM_CUDA_DEVICE_REQUESTS_H_
