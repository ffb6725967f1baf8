// A step of the one-GPU backend captured once as a CUDA graph and replayed:
// with arena buffers every address is fixed, so the work that the ranks
// enqueue for a step (stage kernels, device-to-device transfers, reductions,
// the step-end copies) is the same every step and can be launched as one
// graph, which removes the host's per-step cost of issuing it.
//
// Capture: BeginStepCapture makes a stream of its own, begins a capture
// there in relaxed mode (the rank threads, or one thread for all of them,
// enqueue while it lasts) and forks every stream of `streams` from it (each
// waits for an event recorded at the start, which makes it part of the
// capture). The caller then runs one step whose end tests and waits for
// nothing (RankExecutor::SetCapturing). EndCapture joins every stream back
// (an event recorded on each, waited for by the capture stream), ends the
// capture and instantiates the graph. Launch runs it on the capture stream
// and, with wait, returns once it has completed.
//
// Errors: a CUDA error, naming the call, file and line (cuda_error.h); a
// step that used a stream outside `streams` without joining it back makes
// EndCapture fail (cudaErrorStreamCaptureUnjoined); a host synchronisation
// or event query of captured work during the capture fails that call
// (cudaErrorStreamCaptureUnsupported or cudaErrorCapturedEvent) and
// invalidates the capture. After a failure the object may only be
// destroyed.
//
// This header includes no CUDA header. Thread safety: one thread calls
// Begin/End/Launch; the capture itself accepts work from any thread.
#ifndef JITPIPE_COMM_CUDA_STEP_GRAPH_H_
#define JITPIPE_COMM_CUDA_STEP_GRAPH_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jitpipe {

class StepGraph {
 public:
  virtual ~StepGraph() = default;
  // Ends the capture and instantiates. REQUIRES: once, after Begin.
  virtual absl::Status EndCapture() = 0;
  // Launches the instantiated graph; `wait`: and waits for it.
  // REQUIRES: EndCapture succeeded.
  virtual absl::Status Launch(bool wait) = 0;
  // Graph nodes captured (0 before EndCapture).
  virtual size_t nodes() const = 0;
};

// Begins a capture on device `device` forking into `streams`
// (cudaStream_t, borrowed: they must outlive the graph). Errors: Unavailable
// in a build without CUDA; a CUDA error.
absl::StatusOr<std::unique_ptr<StepGraph>> BeginStepCapture(int device,
                                                            const std::vector<void*>& streams);

}  // namespace jitpipe

#endif  // JITPIPE_COMM_CUDA_STEP_GRAPH_H_
