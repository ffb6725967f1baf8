// The reference `cost` stage: spends the model file's times and moves its
// byte sizes, for timing checks of the runtime against the simulator.
//
// Each call busy-waits (wall clock) for the part's time from the Model: F
// forward_us, I backward_input_us, W backward_weight_us, B backward_us. The
// parts of an OVERLAP_F_B share the compound's time (Model::ComputeUs: its
// overlap_f_b_us when given), split in proportion to their own times, so a
// compound costs what the simulator charges for it.
//
// Buffers have the Model's sizes (Sizes(): input, output and stash bytes,
// param_grad = Model::GradBytes). Filling them costs nothing worth timing:
// a 12-byte stamp (stage, microbatch, direction) at the start of every
// output, input gradient and loaded input, checked where it is consumed, so
// a transfer delivered to the wrong buffer fails the step with DataLoss
// ("cost stage 3: microbatch 1's input holds stage 1 microbatch 2's forward
// data"). Buffers shorter than the stamp are neither stamped nor checked.
//
// Thread safety: a stage is used by one thread; the factory is thread-safe.
#ifndef JITPIPE_STAGES_REFERENCE_COST_STAGE_H_
#define JITPIPE_STAGES_REFERENCE_COST_STAGE_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/ir/model.h"
#include "scheduler/ir/schedule.h"
#include "stages/exec/stage.h"

namespace jitpipe {

class CostStageFactory final : public StageFactory {
 public:
  // `schedule` tells which parts run inside an OVERLAP_F_B; both are copied
  // as needed. REQUIRES: the model fits the schedule (CheckModelFits).
  CostStageFactory(const Schedule& schedule, const Model& model);

  // Errors: InvalidArgument for a stage outside the schedule.
  absl::StatusOr<std::unique_ptr<Stage>> Make(int stage, int replica) override;

  // The time the stage spends on one part (F, I, W or B of a microbatch):
  // the model's, or its share of an OVERLAP_F_B. REQUIRES: stage and
  // microbatch in range, kind a compute part.
  double PartTimeUs(int stage, ActionKind kind, int microbatch) const;

 private:
  int num_stages_ = 0;
  int microbatches_ = 0;  // per chain
  int stages_per_chain_ = 1;
  std::vector<StageCost> costs_;      // per stage
  std::vector<int64_t> grad_bytes_;   // per stage
  // Per stage: the time of each (kind, microbatch) part that runs inside an
  // OVERLAP_F_B, index kind * microbatches + mb over F, I, W, B; -1 where
  // the part's own time applies.
  std::vector<std::vector<double>> compound_us_;
};

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_REFERENCE_COST_STAGE_H_
