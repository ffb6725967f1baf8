// StepGraph (step_graph.h) over the CUDA runtime.
#include "comm/cuda/step_graph.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "base/status_macros.h"
#include "comm/cuda/cuda_device.h"
#include "comm/cuda/cuda_error.h"

namespace jitpipe {
namespace {

class CudaStepGraph final : public StepGraph {
 public:
  CudaStepGraph(int device, std::vector<cudaStream_t> streams)
      : device_(device), streams_(std::move(streams)) {}
  ~CudaStepGraph() override {
    if (capturing_) {  // a failed step: end the capture, drop what it made
      cudaGraph_t partial = nullptr;
      (void)cudaStreamEndCapture(origin_, &partial);
      if (partial != nullptr) (void)cudaGraphDestroy(partial);
    }
    if (exec_ != nullptr) {
      (void)cudaStreamSynchronize(origin_);
      (void)cudaGraphExecDestroy(exec_);
    }
    if (graph_ != nullptr) (void)cudaGraphDestroy(graph_);
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
    if (origin_ != nullptr) (void)cudaStreamDestroy(origin_);
  }

  absl::Status Begin() {
    RETURN_IF_ERROR(UseDevice(device_));
    CUDA_CALL(cudaStreamCreateWithFlags(&origin_, cudaStreamNonBlocking));
    ASSIGN_OR_RETURN(cudaEvent_t fork, NewEvent());
    CUDA_CALL(cudaStreamBeginCapture(origin_, cudaStreamCaptureModeRelaxed));
    capturing_ = true;
    CUDA_CALL(cudaEventRecord(fork, origin_));
    for (cudaStream_t s : streams_) CUDA_CALL(cudaStreamWaitEvent(s, fork, 0));
    return absl::OkStatus();
  }

  absl::Status EndCapture() override {
    RETURN_IF_ERROR(UseDevice(device_));
    for (cudaStream_t s : streams_) {
      ASSIGN_OR_RETURN(cudaEvent_t join, NewEvent());
      CUDA_CALL(cudaEventRecord(join, s));
      CUDA_CALL(cudaStreamWaitEvent(origin_, join, 0));
    }
    capturing_ = false;
    CUDA_CALL(cudaStreamEndCapture(origin_, &graph_));
    CUDA_CALL(cudaGraphGetNodes(graph_, nullptr, &nodes_));
    CUDA_CALL(cudaGraphInstantiate(&exec_, graph_, 0));
    return absl::OkStatus();
  }

  absl::Status Launch(bool wait) override {
    if (exec_ == nullptr) return absl::FailedPreconditionError("no captured step to launch");
    CUDA_CALL(cudaGraphLaunch(exec_, origin_));
    if (wait) CUDA_CALL(cudaStreamSynchronize(origin_));
    return absl::OkStatus();
  }

  size_t nodes() const override { return nodes_; }

 private:
  absl::StatusOr<cudaEvent_t> NewEvent() {
    cudaEvent_t e = nullptr;
    CUDA_CALL(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    events_.push_back(e);
    return e;
  }

  const int device_;
  const std::vector<cudaStream_t> streams_;
  cudaStream_t origin_ = nullptr;
  std::vector<cudaEvent_t> events_;
  bool capturing_ = false;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  size_t nodes_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StepGraph>> BeginStepCapture(int device,
                                                            const std::vector<void*>& streams) {
  std::vector<cudaStream_t> owned;
  for (void* s : streams) owned.push_back(static_cast<cudaStream_t>(s));
  auto graph = std::make_unique<CudaStepGraph>(device, std::move(owned));
  RETURN_IF_ERROR(graph->Begin());
  return std::unique_ptr<StepGraph>(std::move(graph));
}

}  // namespace jitpipe
