// Each stage's mean host time per call, from a measured replay timeline:
// what `jitpipe replay --json` reports as "stage_times" and what `jitpipe
// model --calibrate` fits layer times to (planning/calibrate.h).
//
// A compute span of the rank executor (stages/exec/rank_executor.cc,
// RunAction) brackets the stage call itself: LoadInput and Forward (and the
// loss read) for F, BackwardInput for I, BackwardWeight for W, Backward for
// B. It starts once the action's inputs have arrived, so no wait for a peer
// is in it; what is outside it (sends, receives, buffer allocation, the
// interpreter) is what a simulation under these times leaves out.
//
// OVERLAP_F_B spans hold two calls in one span and are not counted.
//
// Pure function; thread-compatible.
#ifndef JITPIPE_RUNTIME_STAGE_CALL_TIMES_H_
#define JITPIPE_RUNTIME_STAGE_CALL_TIMES_H_

#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"
#include "traces/timeline.h"

namespace jitpipe {

// One stage's mean time per call of each kind, in microseconds, over every
// data-parallel replica and every step counted; 0 with a count of 0 for a
// kind the program never runs.
struct StageCallTimes {
  int stage = 0;
  double forward_us = 0;
  double backward_input_us = 0;
  double backward_weight_us = 0;
  double backward_us = 0;  // B: the full backward
  int forward_calls = 0;
  int backward_input_calls = 0;
  int backward_weight_calls = 0;
  int backward_calls = 0;
};

// The stages' call times (by stage index, every stage of `lowered`) from
// `timeline`, the measured timeline of a replay of `lowered` over `steps`
// steps (RunReplay with ReplayOptions::record_timeline): a world rank w's
// compute spans are, in order, step 0's compute actions of program
// lowered.ranks[w mod pp], then step 1's, and so on. The first `skip_steps`
// steps are left out (the first step pays for first touches of memory and
// for starting the BLAS threads).
// Errors: InvalidArgument when skip_steps is not in [0, steps), or when the
// timeline does not fit the schedule (a rank out of range, a span whose
// index is not a compute action of its program, a rank whose count of
// compute spans is not `steps` times its program's).
absl::StatusOr<std::vector<StageCallTimes>> MeasureStageCallTimes(const Schedule& lowered,
                                                                  const Timeline& timeline,
                                                                  int steps, int skip_steps);

}  // namespace jitpipe

#endif  // JITPIPE_RUNTIME_STAGE_CALL_TIMES_H_
