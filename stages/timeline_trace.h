// A Timeline (measured by a runtime or predicted by the simulator) as a
// Chrome trace, through traces/chrome_trace_writer.h.
//
// Per timeline rank (pid = rank, named "rank R", or "rank R (pipeline rank
// P, replica D)" for data-parallel replicas, world rank = replica * pp + P):
// a compute thread and, for send / recv / reduce / unshard spans, one thread
// per lane (overlapping spans of one track are spread over lanes); slices
// named after the action, with the program index (and, for transfers, bytes
// and peer) as args; a flow arrow from each SEND slice, at its post, to the
// data's arrival at the receiver (a zero-length slice named "arrived ..." at
// the end of the matching RECV slice, or that slice when it has no length);
// for a transfer that arrives no later than its send was posted (free
// communication: viewers draw arrows only forwards in time), an arrow from
// the producing compute slice to the consuming one instead, where both
// viewers can bind them; memory counters per rank and category
// ("mem.<category>", "mem.live"), with a last sample at the rank's end.
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
