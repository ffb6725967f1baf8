// A timeline: what each rank did when, predicted (simulator) or measured
// (runtime), in microseconds from the start of the step. traces/ turns it
// into a Chrome trace.
#ifndef JITPIPE_STAGES_TIMELINE_H_
#define JITPIPE_STAGES_TIMELINE_H_

#include <array>
#include <cstdint>
#include <vector>

#include "memory/buffer_lifetimes.h"

namespace jitpipe {

enum class TimelineTrack : uint8_t {
  kCompute,  // F, I, W, B, OVERLAP_F_B
  kSend,     // from the SEND's post to the transfer's completion
  kRecv,     // from the RECV's post to the transfer's completion
  kReduce,   // a gradient reduction on the reduction stream
  kUnshard,  // an FSDP all-gather
};
inline constexpr int kNumTimelineTracks = 5;

struct TimelineSpan {
  int32_t rank = 0;
  TimelineTrack track = TimelineTrack::kCompute;
  int32_t index = 0;             // program index of the action
  int32_t transfer = -1;         // send/recv: the transfer id (flows pair them)
  double start_us = 0;
  double end_us = 0;
  int32_t bucket = -1;           // kReduce: the bucket, 0 .. dp.buckets - 1 (-1: unknown)
};

// Live bytes of one rank by category, from time_us until its next sample.
struct MemorySample {
  int32_t rank = 0;
  double time_us = 0;
  std::array<int64_t, kNumMemoryCategories> bytes{};
};

struct Timeline {
  std::vector<TimelineSpan> spans;     // per rank in program order, ranks in order
  std::vector<MemorySample> memory;    // per rank in time order, ranks in order
};

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_TIMELINE_H_
