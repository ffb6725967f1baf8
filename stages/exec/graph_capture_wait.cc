// GraphCaptureWait (wait_strategy.h): a device step being captured into a
// CUDA graph (comm/cuda/step_graph.h; RankExecutor::SetCapturing). The step
// enqueues exactly as StreamOrderedWait has it enqueue; its end may not
// test or wait for anything on the host (an event query or a host wait is
// illegal in a capture), so it posts no marker and reads no loss: what the
// host would test is taken as done, the graph's launch completes it.
#include "base/status_macros.h"
#include "stages/exec/wait_strategy.h"

namespace jitpipe {

absl::StatusOr<bool> RankExecutor::GraphCaptureWait::EndStep() {
  // Sent buffers are reported complete to the provider, which orders their
  // reuse on the device (it ReleasesAfterRequests: SetCapturing checks).
  for (const PendingSend& send : x_.pending_sends_) x_.ReleaseSent(send);
  x_.pending_sends_.clear();
  for (int32_t slot : x_.pending_recvs_) x_.recv_state_[slot] = RecvState::kDone;
  x_.pending_recvs_.clear();
  reductions_.clear();
  loss_reads_.clear();
  x_.result_.compute_end_us = x_.NowUs();
  RETURN_IF_ERROR(x_.FinishStep());
  return true;
}

}  // namespace jitpipe
