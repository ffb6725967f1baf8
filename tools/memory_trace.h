// A memory plan as Chrome-trace tracks, for `jitpipe plan --trace` (and any
// tool that wants a rank's planned memory next to its timeline).
//
// Per rank (pid = rank, process "rank R", sorted by rank), over program index
// i as time (ts_us = i; the writer's 1 us offset makes the file show i + 1):
//   thread 1 "program": one 1-us slice per action, named by its text, cat
//     "compute", "p2p" or "stage" (UNSHARD, RESHARD, REDUCE_GRAD);
//   counters (key "bytes"), sampled at every change and once more at
//     ts = num_actions: "mem.activations", "mem.stash", "mem.receive",
//     "mem.gradients", "mem.parameters" (MemoryCategory), "mem.live" (their
//     sum) and, when the plan has an arena, "mem.arena_high" (the highest
//     byte occupied during the action: XLA's HeapSizeInInterval).
#ifndef JITPIPE_TOOLS_MEMORY_TRACE_H_
#define JITPIPE_TOOLS_MEMORY_TRACE_H_

#include <cstdint>
#include <vector>

#include "memory/memory_plan.h"
#include "scheduler/ir/schedule.h"
#include "traces/chrome_trace_writer.h"

namespace jitpipe::cli {

// The highest occupied byte (offset + bytes) during each action.
// REQUIRES: plan.options.arena.
std::vector<int64_t> ArenaHighWater(const RankMemoryPlan& plan);

// Adds rank `plan.rank`'s tracks to `writer` (errors are the writer's
// sticky status). REQUIRES: `program` is the plan's rank program.
void AddPlanToTrace(const RankMemoryPlan& plan, const RankProgram& program,
                    ChromeTraceWriter& writer);

}  // namespace jitpipe::cli

#endif  // JITPIPE_TOOLS_MEMORY_TRACE_H_
