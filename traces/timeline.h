// A timeline: what each rank did when, planned (program index as time,
// planned_timeline.h), predicted (the simulator) or measured (a runtime).
// Every timeline trace jitpipe writes (plan, simulate, replay --trace) is a
// Timeline written by AddTimelineToTrace (timeline_trace.h), which also
// documents the traces' track schema.
//
// A Timeline belongs to a lowered Schedule: a span names its action by
// (rank, program index), and its rank is a timeline rank: pipeline rank
// rank mod pp of data-parallel replica rank / pp (the world rank of a
// replay; the simulator and the planner have one replica).
//
// Plain values; filled by one thread, then read.
#ifndef JITPIPE_TRACES_TIMELINE_H_
#define JITPIPE_TRACES_TIMELINE_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "memory/buffer_lifetimes.h"
#include "scheduler/ir/action.h"

namespace jitpipe {

// What the times of a Timeline count.
enum class TimelineAxis : uint8_t {
  kMicroseconds,  // simulated or measured time since the start of the run
  kProgramIndex,  // the program index: action i of a rank spans [i, i + 1]
};

// "microseconds", "program index".
inline absl::string_view TimelineAxisName(TimelineAxis axis) {
  return axis == TimelineAxis::kProgramIndex ? "program index" : "microseconds";
}

enum class TimelineTrack : uint8_t {
  kCompute,  // F, I, W, B, OVERLAP_F_B
  kSend,     // from the SEND's post to the transfer's completion
  kRecv,     // from the RECV's post to the transfer's completion
  kReduce,   // a gradient reduction on the reduction stream
  kUnshard,  // FSDP: an UNSHARD's all-gather (planned: UNSHARD and RESHARD)
};
inline constexpr int kNumTimelineTracks = 5;

// One span of a rank. Times (start_us, end_us) are in the Timeline's axis:
// microseconds, or program indexes for TimelineAxis::kProgramIndex.
struct TimelineSpan {
  int32_t rank = 0;
  TimelineTrack track = TimelineTrack::kCompute;
  int32_t index = 0;             // program index of the action
  int32_t transfer = -1;         // send/recv: the transfer id (Timeline::transfers)
  double start_us = 0;
  double end_us = 0;
  int32_t bucket = -1;           // kReduce: the bucket, 0 .. dp.buckets - 1 (-1: unknown)
};

inline constexpr int64_t kNoArenaSample = -1;

// Live bytes of one rank by category, from time_us (in the Timeline's axis)
// until its next sample.
struct MemorySample {
  int32_t rank = 0;
  double time_us = 0;
  std::array<int64_t, kNumMemoryCategories> bytes{};
  // The highest arena byte occupied (offset + bytes of the live buffer that
  // reaches highest), when the timeline follows a static arena; else
  // kNoArenaSample.
  int64_t arena_high_bytes = kNoArenaSample;
};

// One transfer of the schedule (a SEND/RECV pair), as the trace draws it:
// the arrow's name, the slices' bytes and peer, and the compute that
// produced and the compute that consumes its data (the arrow drawn when the
// SEND -> RECV one cannot go forwards in time). Ranks are pipeline ranks;
// -1 where unknown.
struct TimelineTransfer {
  ActionKind kind = ActionKind::kSendF;  // kSendF (activation) or kSendB (gradient)
  int32_t stage = 0;                     // the sending stage
  int32_t microbatch = 0;
  int32_t src_rank = -1;
  int32_t dst_rank = -1;
  int64_t bytes = 0;
  int32_t producer_index = -1;  // on src_rank: the compute action that produced the data
  int32_t consumer_index = -1;  // on dst_rank: the first compute action that consumes it
};

// What a rank holds the whole step that no planned buffer covers: its
// parameters (or their FSDP shard) and its optimizer state. A trace draws
// them as constant counters and counts them in mem.live, so that the
// trace's peak is the whole rank's (planning/rank_memory.h's total).
struct ResidentMemory {
  int32_t rank = 0;
  int64_t parameters = 0;
  int64_t optimizer = 0;
};

struct Timeline {
  TimelineAxis axis = TimelineAxis::kMicroseconds;
  std::vector<TimelineSpan> spans;   // per rank in program order, ranks in order
  std::vector<MemorySample> memory;  // per rank in time order, ranks in order
  // By TimelineSpan::transfer. Filled once by whoever assembles the whole
  // timeline (Simulate, RunReplay, PlannedTimeline); a single rank's step
  // timeline (RankExecutor) leaves it empty. A span whose transfer is not
  // in the table is drawn without bytes, peer and arrow.
  std::vector<TimelineTransfer> transfers;
  std::vector<ResidentMemory> resident;  // by rank; empty: none drawn
};

}  // namespace jitpipe

#endif  // JITPIPE_TRACES_TIMELINE_H_
