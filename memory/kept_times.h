// Internal to the arena planner: what every ordered best fit (best_fit.cc,
// dominant_search.cc) computes before placing anything.
#ifndef JITPIPE_MEMORY_KEPT_TIMES_H_
#define JITPIPE_MEMORY_KEPT_TIMES_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "memory/arena.h"

namespace jitpipe {

// Peak live bytes of the intervals (the no-fragmentation lower bound).
// REQUIRES: as ArenaAlgorithm::Place.
int64_t PeakLive(absl::Span<const LiveInterval> intervals, int num_times);

// The time points an OccupancyTree needs for the non-empty intervals: the
// bytes occupied anywhere in a window are those occupied at some kept point
// in it. A point is kept when an interval starts there and one ends before
// the next start. At any time t the live intervals are live at the last
// start p <= t too (none started in between), so the starts suffice; and a
// start p with no end before the next start q holds a subset of what q
// holds, while every window through p, ending at an interval's end, reaches
// q. So two intervals overlap in time exactly when their kept points do.
struct KeptTimes {
  int num_points = 0;
  std::vector<int32_t> start;  // per interval id: its first kept point
  std::vector<int32_t> end;    // its last kept point
};

// REQUIRES: as ArenaAlgorithm::Place.
KeptTimes KeepTimes(absl::Span<const LiveInterval> intervals, int num_times);

}  // namespace jitpipe

#endif  // JITPIPE_MEMORY_KEPT_TIMES_H_
