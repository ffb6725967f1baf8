// The balanced partition: the cut of a layered model into a schedule's
// stages with the smallest simulated step (stages/predict.h), the embedding
// on the first stage and the loss on the last.
//
// Search, deterministic for the same inputs:
//   1. two starting cuts: the even one (partition.h), and the one that
//      minimises the largest stage compute (F + I + W summed over its layers;
//      dynamic programming over contiguous cuts, as pipeline partitioners
//      do), each simulated;
//   2. from the better, steepest descent: every move of one boundary by one
//      layer is simulated, the best strictly better one is taken, until none
//      is better, max_evaluations simulations have run, or time_budget has
//      passed (the only input that makes the result depend on the machine).
//      A step's neighbours are simulated on up to `threads` threads
//      (base/parallel_for.h); the result does not depend on how many.
// The result is never slower than the even cut under the simulator.
//
// Pure but for reading the clock; thread-compatible. Cost: max_evaluations
// simulations at most, and one step's neighbours past time_budget (the
// budget is read between steps).
#ifndef JITPIPE_PLANNING_BALANCE_H_
#define JITPIPE_PLANNING_BALANCE_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "planning/partition.h"
#include "scheduler/ir/layered_model.h"
#include "scheduler/ir/schedule.h"
#include "stages/predict/predict.h"

namespace jitpipe {

struct BalanceOptions {
  int max_evaluations = 200;
  PredictOptions predict = {};  // how each candidate is simulated (e.g. the overlap pass)
  absl::Duration time_budget = absl::InfiniteDuration();
  int threads = 1;  // for a step's neighbours; <= 0: one per hardware thread
};

struct BalancedPartition {
  Partition partition = {};
  double makespan_us = 0;
  double even_makespan_us = 0;  // the even cut's, for comparison
  int evaluations = 0;          // simulations run
  bool budget_ended = false;    // time_budget stopped the descent early
};

// Balances `model` over `schedule`'s stages (its chains each cut the same
// way). Errors: InvalidArgument for max_evaluations < 1; those of
// StageModel and Predict for the schedule.
absl::StatusOr<BalancedPartition> BalancePartition(const LayeredModel& model,
                                                   const Schedule& schedule,
                                                   const BalanceOptions& options = {});

}  // namespace jitpipe

#endif  // JITPIPE_PLANNING_BALANCE_H_
