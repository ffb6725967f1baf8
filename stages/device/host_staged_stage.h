// A host Stage on a device rank: every call copies the device buffers it
// reads to host memory once the compute stream's work so far is done, runs
// the host stage (the reference mlp, the cost stage) in the host's
// synchronous context, and copies what it wrote back before it returns.
// It lets the CPU reference stages check the device backends' transfers,
// reductions and buffers end to end where no device stage exists, and
// nothing more: it synchronises the host with the compute stream at every
// call (so its times say nothing about a device stage's), and a step of it
// cannot be captured as a CUDA graph (a synchronisation during capture is
// FailedPrecondition, from cuda_error.h).
//
// Roles read / written per call (stage.h): LoadInput -/input; Forward
// input/output,stash; BackwardInput output_grad,stash/stash,input_grad;
// BackwardWeight input,output_grad,stash,param_grad/param_grad; Backward
// all/stash,input_grad,param_grad; FinishStep param_grad/-.
//
// Thread safety: as the wrapped stage's; the factory as the wrapped one's.
#ifndef JITPIPE_STAGES_DEVICE_HOST_STAGED_STAGE_H_
#define JITPIPE_STAGES_DEVICE_HOST_STAGED_STAGE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "stages/exec/stage.h"

namespace jitpipe {

// Makes `inner`'s stages (borrowed: `inner` must outlive the factory and
// its stages) and wraps each. In a build without CUDA, Make fails with
// Unavailable.
class HostStagedFactory final : public StageFactory {
 public:
  explicit HostStagedFactory(StageFactory* inner) : inner_(inner) {}
  absl::StatusOr<std::unique_ptr<Stage>> Make(int stage, int replica) override;

 private:
  StageFactory* const inner_;
};

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_DEVICE_HOST_STAGED_STAGE_H_
