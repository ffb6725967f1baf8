// Every built-in schedule side by side under a version 1 model (per-stage
// costs), as `jitpipe compare` reports it for such a model. (A version 2
// model, with layers, is compared by compare.h, every row doing the same
// work.)
//
// Each schedule of AllGenerators() is generated for (pp, m, v) (v 0: the
// schedule's default), lowered with REDUCE_GRAD (and the overlap pass when
// asked) and simulated (stages/predict/predict.h); its memory is planned
// under jit (peak and arena) and eager (peak), the worst rank of each.
// "work" is a rank's stage-microbatch pairs: the model's costs are per
// stage, so rows with different work do different amounts of compute.
// Rows are sorted by makespan (ties by name); schedules that refuse the
// parameters are kept with the generator's reason.
//
// Pure; thread-compatible.
#ifndef JITPIPE_PLANNING_COMPARE_PER_STAGE_H_
#define JITPIPE_PLANNING_COMPARE_PER_STAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/ir/model.h"
#include "stages/predict/simulator.h"

namespace jitpipe {

struct PerStageRow {
  std::string schedule;
  int stages_per_rank = 0;
  int64_t work = 0;  // stage-microbatch pairs per rank
  SimulationResult simulation = {};
  int64_t simulated_peak = 0;  // at simulated time, jit, the worst rank
  int64_t jit_peak = 0;        // the jit plan's, program order
  int64_t eager_peak = 0;
  int64_t arena = 0;
};

struct PerStageSkipped {
  std::string schedule;
  std::string reason;  // the generator's or the evaluation's message
};

struct PerStageComparison {
  std::vector<PerStageRow> rows;          // by makespan, then name
  std::vector<PerStageSkipped> skipped;   // in generator order
};

// Errors: InvalidArgument for pp or microbatches < 1 or v < 0; a
// schedule's own failure is a skipped row, not an error.
absl::StatusOr<PerStageComparison> ComparePerStage(const Model& model, int pp, int microbatches,
                                                   int stages_per_rank, bool overlap);

}  // namespace jitpipe

#endif  // JITPIPE_PLANNING_COMPARE_PER_STAGE_H_
