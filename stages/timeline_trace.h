// A Timeline (measured by a runtime or predicted by the simulator) as a
// Chrome trace, through traces/chrome_trace_writer.h.
//
// Per timeline rank (pid = rank, named "rank R", or "rank R (pipeline rank
// P, replica D)" for data-parallel replicas, world rank = replica * pp + P):
// a compute thread and, for send / recv / reduce / unshard spans, one thread
// per lane (overlapping spans of one track are spread over lanes); slices
// named after the action, with the program index (and, for transfers, bytes
// and peer) as args; flow arrows from a transfer's producing compute slice to
// its consuming one where both viewers can bind them; memory counters per
// rank and category ("mem.<category>", "mem.live"), with a last sample at
// the rank's end.
//
// (This header was reconstructed from timeline_trace.cc after it was
// overwritten by mistake; its owner may restate the contract.)
#ifndef JITPIPE_STAGES_TIMELINE_TRACE_H_
#define JITPIPE_STAGES_TIMELINE_TRACE_H_

#include "scheduler/ir/schedule.h"
#include "stages/rank_executable.h"
#include "stages/timeline.h"
#include "traces/chrome_trace_writer.h"

namespace jitpipe {

// Adds `timeline` (of `schedule`, whose executable is `executable`) to
// `writer`; the writer's errors are sticky in the writer.
void AddTimelineToTrace(const Schedule& schedule, const Executable& executable,
                        const Timeline& timeline, ChromeTraceWriter& writer);

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_TIMELINE_TRACE_H_
