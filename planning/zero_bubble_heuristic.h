// The zero-bubble repository's heuristic auto schedule on a model's stage
// costs: the orders of sail-sg/zero-bubble-pipeline-parallelism's
// scheduler/zb.py `initial_solution` (its `manual_order` under all eight
// flag combinations, the shortest longest stage span winning), built by
// scheduler/generators/zb_manual_order.h, which reimplements it. One stage
// per rank; upstream's B is jitpipe's I.
//
// Its inputs, from the model (StageTimesOf, one stage per rank): per stage
// F, I and W costs; the transfer into a stage (upstream's cost_comm, here
// per direction and stage: stage j-1's forward send, stage j+1's backward
// send); memory in bytes, an F taking the stage's activation bytes (stash +
// input), its I nothing, its W giving them back (upstream's F +1, B 0,
// W -1 in units); each rank's cap its limit minus parameters, gradients and
// optimizer state (ActivationCaps). For uniform costs the orders are
// upstream's for the same costs, comm and cap in units (tests pin them
// against orders upstream's code produced).
//
// The order is then judged exactly (schedule_eval.h), lowered with
// receives just in time and posted early, the faster that fits kept. Where
// neither fits (the exact plan also counts buffers in flight), each missing
// rank's cap drops by one microbatch's activations and upstream's search
// runs again, at most 4 times. The auto scheduler (auto_schedule.h) takes
// the result as a candidate, so it is never slower than it.
//
// Pure; thread-compatible.
#ifndef JITPIPE_PLANNING_ZERO_BUBBLE_HEURISTIC_H_
#define JITPIPE_PLANNING_ZERO_BUBBLE_HEURISTIC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planning/list_scheduler.h"
#include "planning/schedule_eval.h"
#include "scheduler/generators/zb_manual_order.h"

namespace jitpipe {

struct HeuristicResult {
  Schedule schedule;      // compute only, name "zb-heuristic"
  Evaluation evaluation;  // as lowered with evaluation.recv
  std::string flags;      // the winning combination, e.g. "B prioritised, W fills every bubble, ..."
  double upstream_span_us = 0;  // upstream's own figure: the longest stage span it predicted
  int tried = 0;          // manual_order runs (8 per cap tried)
  int caps_lowered = 0;   // times the caps dropped before the exact plan fit
};

// `model` gives pp stages (one per rank); training.device the limits.
// Errors: NotFound when no cap tried leads to a schedule within the limit;
// InvalidArgument for bad sizes; those of the evaluation.
absl::StatusOr<HeuristicResult> ZeroBubbleHeuristic(const Model& model,
                                                    const TrainingMemory& training, int pp,
                                                    int microbatches);

// Upstream's graph for stage inputs `times` (one stage per rank) and caps.
ZbGraph ZeroBubbleGraph(const StageTimes& times, const std::vector<int64_t>& caps);

// Each rank's activation cap: its limit minus its parameters, gradients and
// optimizer state under `model` (0 when that leaves nothing; no cap when
// the rank has no limit). REQUIRES: stage_to_rank covers the model's stages.
std::vector<int64_t> ActivationCaps(const Model& model, const TrainingMemory& training,
                                    const std::vector<int>& stage_to_rank, int pp);

}  // namespace jitpipe

#endif  // JITPIPE_PLANNING_ZERO_BUBBLE_HEURISTIC_H_
