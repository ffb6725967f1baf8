// For the reference mlp (stages/reference/mlp_stage.h) over a world that spans
// processes: each process's stages saw their own gradients; this gathers
// them at world rank 0 so that CompareWithReference there checks the whole
// world.
#ifndef JITPIPE_STAGES_REFERENCE_MLP_GRADIENTS_H_
#define JITPIPE_STAGES_REFERENCE_MLP_GRADIENTS_H_

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/world.h"
#include "scheduler/ir/schedule.h"
#include "stages/reference/mlp_stage.h"

namespace jitpipe {

// Gathers at world rank 0 the gradients the local ranks' stages saw at their
// last FinishStep and records those of the other processes in rank 0's
// `factory`, through Make(stage, replica)->FinishStep, as if those stages had
// run there. Every process calls it after RunReplay succeeded, with the
// factory it ran. The bytes go as they are: the hosts
// of a job share their float format, as the activations sent between them
// already assume. A world whose ranks are all local has nothing to gather.
// Errors: the gather's (DeadlineExceeded, Aborted); at rank 0 a stage's
// FinishStep's (InvalidArgument for a gradient of the wrong size).
absl::Status GatherMlpGradients(const Schedule& schedule, MlpStageFactory& factory, World& world,
                                absl::Duration timeout);

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_REFERENCE_MLP_GRADIENTS_H_
