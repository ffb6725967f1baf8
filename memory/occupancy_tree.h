// Internal to the arena planner: which byte ranges of a slab are occupied at
// which time points, answering "the smallest free gap that fits, free
// throughout [start, end]" without scanning every placed interval.
//
// A segment tree over time points. Each node keeps two sorted sets of merged
// byte ranges: `cover`, the ranges of intervals that span the node's whole
// time range (each interval is stored in O(log T) nodes: those that tile it),
// and `within`, the ranges occupied at any time inside the node's range. The
// bytes occupied somewhere in [start, end] are the `within` sets of the nodes
// that tile [start, end] plus the `cover` sets of the nodes that straddle
// one of its ends (the tiling nodes' ancestors):
//
//   time:  0  1  2  3  4  5  6  7        query [2, 6]
//          [          1          ]       straddles: cover
//          [    2    ][    3     ]       straddle: cover
//          [ 4 ][ 5  ][ 6  ][ 7  ]       5, 6 tile: within; 7 straddles
//                            [14][15]    14 tiles: within
//
// A query does not merge those sets: it starts from one candidate gap,
// [0, infinity), and cuts every set's ranges out of the candidates, dropping
// each piece too small for the request as soon as it appears (a gap of the
// final union that fits lies inside a piece that fits at every step, and a
// piece that does not fit only shrinks). What is left are exactly the
// maximal gaps of the union that fit, and [top, infinity). Merged ranges and
// fitting pieces stay few where the packing is tight, which keeps queries
// cheap; the sets live inline in the nodes (small ones; larger ones in
// blocks of one pool, reused as sets grow) so a query touches about one
// cache line per node, and it prefetches them all before the first cut.
//
// Byte ranges are kept in units of the alignment, their ends rounded up: a
// range ends where the next aligned offset could start, which is all a gap's
// size depends on (gaps are measured from an aligned start).
//
// Not thread-safe; one tree per placement run, reusable through Clear().
#ifndef JITPIPE_MEMORY_OCCUPANCY_TREE_H_
#define JITPIPE_MEMORY_OCCUPANCY_TREE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace jitpipe {

// The smallest multiple of `alignment` (a power of two) >= value.
inline int64_t AlignUp(int64_t value, int64_t alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}

class OccupancyTree {
 public:
  // REQUIRES: num_times >= 1; alignment a power of two.
  OccupancyTree(int num_times, int64_t alignment);

  OccupancyTree(const OccupancyTree&) = delete;
  OccupancyTree& operator=(const OccupancyTree&) = delete;

  // Empties the slab at every time point (keeps the storage).
  void Clear();

  // The offset for `bytes` live during [start, end]: the lowest aligned
  // offset of the smallest free gap that fits (best fit), or the aligned end
  // of the highest range occupied in [start, end] (0 if none).
  // REQUIRES: 0 <= start <= end < num_times, bytes > 0.
  int64_t BestFit(int start, int end, int64_t bytes);

  // Marks [offset, offset + bytes) occupied during [start, end]. Cheapest
  // right after BestFit over the same [start, end], whose walk it reuses.
  // REQUIRES: as BestFit; offset a multiple of the alignment.
  void Occupy(int start, int end, int64_t offset, int64_t bytes);

 private:
  using Unit = int64_t;  // bytes / alignment
  struct Range {
    Unit lo;
    Unit hi;  // exclusive
  };
  // Sorted by lo, disjoint, not touching. Up to kInline ranges in place,
  // more in a block of pool_: pool_[spill].lo is the block's capacity, its
  // ranges follow.
  static constexpr uint32_t kInline = 2;
  static constexpr uint32_t kNoSpill = UINT32_MAX;
  struct RangeSet {
    uint32_t size = 0;
    uint32_t spill = kNoSpill;
    Range inline_ranges[kInline];
  };
  struct Node {
    RangeSet cover;
    RangeSet within;
  };

  Range* Data(RangeSet& set) {
    return set.spill == kNoSpill ? set.inline_ranges : &pool_[set.spill + 1];
  }
  size_t Capacity(const RangeSet& set) const {
    return set.spill == kNoSpill ? kInline : static_cast<size_t>(pool_[set.spill].lo);
  }
  // The set a walk entry names.
  RangeSet& SetOf(int entry) {
    Node& node = nodes_[entry >> 1];
    return (entry & 1) ? node.within : node.cover;
  }
  void Walk(int start, int end);
  void Subtract(const Range* ranges, int count);
  // Adds `range` to `set`; false when the set already held all of it.
  bool Insert(RangeSet& set, Range range);
  void Grow(RangeSet& set);
  // A block of pool_ for `capacity` ranges (a power of two): a freed one if
  // any, else new at the end (which may move pool_).
  uint32_t Allocate(size_t capacity);

  int num_times_;
  int leaves_;  // a power of two >= num_times_
  int64_t alignment_;
  std::vector<Node> nodes_;  // heap order: node k has children 2k and 2k+1
  // The spilled sets' blocks; free_[k]: the offsets of freed blocks of
  // capacity 2^k, reused by sets that grow to it. Blocks stay with their
  // sets through Clear().
  std::vector<Range> pool_;
  std::vector<uint32_t> free_[32];
  // The last walk: nodes over [walk_start_, walk_end_], each as
  // 2 * node + (1 if it tiles the window, 0 if it straddles an end): the
  // chain straddling the left end bottom-up (left_chain_ nodes), the one
  // straddling the right end bottom-up up to where it joins the left one
  // (right_chain_ nodes), then the tiling nodes.
  std::vector<int> walk_;
  int left_chain_ = 0;
  int right_chain_ = 0;
  int walk_start_ = -1;
  int walk_end_ = -1;
  // The query's candidate gaps, candidates_[0, num_candidates_) (sorted;
  // the last one never ends), and the pieces one Subtract keeps.
  std::vector<Range> candidates_;
  int num_candidates_ = 0;
  std::vector<Range> pieces_;
  Unit units_ = 0;  // the query's size in units
};

}  // namespace jitpipe

#endif  // JITPIPE_MEMORY_OCCUPANCY_TREE_H_
