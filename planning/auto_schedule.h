// The auto scheduler: the compute order with the smallest simulated step
// whose memory, all of it (rank_memory.h), fits every rank's limit.
//
// The cut of a version 2 model's layers into stages is searched with the
// order (AutoScheduleOptions::partition): balanced by default, every
// built-in on its own balanced cut, as `compare --partition balanced` cuts
// its rows, and each placement's list and heuristic candidates on the cut
// of that placement's fastest built-in; a given layout is honoured (only
// placements with its stage count are searched); `even` cuts evenly.
//
// Candidates, judged exactly (schedule_eval.h: lowered with REDUCE_GRAD,
// planned, simulated), in a fixed order:
//   1. every built-in schedule at each searched v, its stages cut as above
//      (a version 2 model; a version 1 model searches v = 1 only, its
//      stages as given);
//   2. the zero-bubble heuristic (zero_bubble_heuristic.h; v = 1), lowered
//      with receives both early and just in time;
//   3. the list scheduler (list_scheduler.h) over placements (one stage per
//      rank; two per rank in a V and in a loop) x I/W split or full B x
//      depth- or breadth-first x 1F1B's warm-up depth or as deep as memory
//      allows x W filling every idle slot or only slots it fits, each built
//      under each rank's activation cap (its limit minus parameters,
//      gradients and optimizer state), lowered by one microbatch's
//      activations while the exact plan misses (at most 3 times);
//   4. the best three that fit, lowered again with receives posted early
//      and with each receive k computes ahead (recv_offsets.h).
// Built-ins and list candidates are judged under all three receive
// placements when transfers take time (just in time, early, k ahead per
// receive with the smallest k that hides its transfer within the rank's
// memory), under just in time otherwise; the fastest that fits wins.
// A schedule already judged (the same programs) is not judged again. The
// result is the fastest that fits, ties to the earlier; never slower than
// the best built-in that fits, nor than the zero-bubble heuristic, both
// being candidates. The time budget ends the search once a schedule fits;
// the result is deterministic for the same inputs unless it did
// (AutoScheduleResult::budget_exhausted says so).
//
// Lower bound of a placement (compute only, reductions excluded):
//   max( max over ranks r of (earliest start of r's first stage + r's busy
//        time), one microbatch's critical path: every F, transfer and I
//        down the chain and back, then stage 0's W ).
//
// Pure; thread-compatible.
#ifndef JITPIPE_PLANNING_AUTO_SCHEDULE_H_
#define JITPIPE_PLANNING_AUTO_SCHEDULE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "planning/list_scheduler.h"
#include "planning/model_for_schedule.h"
#include "planning/schedule_eval.h"
#include "scheduler/ir/model_file.h"

namespace jitpipe {

struct AutoScheduleOptions {
  int pp = 0;
  int microbatches = 0;
  std::optional<int64_t> memory_limit = {};  // every rank; unset: the model's device limits
  MemoryReserve reserve = {};  // kept back from every limit (layered_model.h)
  std::vector<int> stages_per_rank = {1, 2};  // a version 1 model: 1 only
  absl::Duration time_budget = absl::Seconds(10);
  // How a version 2 model's layers are cut (the predict options and the
  // recorded-layout switch are not used; half the time budget at most goes
  // to balancing the built-ins' cuts).
  PartitionChoice partition = {.method = PartitionMethod::kBalanced};
};

struct AutoScheduleResult {
  // The program judged, name "auto": lowered as it was judged (REDUCE_GRAD
  // on, receives as evaluation.recv), with the cut and the model's
  // fingerprint recorded (Schedule::layout, ::model_fingerprint), so that
  // `simulate` of it under the same model gives evaluation.makespan_us.
  Schedule schedule;
  Schedule compute_only;       // the same order before lowering
  Evaluation evaluation = {};  // its memory, makespan and receive placement
  // How many of its receives stand how many computes ahead of their
  // consumers, e.g. "k=0: 40, k=1: 6" (RecvOffsets::Histogram of RecvLeads).
  std::string recv_leads;
  std::string description;    // what it is: "list schedule, V placement, ..." or "built-in zbv"
  std::string layout;         // version 2: the cut, one chain
  std::string cut_method;     // version 2: "balanced", "even" or "layout"

  double lower_bound_us = 0;       // of its placement
  int lower_bound_rank = -1;       // the rank that sets it; -1: the critical path does
  double best_lower_bound_us = 0;  // the smallest over the placements searched

  std::string best_builtin;                // "" when none fits
  double best_builtin_us = 0;
  std::optional<double> heuristic_us;      // the zero-bubble heuristic's, when it ran and fit
  double unconstrained_us = 0;  // the fastest candidate found when ignoring the limit

  int judged = 0;           // candidates judged exactly
  bool budget_exhausted = false;
  absl::Duration elapsed;

  // Several lines: what was chosen, its step against the lower bound, the
  // binding constraint, the best built-in and the heuristic, the search.
  std::string Explain() const;
};

// Errors: InvalidArgument for pp or microbatches < 1, a v other than 1 or
// 2, no limit (neither memory_limit nor a device limit in the model), a
// limit <= 0, a layout or balanced partition asked of a version 1 model, a
// layout no searched placement has the stages of; NotFound when no candidate fits (naming the lightest rank's
// need); those of partitioning the model.
absl::StatusOr<AutoScheduleResult> AutoSchedule(const ModelFile& model,
                                                const AutoScheduleOptions& options);

// The lower bound above for a placement. `binding_rank` (optional) gets the
// rank whose start + busy time sets it, or -1.
double PipelineLowerBound(const StageTimes& times, const std::vector<int>& stage_to_rank, int pp,
                          int microbatches, int* binding_rank = nullptr);

}  // namespace jitpipe

#endif  // JITPIPE_PLANNING_AUTO_SCHEDULE_H_
