#include "memory/arena.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "memory/occupancy_tree.h"

namespace jitpipe {
namespace {

class GreedyBestFit : public ArenaAlgorithm {
 public:
  explicit GreedyBestFit(PlacementOrder order) : order_(order) {}

  absl::string_view name() const override {
    return order_ == PlacementOrder::kDecreasingSize ? "greedy-by-size" : "greedy-by-duration";
  }

  ArenaLayout Place(absl::Span<const LiveInterval> intervals, int num_times,
                    int64_t alignment) const override {
    ArenaLayout layout;
    layout.algorithm = std::string(name());
    layout.offsets.assign(intervals.size(), 0);
    if (num_times <= 0) return layout;
    OccupancyTree tree(num_times);
    for (int id : Order(intervals)) {
      const LiveInterval& in = intervals[id];
      const int64_t offset = tree.BestFit(in.start, in.end, in.bytes, alignment);
      tree.Occupy(in.start, in.end, offset, in.bytes);
      layout.offsets[id] = offset;
      layout.arena_bytes = std::max(layout.arena_bytes, offset + in.bytes);
    }
    return layout;
  }

 private:
  // The ids of the non-empty intervals in placement order.
  std::vector<int> Order(absl::Span<const LiveInterval> intervals) const {
    std::vector<int> ids;
    ids.reserve(intervals.size());
    for (int id = 0; id < static_cast<int>(intervals.size()); ++id) {
      if (intervals[id].bytes > 0) ids.push_back(id);
    }
    auto duration = [&](int id) { return intervals[id].end - intervals[id].start; };
    if (order_ == PlacementOrder::kDecreasingSize) {
      std::sort(ids.begin(), ids.end(), [&](int a, int b) {
        if (intervals[a].bytes != intervals[b].bytes) return intervals[a].bytes > intervals[b].bytes;
        return a < b;
      });
    } else {
      std::sort(ids.begin(), ids.end(), [&](int a, int b) {
        if (duration(a) != duration(b)) return duration(a) > duration(b);
        if (intervals[a].bytes != intervals[b].bytes) return intervals[a].bytes > intervals[b].bytes;
        return a < b;
      });
    }
    return ids;
  }

  PlacementOrder order_;
};

// Free byte ranges of the slab at the current time, sorted by offset; the
// last one is [top, kUnbounded). Few in a tight packing, so a flat vector
// with linear scans beats any node-based set here.
class FreeList {
 public:
  FreeList() : gaps_{{0, kUnbounded}} {}

  // Best fit: the lowest aligned offset of the smallest gap that fits.
  int64_t Take(int64_t bytes, int64_t alignment) {
    size_t best = gaps_.size() - 1;
    int64_t best_size = kUnbounded;
    for (size_t k = 0; k + 1 < gaps_.size(); ++k) {
      const int64_t size = gaps_[k].hi - AlignUp(gaps_[k].lo, alignment);
      if (size >= bytes && size < best_size) {
        best = k;
        best_size = size;
        if (size == bytes) break;
      }
    }
    // The gap becomes [lo, offset) and [offset + bytes, hi); either may be empty.
    const Gap gap = gaps_[best];
    const int64_t offset = AlignUp(gap.lo, alignment);
    const bool below = offset > gap.lo;
    const bool above = offset + bytes < gap.hi;
    if (below && above) {
      gaps_[best].hi = offset;
      gaps_.insert(gaps_.begin() + best + 1, Gap{offset + bytes, gap.hi});
    } else if (below) {
      gaps_[best].hi = offset;
    } else if (above) {
      gaps_[best].lo = offset + bytes;
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
// over time with a free list is the whole algorithm, O(n * free gaps).
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
          free_list.Release(layout.offsets[id], layout.offsets[id] + intervals[id].bytes);
        }
      }
      for (int k = starting.first[t]; k < starting.first[t + 1]; ++k) {
        const int id = starting.ids[k];
        const int64_t offset = free_list.Take(intervals[id].bytes, alignment);
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

std::unique_ptr<ArenaAlgorithm> MakeGreedyBestFit(PlacementOrder order) {
  if (order == PlacementOrder::kStart) return std::make_unique<StartOrderBestFit>();
  return std::make_unique<GreedyBestFit>(order);
}

ArenaLayout ChooseBestArena(absl::Span<const ArenaAlgorithm* const> algorithms,
                            absl::Span<const LiveInterval> intervals, int num_times,
                            int64_t alignment, int64_t lower_bound) {
  ArenaLayout best;
  for (size_t k = 0; k < algorithms.size(); ++k) {
    ArenaLayout layout = algorithms[k]->Place(intervals, num_times, alignment);
    if (k == 0 || layout.arena_bytes < best.arena_bytes) best = std::move(layout);
    if (best.arena_bytes <= lower_bound) break;
  }
  return best;
}

absl::Status VerifyArenaLayout(absl::Span<const LiveInterval> intervals,
                               const ArenaLayout& layout, int64_t alignment) {
  if (layout.offsets.size() != intervals.size()) {
    return absl::InternalError(absl::StrCat("the layout has ", layout.offsets.size(),
                                            " offsets for ", intervals.size(), " intervals"));
  }
  int64_t high = 0;
  // Sweep time: at each interval's start, drop the live ones that ended and
  // check the new one against its neighbours in offset order.
  std::vector<int> ids(intervals.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(), [&](int a, int b) {
    return std::make_pair(intervals[a].start, a) < std::make_pair(intervals[b].start, b);
  });
  std::set<std::pair<int64_t, int>> live;             // (offset, id), non-empty intervals
  std::set<std::pair<int, int>> ends;                 // (end, id)
  for (int id : ids) {
    const LiveInterval& in = intervals[id];
    const int64_t offset = layout.offsets[id];
    if (offset < 0 || offset % alignment != 0) {
      return absl::InternalError(absl::StrCat("interval ", id, " has offset ", offset,
                                              ", not a multiple of ", alignment));
    }
    if (in.bytes == 0) continue;
    high = std::max(high, offset + in.bytes);
    while (!ends.empty() && ends.begin()->first < in.start) {
      live.erase({layout.offsets[ends.begin()->second], ends.begin()->second});
      ends.erase(ends.begin());
    }
    auto next = live.lower_bound({offset, -1});
    for (auto it : {next, next == live.begin() ? live.end() : std::prev(next)}) {
      if (it == live.end()) continue;
      const int other = it->second;
      const int64_t lo = std::max(offset, layout.offsets[other]);
      const int64_t hi = std::min(offset + in.bytes, layout.offsets[other] + intervals[other].bytes);
      if (lo < hi) {
        return absl::InternalError(absl::StrCat("intervals ", other, " and ", id,
                                                " overlap in bytes [", lo, ", ", hi,
                                                ") while both are live"));
      }
    }
    live.insert({offset, id});
    ends.insert({in.end, id});
  }
  if (high != layout.arena_bytes) {
    return absl::InternalError(absl::StrCat("arena_bytes is ", layout.arena_bytes,
                                            " but the intervals reach ", high));
  }
  return absl::OkStatus();
}

}  // namespace jitpipe
