// The time-aware half of OverlapReduce (overlap_reduce.h): a local search
// that moves W actions earlier on the rank that ends the step last, so that
// a stage's gradients complete, and its reduction starts, while compute is
// still left to hide it. Needs a step-time function (a simulator); without
// one OverlapReduce skips it.
//
// A move swaps a W with the compute action before it on that rank (one that
// is neither a W of the same stage nor the W's own I), within the last
// kHoistWindow compute actions, the W taking its place right before that
// action (after the action's receives); each stage's REDUCE_GRAD then
// follows its last W or B. Each round tries every move, keeps the one with
// the smallest step if it is shorter and keeps the rank's peak within the
// limit, and stops when none is (or after kHoistRounds rounds). Sends,
// receives and every other action keep their order, so communication and
// deadlock freedom are unchanged.
//
// Internal to scheduler/passes; pure and thread-compatible.
#ifndef JITPIPE_SCHEDULER_PASSES_OVERLAP_HOIST_H_
#define JITPIPE_SCHEDULER_PASSES_OVERLAP_HOIST_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// A lowered schedule's step: its makespan and each rank's end (reductions
// included), from a simulator.
struct StepTime {
  double makespan_us = 0;
  std::vector<double> rank_end_us = {};
};
using StepTimeFunction = std::function<absl::StatusOr<StepTime>(const Schedule& schedule)>;

inline constexpr int kHoistWindow = 32;
inline constexpr int kHoistRounds = 64;
inline constexpr int kHoistDistance = 12;

// Puts `stage`'s REDUCE_GRAD (if the program has one) right after the
// stage's last W or B and the sends and receives that follow it.
void PlaceReduceAfterLastGradient(RankProgram& program, int stage);

// `peak(schedule, rank)` and `limit[rank]`: the memory check of a candidate.
// Returns the improved schedule (the input when no move helps). Errors:
// those of the two functions.
absl::StatusOr<Schedule> HoistWeightGradients(
    Schedule schedule, const StepTimeFunction& step_time,
    const std::function<absl::StatusOr<int64_t>(const Schedule&, int)>& peak,
    const std::vector<int64_t>& limit);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_OVERLAP_HOIST_H_
