// Internal to the arena planner: which byte ranges of a slab are occupied at
// which time points, answering "which offsets are free throughout [start,
// end]" without scanning every placed interval.
//
// A segment tree over time points. Each node keeps two sorted sets of merged
// byte ranges: `cover`, the ranges of intervals that span the node's whole
// time range (each interval is stored in O(log T) nodes), and `within`, the
// ranges occupied at any time inside the node's range. The bytes occupied
// somewhere in [start, end] are the `within` sets of the nodes that tile
// [start, end] plus the `cover` sets of their ancestors. Merged ranges stay
// few where the packing is tight, which is what keeps queries cheap.
//
// Not thread-safe; one tree per placement run.
#ifndef JITPIPE_MEMORY_OCCUPANCY_TREE_H_
#define JITPIPE_MEMORY_OCCUPANCY_TREE_H_

#include <cstdint>
#include <vector>

namespace jitpipe {

// The smallest multiple of `alignment` (a power of two) >= value.
inline int64_t AlignUp(int64_t value, int64_t alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}

class OccupancyTree {
 public:
  // REQUIRES: num_times >= 1.
  explicit OccupancyTree(int num_times);

  // The offset for `bytes` live during [start, end]: the lowest aligned
  // offset of the smallest free gap that fits (best fit), or the aligned end
  // of the highest range occupied in [start, end] (0 if none).
  // REQUIRES: 0 <= start <= end < num_times, bytes > 0, alignment a power of two.
  int64_t BestFit(int start, int end, int64_t bytes, int64_t alignment);

  // Marks [offset, offset + bytes) occupied during [start, end].
  void Occupy(int start, int end, int64_t offset, int64_t bytes);

 private:
  struct Range {
    int64_t lo;
    int64_t hi;  // exclusive
  };
  using RangeSet = std::vector<Range>;  // sorted by lo, disjoint, not touching

  static void Insert(RangeSet& set, Range range);
  void PushRun(const RangeSet& set);
  void Collect(int node, int lo, int hi, int start, int end);
  void Add(int node, int lo, int hi, int start, int end, Range range);

  int num_times_;
  std::vector<RangeSet> cover_;
  std::vector<RangeSet> within_;
  // One sorted set gathered by a query: its ranges [next, end) not yet walked.
  struct Run {
    const Range* next;
    const Range* end;
  };
  std::vector<Run> runs_;
};

}  // namespace jitpipe

#endif  // JITPIPE_MEMORY_OCCUPANCY_TREE_H_
