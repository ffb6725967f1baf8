// Test helper: the arena algorithms of memory/arena.h written the plain way,
// as the definition the fast ones must match offset for offset.
//
// TFLite's SimpleMemoryArena scan: to place an interval, take every placed
// interval that overlaps it in time, sort them by offset and walk the gaps
// between them upwards (each gap starts at the aligned end of everything
// below it); the smallest gap that fits wins, the lowest on a tie, else the
// aligned end of the highest. O(n^2) per pass: for tests only.
#ifndef JITPIPE_TESTS_MEMORY_ARENA_REFERENCE_H_
#define JITPIPE_TESTS_MEMORY_ARENA_REFERENCE_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "memory/arena.h"

namespace jitpipe::testing {

inline int64_t ReferenceAlignUp(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// The offset best fit gives `in` among the intervals `placed` (ids into
// `intervals`, with their offsets in `offsets`).
inline int64_t ReferenceBestFit(const std::vector<LiveInterval>& intervals,
                                const std::vector<int64_t>& offsets,
                                const std::vector<int>& placed, const LiveInterval& in,
                                int64_t alignment) {
  std::vector<int> overlapping;
  for (int id : placed) {
    const LiveInterval& other = intervals[id];
    if (other.start <= in.end && in.start <= other.end) overlapping.push_back(id);
  }
  std::sort(overlapping.begin(), overlapping.end(),
            [&](int a, int b) { return offsets[a] < offsets[b]; });
  int64_t top = 0;  // the end of the occupied bytes walked so far
  int64_t best = -1;
  int64_t best_size = std::numeric_limits<int64_t>::max();
  for (int id : overlapping) {
    const int64_t gap_start = ReferenceAlignUp(top, alignment);
    const int64_t gap_size = offsets[id] - gap_start;
    if (gap_size >= in.bytes && gap_size < best_size) {
      best = gap_start;
      best_size = gap_size;
    }
    top = std::max(top, offsets[id] + intervals[id].bytes);
  }
  return best >= 0 ? best : ReferenceAlignUp(top, alignment);
}

// One greedy pass in the order `ids`; stops (returning false) once the arena
// reaches `limit`.
inline bool ReferencePass(const std::vector<LiveInterval>& intervals,
                          const std::vector<int>& ids, int64_t alignment, int64_t limit,
                          ArenaLayout& layout) {
  layout.offsets.assign(intervals.size(), 0);
  layout.arena_bytes = 0;
  std::vector<int> placed;
  for (int id : ids) {
    const int64_t offset =
        ReferenceBestFit(intervals, layout.offsets, placed, intervals[id], alignment);
    layout.offsets[id] = offset;
    placed.push_back(id);
    layout.arena_bytes = std::max(layout.arena_bytes, offset + intervals[id].bytes);
    if (layout.arena_bytes >= limit) return false;
  }
  return true;
}

inline int64_t ReferencePeakLive(const std::vector<LiveInterval>& intervals) {
  int64_t peak = 0;
  for (const LiveInterval& at : intervals) {
    int64_t live = 0;
    for (const LiveInterval& in : intervals) {
      if (in.start <= at.start && at.start <= in.end) live += in.bytes;
    }
    peak = std::max(peak, live);
  }
  return peak;
}

// MakeGreedyBestFit(order, refine_rounds)->Place(intervals, ..., alignment).
inline ArenaLayout ReferenceGreedy(const std::vector<LiveInterval>& intervals,
                                   PlacementOrder order, int refine_rounds,
                                   int64_t alignment) {
  std::vector<int> ids;
  for (int id = 0; id < static_cast<int>(intervals.size()); ++id) {
    if (intervals[id].bytes > 0) ids.push_back(id);
  }
  auto key = [&](int id) {
    const LiveInterval& in = intervals[id];
    switch (order) {
      case PlacementOrder::kDecreasingSize: return std::vector<int64_t>{-in.bytes, id};
      case PlacementOrder::kDecreasingDuration:
        return std::vector<int64_t>{in.start - in.end, -in.bytes, id};
      case PlacementOrder::kStart: return std::vector<int64_t>{in.start, id};
    }
    return std::vector<int64_t>{id};
  };
  std::sort(ids.begin(), ids.end(), [&](int a, int b) { return key(a) < key(b); });
  ArenaLayout best;
  best.algorithm = order == PlacementOrder::kDecreasingSize       ? "greedy-by-size"
                   : order == PlacementOrder::kDecreasingDuration ? "greedy-by-duration"
                                                                  : "greedy-by-start";
  ReferencePass(intervals, ids, alignment, std::numeric_limits<int64_t>::max(), best);
  if (order == PlacementOrder::kStart) return best;
  const int64_t peak = ReferencePeakLive(intervals);
  ArenaLayout last = best;
  for (int round = 0; round < refine_rounds && best.arena_bytes > peak; ++round) {
    std::stable_partition(ids.begin(), ids.end(), [&](int id) {
      return last.offsets[id] + intervals[id].bytes > peak;
    });
    if (!ReferencePass(intervals, ids, alignment, best.arena_bytes, last)) break;
    best = last;
  }
  return best;
}

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_MEMORY_ARENA_REFERENCE_H_
