// AddTimelineToTrace: a Timeline (timeline.h) as a Chrome trace, through
// ChromeTraceWriter. It writes every jitpipe timeline trace -- planned
// (`jitpipe plan --trace`: program index as time, or the simulated step when
// the model gives times), simulated (`simulate --trace`) and measured
// (`replay --trace`) -- so all of them share one track schema:
//
//   process  one per timeline rank R: pid R, sort index R, named "rank R",
//            or "rank R (pipeline rank P, replica D)" for a rank of replica
//            D > 0 (R = D * pp + P).
//   threads  per process, only the tracks the rank has spans on, in this
//            order (the sort index is the tid):
//              tid 1            "compute"  F, I, W, B, OVERLAP_F_B   cat "compute"
//              tid 1001 + lane  "send"     SEND_F, SEND_B            cat "p2p"
//              tid 2001 + lane  "recv"     RECV_F, RECV_B            cat "p2p"
//              tid 3001 + lane  "reduce"   REDUCE_GRAD               cat "reduce"
//              tid 4001 + lane  "unshard"  UNSHARD (planned: RESHARD too)  cat "fsdp"
//            Spans of one track that overlap (or touch) go to further
//            lanes, threads "send 2", "send 3", ..., so each thread nests.
//   slices   one per span, named by its action's text ("0F1", "1SEND_F2";
//            a reduction bucket "2REDUCE_GRAD bucket 1"), args "index" (the
//            program index) and, for a transfer the timeline's table knows,
//            "bytes" and "peer" (the other end's timeline rank).
//   flows    one arrow per transfer and replica and step (a rank's step
//            ends where its program index goes back), named "act sS->sT mbM"
//            or "grad sS->sT mbM": from the SEND slice, at its post, to the
//            data's arrival at the receiver -- a zero-length slice "arrived
//            <name>" at the end of the RECV slice, or that slice itself when
//            it has no length. Viewers draw arrows only forwards in time, so
//            a transfer whose arrival is not later than its send's post (free
//            communication; a RECV earlier in program order than its SEND)
//            gets an arrow from the compute slice that produced the data to
//            the one that consumes it instead, where that goes forwards and
//            both viewers can bind it (distinct starts on each thread).
//   counters per process, key "bytes": "mem.activations", "mem.stash",
//            "mem.receive", "mem.gradients", "mem.parameters" (the
//            MemoryCategory), "mem.live" (their sum) and, where the samples
//            carry it (a planned arena), "mem.arena_high"; each sampled
//            where its value changes and once more at the rank's end (its
//            latest span end), so the last step has width.
//   otherData "time_axis": "microseconds" or "program index" (then every ts
//            is a program index; viewers still label it us).
//
// On the program-index axis (planned_timeline.h) every action is one unit
// wide, so an arrow shows which SEND feeds which RECV in program order.
#ifndef JITPIPE_TRACES_TIMELINE_TRACE_H_
#define JITPIPE_TRACES_TIMELINE_TRACE_H_

#include "scheduler/ir/schedule.h"
#include "traces/chrome_trace_writer.h"
#include "traces/timeline.h"

namespace jitpipe {

// Adds `timeline` (of the lowered `schedule`: a span of rank R names
// schedule.ranks[R mod pp][index]) to `writer`; the writer's errors (times
// out of range) are sticky in the writer.
// REQUIRES: every span's index is in its program.
void AddTimelineToTrace(const Schedule& schedule, const Timeline& timeline,
                        ChromeTraceWriter& writer);

}  // namespace jitpipe

#endif  // JITPIPE_TRACES_TIMELINE_TRACE_H_
