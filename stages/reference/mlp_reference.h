// The single-process, unpipelined reference for the `mlp` stage: the same
// model and data (mlp_stage.h), trained one microbatch at a time through all
// blocks in order, and the check of a replayed step against it.
//
// The reference's gradient of a block is summed over every replica, chain
// and microbatch, which is what a replayed step's reduced gradients hold
// (summed over the chains' copies of the block for DualPipe). Both compute
// each microbatch with identical float operations (mlp_kernels.h); only the
// order of the sums differs, so they agree to float rounding.
//
// Pure functions; thread-compatible.
#ifndef JITPIPE_STAGES_REFERENCE_MLP_REFERENCE_H_
#define JITPIPE_STAGES_REFERENCE_MLP_REFERENCE_H_

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "scheduler/ir/model.h"
#include "stages/reference/mlp_stage.h"

namespace jitpipe {

struct MlpReference {
  double loss = 0;                              // mean over microbatches and replicas
  std::vector<std::vector<float>> block_grads;  // per block (stages_per_chain)
};

MlpReference RunMlpReference(const MlpOptions& options, const MlpLayout& layout);

// How far a replayed step is from the reference, as relative errors: the
// loss's |loss - ref| / |ref|; a gradient's max |g - ref| / max |ref| over
// the block's elements (the error relative to the block's largest gradient,
// so elements near zero do not blow it up).
struct MlpComparison {
  double loss = 0;
  double reference_loss = 0;
  double loss_error = 0;
  double worst_grad_error = 0;
  int worst_block = -1;
  int worst_replica = -1;

  // True when both errors are at most `tolerance`.
  bool Within(double tolerance) const {
    return loss_error <= tolerance && worst_grad_error <= tolerance;
  }
  // "loss 0.123456 (reference 0.123456, relative error 1.2e-08); worst
  // gradient error 3.4e-07 (block 2, replica 1)".
  std::string ToString() const;
};

// Compares a step's loss and the gradients the factory's stages reported at
// FinishStep with the reference. Every replica's gradients are checked;
// under kReduceScatter only the shard each replica holds. Errors:
// FailedPrecondition when a stage reported no gradients (the step did not
// run to its end).
absl::StatusOr<MlpComparison> CompareWithReference(const MlpReference& reference, double loss,
                                                   const MlpStageFactory& factory,
                                                   ReduceKind reduce);

// The same check over gradients from any source (the CUDA stage's factory,
// cuda_mlp_stage.h): `finished(stage, replica)` returns what that stage saw
// at its last FinishStep, empty if nothing. `layout` is the run's.
absl::StatusOr<MlpComparison> CompareWithReference(
    const MlpReference& reference, double loss, const MlpLayout& layout,
    absl::FunctionRef<std::vector<float>(int stage, int replica)> finished, ReduceKind reduce);

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_REFERENCE_MLP_REFERENCE_H_
