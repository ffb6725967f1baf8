// The results half of the replay driver (replay.h, "Results"): the ranks'
// outcomes merged into a ReplayResult. World rank 0 merges every world
// rank's outcome; a process without rank 0 merges its own ranks' the same
// way, so both read one aggregation:
//   per step   loss      the sum over the ranks given
//              step_us   the earliest start to the latest end
//              exposed   the longest a rank waited for reductions
//   per run    exposed_reduce_us: the median over steps of the above
//   per rank   a RankReplay (its median exposed reduction), its timeline
//
// Pure functions; thread-compatible.
#ifndef JITPIPE_RUNTIME_REPLAY_MERGE_H_
#define JITPIPE_RUNTIME_REPLAY_MERGE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "memory/memory_plan.h"
#include "runtime/rank_report.h"
#include "runtime/replay.h"
#include "stages/exec/rank_executable.h"

namespace jitpipe {

// One rank's outcome to merge. Borrowed: outlives the merge.
struct RankOutcomeOf {
  int world_rank = 0;
  const RankOutcome* outcome = nullptr;
};

// What the merge reads besides the outcomes. Borrowed: outlives the merge.
struct MergeInputs {
  int pp = 1;
  int steps = 1;                            // ReplayOptions::steps
  absl::Span<const RankMemoryPlan> plans;  // by pipeline rank
  const Executable* executable = nullptr;   // for the timeline's transfer table
  bool record_timeline = true;
  int64_t peak_in_flight_bytes = 0;         // World::PeakInFlightBytes
};

// The outcomes of `ranks` (in the order given: ReplayResult::ranks follows
// it) as one ReplayResult. Errors: Internal when an outcome does not hold
// in.steps steps (naming the world rank); InvalidArgument when `ranks` is
// empty.
absl::StatusOr<ReplayResult> MergeOutcomes(absl::Span<const RankOutcomeOf> ranks,
                                           const MergeInputs& in);

// The median of `values` (the mean of the middle two for an even count);
// 0 when empty.
double MedianOf(std::vector<double> values);

}  // namespace jitpipe

#endif  // JITPIPE_RUNTIME_REPLAY_MERGE_H_
