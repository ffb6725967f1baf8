// The planned step as a Timeline over program index: what `jitpipe plan
// --trace` writes when the model gives no times (with times it writes the
// simulated step). AddTimelineToTrace (timeline_trace.h) draws it with the
// same tracks as a simulated or measured timeline.
//
// Timeline::axis is TimelineAxis::kProgramIndex. Per rank r (timeline rank
// = pipeline rank), action i of schedule.ranks[r] spans [i, i + 1] on
//   kCompute  F, I, W, B, OVERLAP_F_B
//   kSend     SEND_F, SEND_B        (with the transfer id), WAIT_SEND_F/B
//   kRecv     RECV_F, RECV_B        (with the transfer id)
//   kReduce   REDUCE_GRAD, WAIT_REDUCE_GRAD
//   kUnshard  UNSHARD, RESHARD
// (a bubble spans nothing). Memory: a sample at index 0 and at every index
// where a value changes, with the bytes live during that action by category
// (LiveBytesByCategory) and, when the plan has an arena, the arena's
// high-water mark during it (ArenaHighWater).
//
// Transfers: a table entry per (sending stage, microbatch, direction),
// id = (2 * stage + direction) * microbatches + microbatch, direction 0 for
// SEND_F and 1 for SEND_B. A rank's plan fills the ends on that rank: for
// its SENDs src_rank, the bytes of the buffer sent and the index of the
// compute that produced it; for its RECVs dst_rank and the index of the
// first compute that consumes the data. Entries without a SEND stay unknown.
//
//   rank 0: 0F0 0SEND_F0 0RECV_B0 0B0      spans: compute [0,1], send [1,2],
//   rank 1: 1RECV_F0 1F0 1B0 1SEND_B0      recv [2,3], compute [3,4]; ...
//   transfer "act s0->s1 mb0": rank 0 -> 1, producer 0 (0F0), consumer 1 (1F0)
//
// Pure functions; thread-compatible.
#ifndef JITPIPE_TRACES_PLANNED_TIMELINE_H_
#define JITPIPE_TRACES_PLANNED_TIMELINE_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "memory/memory_plan.h"
#include "scheduler/ir/schedule.h"
#include "traces/timeline.h"

namespace jitpipe {

// The planned timeline of every rank. REQUIRES: plans[r] is PlanRankMemory
// of `schedule` for rank r, for r in 0 .. plans.size() - 1.
Timeline PlannedTimeline(const Schedule& schedule, absl::Span<const RankMemoryPlan> plans);

// Appends rank plan.rank's spans, memory samples and transfer ends to
// `timeline`, for callers that plan a rank at a time and drop each plan.
// REQUIRES: `plan` is PlanRankMemory of `schedule`; timeline.axis is
// kProgramIndex; ranks are appended in increasing order, each once.
void AppendPlannedRank(const Schedule& schedule, const RankMemoryPlan& plan, Timeline& timeline);

// The highest occupied byte (offset + bytes) during each action: XLA's
// HeapSizeInInterval for one index. REQUIRES: plan.options.arena.
std::vector<int64_t> ArenaHighWater(const RankMemoryPlan& plan);

}  // namespace jitpipe

#endif  // JITPIPE_TRACES_PLANNED_TIMELINE_H_
