// The zero-bubble repository's heuristic auto schedule, reimplemented from
// its published description (Qi et al., "Zero Bubble Pipeline Parallelism",
// ICLR 2024, and the repository's scheduler/zb.py as summarised in
// ../shared/reference/other_schedulers.md §3; no code carried over): one
// stage per rank, backward split into B (I here) and W, W kept in a pending
// queue and inserted when the next F or B would wait on a neighbour or when
// memory is at the limit; tried under 2 x 2 x 2 flag combinations (a bubble
// allowed before the first B, i.e. 1F1B's warm-up depth; B prioritised over
// F; bubbles filled with W greedily, or only where the W fits), keeping the
// fastest that fits. The auto scheduler must never do worse than it
// (auto_schedule.h); bench/auto_schedule_bench.cc checks that.
//
// Pure; thread-compatible.
#ifndef JITPIPE_PLANNING_ZERO_BUBBLE_HEURISTIC_H_
#define JITPIPE_PLANNING_ZERO_BUBBLE_HEURISTIC_H_

#include <string>

#include "absl/status/statusor.h"
#include "planning/list_scheduler.h"
#include "planning/schedule_eval.h"

namespace jitpipe {

struct HeuristicResult {
  Schedule schedule;
  Evaluation evaluation;
  std::string flags;  // e.g. "prioritise B, fill greedily, no bubble before the first B"
  int tried = 0;      // schedules built and judged
};

// `model` gives pp stages (one per rank); training.device the limits.
// Memory cap of the heuristic itself: each rank's limit minus its
// parameters, gradients and optimizer state, lowered by one microbatch's
// activations at a time (at most 4 times) while the exact plan misses.
// Errors: NotFound when no combination fits; InvalidArgument for bad sizes.
absl::StatusOr<HeuristicResult> ZeroBubbleHeuristic(const Model& model,
                                                    const TrainingMemory& training, int pp,
                                                    int microbatches);

// The list-scheduler parameters of one combination (bit 0: bubble before the
// first B, bit 1: prioritise B, bit 2: fill greedily), and its description.
ListScheduleParams ZeroBubbleFlags(int combination, int pp, int microbatches);
std::string ZeroBubbleFlagsName(int combination);

// Each rank's activation cap: its limit minus its parameters, gradients and
// optimizer state under `model` (0 when that leaves nothing; no cap when
// the rank has no limit). REQUIRES: stage_to_rank covers the model's stages.
std::vector<int64_t> ActivationCaps(const Model& model, const TrainingMemory& training,
                                    const std::vector<int>& stage_to_rank, int pp);

}  // namespace jitpipe

#endif  // JITPIPE_PLANNING_ZERO_BUBBLE_HEURISTIC_H_
