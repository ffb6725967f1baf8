// The zero-bubble repository's heuristic scheduler for one stage per rank,
// with its costs, communication and memory model as inputs: the algorithm of
// sail-sg/zero-bubble-pipeline-parallelism @ 39f2c186,
// megatron/core/pipeline_parallel/zerobubble/scheduler/zb.py,
// `Graph.manual_order` and `initial_solution` (reimplemented from reading
// it; no code carried over). ZB-H1/ZB-H2 (zero_bubble_h.h) are its unit-cost
// runs; the planner's heuristic (planning/zero_bubble_heuristic.h) runs it on
// a model's stage costs.
//
// Upstream's names: B is jitpipe's I (input gradient), stage j is rank j.
// One run walks microbatches in order. Microbatch 0: its F on every stage,
// then per stage as many extra forwards as fit (memory) before its B comes
// back (with allow_bubble_before_first_b an F may not end after that, else
// it may not start at or after it), each stage at most as many as the one
// before, then its B from the last stage to the first. Microbatch i >= 1:
// each stage starts one more F unless, with prioritize_b, it is two ahead of
// the next stage and the F would delay that stage's F + B beyond the
// stage's bubble slack; a stage starts one only if every later stage does;
// before each F and each B, pending W go first while memory would exceed
// the cap, and while they end before the action's input arrives (one more
// that would end after it only when the wait exceeds the stage's slack
// against the worst stage's idle time, or always with no_bubble_greedy);
// stage 0, done with forwards, clears its W before each B. The rest of the W
// close each stage. Every placement is timed at once (each action ends at
// max(stage free, input end + transfer) + cost).
//
// The result per stage is its actions sorted by end time, ties in
// (F, B, W) then microbatch order, as upstream's create_scheduled_nodes
// sorts them. `initial_solution` runs the eight flag combinations (allow
// bubble, prioritise B, greedy; true before false, in that nesting) and
// keeps the first with the smallest longest stage span (first F's start to
// last W's end).
//
// One deliberate difference: upstream raises (and so produces nothing) when
// any combination cannot fit its memory; here that combination is skipped
// and counted, and only when all eight fail is it an error.
//
// Pure; thread-compatible. Cost: O(pp x m) per combination, x 8.
#ifndef JITPIPE_SCHEDULER_GENERATORS_ZB_MANUAL_ORDER_H_
#define JITPIPE_SCHEDULER_GENERATORS_ZB_MANUAL_ORDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// Per stage (index j, one per rank), sizes pp.
struct ZbGraph {
  std::vector<double> f, b, w;  // costs of F, B (= I) and W
  // Transfer into stage j: of stage j-1's F output (forward_in[0] unused),
  // and of stage j+1's B output (backward_in[pp-1] unused). Upstream has one
  // cost_comm for both; equal values reproduce it exactly.
  std::vector<double> forward_in, backward_in;
  // Memory taken by F, B and W (any unit: upstream's units or bytes), and
  // each stage's cap.
  std::vector<int64_t> mem_f, mem_b, mem_w, max_mem;
};

struct ZbFlags {
  bool allow_bubble_before_first_b = false;
  bool prioritize_b = false;
  bool no_bubble_greedy = true;
};

struct ZbOrder {
  ZbFlags flags;
  double best_time = 0;  // the longest stage span
  int skipped = 0;       // combinations that could not fit (initial solution only)
  // Per stage: its actions (kForward / kBackwardInput / kBackwardWeight of
  // stage j) in execution order; Schedule::ranks of a one-stage-per-rank loop.
  std::vector<RankProgram> stages;
};

// "prioritise B, greedy, bubble before the first B" and the like.
std::string ZbFlagsName(const ZbFlags& flags);

// One run of `manual_order`. Errors: InvalidArgument for pp or m < 1 or a
// graph not sized pp; ResourceExhausted when a stage cannot make room under
// its cap (upstream's "Cannot fit memory").
absl::StatusOr<ZbOrder> ZbManualOrder(const ZbGraph& graph, int pp, int microbatches,
                                      const ZbFlags& flags);

// `initial_solution`: the best of the eight combinations. Errors: those of
// ZbManualOrder, ResourceExhausted only when every combination fails.
absl::StatusOr<ZbOrder> ZbInitialSolution(const ZbGraph& graph, int pp, int microbatches);

// The graph of uniform costs: every stage F, B, W, one comm both ways,
// memory F +1, B 0, W -1 and a cap of `max_mem` units.
ZbGraph UniformZbGraph(int pp, double f, double b, double w, double comm, int64_t max_mem);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_GENERATORS_ZB_MANUAL_ORDER_H_
