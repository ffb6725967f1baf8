// The placement algorithms behind MakeGreedyBestFit (arena.h).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "memory/arena.h"
#include "memory/kept_times.h"
#include "memory/occupancy_tree.h"

namespace jitpipe {
namespace {

// Best fit over an OccupancyTree in a sort order, refined by squeaky-wheel
// rounds: the intervals a layout had to put above the peak line go first
// in the next round.
class OrderedBestFit : public ArenaAlgorithm {
 public:
  OrderedBestFit(PlacementOrder order, int refine_rounds)
      : order_(order), refine_rounds_(refine_rounds) {}

  absl::string_view name() const override {
    return order_ == PlacementOrder::kDecreasingSize ? "greedy-by-size" : "greedy-by-duration";
  }

  ArenaLayout Place(absl::Span<const LiveInterval> intervals, int num_times,
                    int64_t alignment) const override {
    std::vector<int> ids = SortedIds(intervals);
    const KeptTimes times = KeepTimes(intervals, num_times);
    OccupancyTree tree(times.num_points, alignment);
    ArenaLayout best;
    PlaceInOrder(intervals, times, ids, kNoLimit, tree, best);
    const int64_t peak = refine_rounds_ > 0 ? PeakLive(intervals, num_times) : 0;
    ArenaLayout last = best;
    for (int round = 0; round < refine_rounds_ && best.arena_bytes > peak; ++round) {
      std::stable_partition(ids.begin(), ids.end(), [&](int id) {
        return last.offsets[id] + intervals[id].bytes > peak;
      });
      // A round that does not beat the best ends the refinement, so it may
      // stop placing as soon as its arena reaches the best's.
      if (!PlaceInOrder(intervals, times, ids, best.arena_bytes, tree, last)) break;
      best = last;
    }
    return best;
  }

 private:
  static constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

  // Places the intervals in the order `ids` into `layout`, with `tree`
  // emptied first. Returns false, with `layout` incomplete, as soon as its
  // arena reaches `limit` bytes.
  bool PlaceInOrder(absl::Span<const LiveInterval> intervals, const KeptTimes& times,
                    const std::vector<int>& ids, int64_t limit, OccupancyTree& tree,
                    ArenaLayout& layout) const {
    layout.algorithm = std::string(name());
    layout.offsets.assign(intervals.size(), 0);
    layout.arena_bytes = 0;
    tree.Clear();
    for (int id : ids) {
      const int64_t bytes = intervals[id].bytes;
      const int64_t offset = tree.BestFit(times.start[id], times.end[id], bytes);
      tree.Occupy(times.start[id], times.end[id], offset, bytes);
      layout.offsets[id] = offset;
      layout.arena_bytes = std::max(layout.arena_bytes, offset + bytes);
      if (layout.arena_bytes >= limit) return false;
    }
    return true;
  }

  // The ids of the non-empty intervals in the sort order (keys gathered
  // first: sorting ids through the intervals costs a cache miss a compare).
  std::vector<int> SortedIds(absl::Span<const LiveInterval> intervals) const {
    struct Key {
      int64_t first;   // -bytes, or -duration
      int64_t second;  // 0, or -bytes
      int id;
    };
    std::vector<Key> keys;
    keys.reserve(intervals.size());
    for (int id = 0; id < static_cast<int>(intervals.size()); ++id) {
      const LiveInterval& in = intervals[id];
      if (in.bytes == 0) continue;
      if (order_ == PlacementOrder::kDecreasingSize) {
        keys.push_back({-in.bytes, 0, id});
      } else {
        keys.push_back({-static_cast<int64_t>(in.end - in.start), -in.bytes, id});
      }
    }
    std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
      if (a.first != b.first) return a.first < b.first;
      if (a.second != b.second) return a.second < b.second;
      return a.id < b.id;
    });
    std::vector<int> ids;
    ids.reserve(keys.size());
    for (const Key& key : keys) ids.push_back(key.id);
    return ids;
  }


  PlacementOrder order_;
  int refine_rounds_;
};

// Free ranges of the slab at the current time, in units of the alignment
// and sorted by offset; the last one is [top, kUnbounded). An occupied range
// ends at the next aligned offset, as in OccupancyTree: the bytes between a
// buffer's end and that offset can hold nothing (every buffer starts
// aligned), and kept as gaps of their own they turned a few free ranges into
// a thousand when sizes are not multiples of the alignment. Few in a tight
// packing, so a flat vector with linear scans beats any node-based set here.
class FreeList {
 public:
  FreeList() : gaps_{{0, kUnbounded}} {}

  // Best fit: the lowest offset of the smallest gap of at least `units`.
  int64_t Take(int64_t units) {
    size_t best = gaps_.size() - 1;
    int64_t best_size = kUnbounded;
    for (size_t k = 0; k + 1 < gaps_.size(); ++k) {
      const int64_t size = gaps_[k].hi - gaps_[k].lo;
      if (size >= units && size < best_size) {
        best = k;
        best_size = size;
        if (size == units) break;
      }
    }
    Gap& gap = gaps_[best];
    const int64_t offset = gap.lo;
    if (offset + units < gap.hi) {
      gap.lo = offset + units;
    } else {
      gaps_.erase(gaps_.begin() + best);
    }
    return offset;
  }

  void Release(int64_t lo, int64_t hi) {
    auto next = std::lower_bound(gaps_.begin(), gaps_.end(), lo,
                                 [](const Gap& g, int64_t value) { return g.lo < value; });
    const bool join_prev = next != gaps_.begin() && std::prev(next)->hi == lo;
    const bool join_next = next != gaps_.end() && next->lo == hi;
    if (join_prev && join_next) {
      std::prev(next)->hi = next->hi;
      gaps_.erase(next);
    } else if (join_prev) {
      std::prev(next)->hi = hi;
    } else if (join_next) {
      next->lo = lo;
    } else {
      gaps_.insert(next, Gap{lo, hi});
    }
  }

 private:
  static constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();
  struct Gap {
    int64_t lo;
    int64_t hi;
  };
  std::vector<Gap> gaps_;
};

// Best fit in order of start time (ties by id): the intervals overlapping
// one being placed are exactly those still live at its start, so a sweep
// over time with a free list is the whole algorithm.
class StartOrderBestFit : public ArenaAlgorithm {
 public:
  absl::string_view name() const override { return "greedy-by-start"; }

  ArenaLayout Place(absl::Span<const LiveInterval> intervals, int num_times,
                    int64_t alignment) const override {
    ArenaLayout layout;
    layout.algorithm = std::string(name());
    layout.offsets.assign(intervals.size(), 0);
    const Buckets starting = BucketIds(intervals, num_times, &LiveInterval::start);
    const Buckets ending = BucketIds(intervals, num_times, &LiveInterval::end);
    FreeList free_list;
    for (int t = 0; t < num_times; ++t) {
      // Intervals that ended at t - 1 are free at t; those starting at t are live.
      if (t > 0) {
        for (int k = ending.first[t - 1]; k < ending.first[t]; ++k) {
          const int id = ending.ids[k];
          free_list.Release(layout.offsets[id] / alignment,
                            (layout.offsets[id] + intervals[id].bytes + alignment - 1) / alignment);
        }
      }
      for (int k = starting.first[t]; k < starting.first[t + 1]; ++k) {
        const int id = starting.ids[k];
        const int64_t offset =
            free_list.Take((intervals[id].bytes + alignment - 1) / alignment) * alignment;
        layout.offsets[id] = offset;
        layout.arena_bytes = std::max(layout.arena_bytes, offset + intervals[id].bytes);
      }
    }
    return layout;
  }

 private:
  // The ids of the non-empty intervals grouped by one time field, ascending
  // within a group: group t is ids[first[t] .. first[t + 1]).
  struct Buckets {
    std::vector<int> first;
    std::vector<int> ids;
  };
  static Buckets BucketIds(absl::Span<const LiveInterval> intervals, int num_times,
                           int32_t LiveInterval::*field) {
    Buckets b;
    b.first.assign(num_times + 1, 0);
    for (const LiveInterval& in : intervals) {
      if (in.bytes > 0) ++b.first[in.*field + 1];
    }
    for (int t = 0; t < num_times; ++t) b.first[t + 1] += b.first[t];
    b.ids.resize(b.first[num_times]);
    std::vector<int> next(b.first.begin(), b.first.end() - 1);
    for (int id = 0; id < static_cast<int>(intervals.size()); ++id) {
      if (intervals[id].bytes > 0) b.ids[next[intervals[id].*field]++] = id;
    }
    return b;
  }
};

}  // namespace

std::unique_ptr<ArenaAlgorithm> MakeGreedyBestFit(PlacementOrder order, int refine_rounds) {
  if (order == PlacementOrder::kStart) return std::make_unique<StartOrderBestFit>();
  return std::make_unique<OrderedBestFit>(order, refine_rounds);
}

}  // namespace jitpipe
