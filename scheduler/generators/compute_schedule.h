// Helpers every generator uses: the header of a generated compute-only
// schedule and the parameter checks whose messages must read alike across
// generators.
#ifndef JITPIPE_SCHEDULER_GENERATORS_COMPUTE_SCHEDULE_H_
#define JITPIPE_SCHEDULER_GENERATORS_COMPUTE_SCHEDULE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// A schedule with every header field set for a generator's output: `name`,
// pp, stages_per_rank, microbatches, chains = 1, `placement`, stage_to_rank =
// StageToRank(placement, pp, stages_per_rank), lowered = false, and `pp`
// empty programs for the generator to fill.
// REQUIRES: pp >= 1, stages_per_rank >= 1, microbatches >= 1,
//           placement is kLoop or kV.
Schedule NewComputeSchedule(absl::string_view name, Placement placement, int pp,
                            int stages_per_rank, int microbatches);

// OK when `stages_per_rank == required`, else InvalidArgument:
//   "zbv: needs exactly 2 stages per rank, got 4"
absl::Status RequireStagesPerRank(absl::string_view name, int required, int stages_per_rank);

// "1 rank", "4 ranks": a count with its noun, for messages.
std::string CountOf(int n, absl::string_view singular, absl::string_view plural);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_GENERATORS_COMPUTE_SCHEDULE_H_
