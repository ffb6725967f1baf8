// The memory planner: for each rank of a lowered schedule, every buffer with
// its lifetime (buffer_lifetimes.h), the peak live bytes and where it occurs,
// the liveness lower bound, and a static arena with an offset for every
// buffer (arena.h), so that an executor can run a step without allocating.
//
//   lowered Schedule + Model
//     -> ComputeBufferLifetimes (policy: jit | eager, prefetch)
//     -> LiveBytes / NeededBytes -> peak, lower bound
//     -> ChooseBestArena(greedy-by-start, greedy-by-size, greedy-by-duration)
//        -> offsets
//
// The arena is the smallest of XLA's two orderings (decreasing size,
// decreasing duration, each refined by squeaky-wheel rounds; arena.h), tried
// after a best-fit replay in start order: that one is a single sweep and
// usually reaches the peak already, which no layout can beat, and then the
// other two are skipped. They are skipped too when it comes within
// PlanOptions::arena_slack of the peak: they cost a hundred to a thousand
// times the sweep on a large rank, for at most that much.
//
// When every RECV stands right before its consumer and every SEND right
// after its producer, the jit peak equals the lower bound. A RECV posted
// earlier (a lowering that must stay deadlock-free under rendezvous
// semantics posts some before a SEND) holds its buffer, and possibly a sent
// output, for longer: the peak then shows the price. Eager's peak is never
// below jit's, because every eager interval contains the jit one.
//
// Plans are values; every function here is pure and thread-compatible, and
// PlanMemory plans ranks on several threads.
#ifndef JITPIPE_MEMORY_MEMORY_PLAN_H_
#define JITPIPE_MEMORY_MEMORY_PLAN_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "memory/arena.h"
#include "memory/buffer_lifetimes.h"
#include "memory/liveness.h"
#include "memory/send_completion.h"
#include "scheduler/analysis/program_index.h"
#include "scheduler/ir/model.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

struct PlanOptions {
  MemoryPolicy policy = MemoryPolicy::kJit;
  int prefetch = 0;  // kJit only: see LifetimeOptions::prefetch
  SendRelease send_release = SendRelease::kOnCompletion;  // kJit only: ditto
  // When the transport completes a send (send_completion.h): kPost plans a
  // sent buffer free after its SEND, kReceive holds it to the first action
  // after the peer's RECV (an upper bound for a rendezvous transport).
  SendCompletionModel send_completion = SendCompletionModel::kPost;
  int64_t alignment = kDefaultArenaAlignment;
  bool arena = true;  // false: lifetimes, peak and lower bound only (cheaper)
  // The arena search stops at the first layout whose bytes are at most
  // peak * (1 + arena_slack); 0 searches until no ordering is left or one
  // reaches the peak. The default trades at most 1/256 of the peak (0.4%)
  // for skipping the ordered passes where the start-order sweep is that close.
  double arena_slack = kDefaultArenaSlack;
};

// Errors: InvalidArgument for a negative prefetch, a prefetch with the eager
// policy ("--prefetch applies to the jit policy only"), an alignment that
// is not a power of two, or an arena slack that is negative or not finite.
absl::Status ValidatePlanOptions(const PlanOptions& options);

struct RankMemoryPlan {
  int rank = 0;
  PlanOptions options;
  RankBuffers buffers;             // alloc/free events: MemoryEvents(buffers)
  Peak peak;                       // live bytes under the policy
  // The peak had every send completed when posted (SendCompletionModel
  // kPost): `peak` itself under kPost, at most `peak` under kReceive.
  Peak post_peak;
  std::string peak_action;         // the action at peak.index; "" when none
  std::vector<int> peak_buffers;   // ids of the buffers live at the peak
  Peak lower_bound;                // of NeededBytes(buffers)
  ArenaLayout arena;               // empty unless options.arena

  // arena bytes - peak bytes (XLA's fragmentation_size), and its share of
  // the arena (0 for an empty arena).
  int64_t fragmentation_bytes() const { return arena.arena_bytes - peak.bytes; }
  double fragmentation_ratio() const;

  // A summary line, the buffers live at the peak, and one line per buffer
  // (id, kind, stage, microbatch, bytes, interval, timing, offset).
  std::string ToString() const;
};

// The arena's input: one LiveInterval per buffer of `buffers` (same ids),
// live over [alloc_index, free_index].
std::vector<LiveInterval> ArenaIntervals(const RankBuffers& buffers);

// Plans one rank. Errors: those of ValidatePlanOptions and
// ComputeBufferLifetimes (FailedPrecondition for a compute-only schedule);
// under SendCompletionModel::kReceive those of HappensBefore::Build, which
// then orders every rank's program (O(actions of all ranks) per peer).
// REQUIRES: 0 <= rank < schedule.pp.
absl::StatusOr<RankMemoryPlan> PlanRankMemory(const Schedule& schedule, const Model& model,
                                              int rank, const PlanOptions& options);

// What planning every rank of one program shares: the index of every
// rank's program and, under SendCompletionModel::kReceive (for a lowered
// schedule), the happens-before order, O(actions of all ranks) per peer to
// build: built once for all the ranks planned rather than once per rank
// (PlanMemory, PlanEveryRank). Not copyable or movable (the order borrows
// the index); const methods may run on many threads.
class SharedRankInputs {
 public:
  // Errors: those of ValidateHeader, and of HappensBefore::Build under
  // kReceive for a lowered schedule. `schedule` is borrowed: it must
  // outlive the inputs.
  static absl::StatusOr<std::unique_ptr<const SharedRankInputs>> Build(
      const Schedule& schedule, SendCompletionModel send_completion);
  SharedRankInputs(const SharedRankInputs&) = delete;
  SharedRankInputs& operator=(const SharedRankInputs&) = delete;

  // PlanRankMemory(schedule, model, rank, options) with these inputs: the
  // same plan. Errors: those of PlanRankMemory; FailedPrecondition when
  // options.send_completion is not the model the inputs were built for.
  absl::StatusOr<RankMemoryPlan> PlanRank(const Model& model, int rank,
                                          const PlanOptions& options) const;

 private:
  SharedRankInputs(const Schedule& schedule, SendCompletionModel send_completion,
                   ProgramIndex index)
      : schedule_(&schedule), send_completion_(send_completion), index_(std::move(index)) {}

  const Schedule* schedule_;  // borrowed
  const SendCompletionModel send_completion_;
  const ProgramIndex index_;            // every rank's
  std::optional<HappensBefore> order_;  // kReceive only; borrows index_
};

// Plans every rank, up to `threads` ranks at a time (0: one per hardware
// thread; base/parallel_for.h). The plans are in rank order and do not depend
// on `threads`; on failure, the lowest failing rank's error is returned.
absl::StatusOr<std::vector<RankMemoryPlan>> PlanMemory(const Schedule& schedule,
                                                       const Model& model,
                                                       const PlanOptions& options,
                                                       int threads = 0);

// An ASCII picture of the arena over time (XLA's
// NodesOverlappingInTimeToAsciiArt turned sideways): one row per program
// index (at most `max_rows`, evenly sampled, the peak always included), one
// column per arena_bytes/columns bytes, each cell the letter of the buffer
// kind that holds the cell's middle byte during that action ('.' free):
//   I input  S stash  O output  g output_grad  i input_grad
//   G param_grad  R reduce  P params
// REQUIRES: plan.options.arena; `program` is the rank's program; columns >= 1.
std::string MemoryMap(const RankMemoryPlan& plan, const RankProgram& program, int columns = 64,
                      int max_rows = 48);

}  // namespace jitpipe

#endif  // JITPIPE_MEMORY_MEMORY_PLAN_H_
