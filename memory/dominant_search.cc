// The order search behind MakeDominantOrderSearch (arena.h).
//
// Why: on a transformer's loss-head rank a few buffers (the loss stage's
// stash, fp32 logits 4-10x a layer's, the parameter gradients that appear at
// a stage's first W and live to the end) hold most of the bytes. Every fixed
// sort key places them badly there (by size, the loss stage's gradients go
// to offset 0 first and lift every stash wave that ends at the W that
// allocates them: 1.24x the peak on a GPT-1.3B shape), while some order of
// the same few buffers packs them at the peak. Which order is a property of
// the whole program, not of a key, so it is searched: simulated annealing
// over the order of the dominant buffers, each order decoded by best fit,
// placing only them (a trial costs tens of placements); the rest follow by
// decreasing size in the final layout.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "memory/arena.h"
#include "memory/kept_times.h"
#include "memory/occupancy_tree.h"

namespace jitpipe {
namespace {

// SplitMix64: a fixed, portable stream, so plans are the same everywhere.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  int Below(int n) { return static_cast<int>(Next() % static_cast<uint64_t>(n)); }
  // Uniform in (0, 1].
  double Unit() { return (static_cast<double>(Next() >> 11) + 1) * 0x1p-53; }

 private:
  uint64_t state_;
};

bool Dominates(int64_t bytes, int64_t peak, const DominantSearchOptions& options) {
  return bytes > 0 && bytes >= peak / options.dominant_share;
}

class DominantOrderSearch : public ArenaAlgorithm {
 public:
  explicit DominantOrderSearch(DominantSearchOptions options) : options_(options) {}

  absl::string_view name() const override { return "searched-dominant"; }

  ArenaLayout Place(absl::Span<const LiveInterval> intervals, int num_times,
                    int64_t alignment) const override {
    const int64_t peak = PeakLive(intervals, num_times);
    std::vector<int> dominant, rest;
    for (int id = 0; id < static_cast<int>(intervals.size()); ++id) {
      const int64_t bytes = intervals[id].bytes;
      if (bytes == 0) continue;
      (Dominates(bytes, peak, options_) ? dominant : rest).push_back(id);
    }
    const auto by_size = [&](int a, int b) {
      return intervals[a].bytes != intervals[b].bytes ? intervals[a].bytes > intervals[b].bytes
                                                      : a < b;
    };
    std::sort(dominant.begin(), dominant.end(), by_size);
    std::sort(rest.begin(), rest.end(), by_size);
    const std::vector<int> order = SearchOrder(intervals, num_times, alignment, peak, dominant);

    // The final layout: the searched order, then the rest.
    std::vector<int> all = order;
    all.insert(all.end(), rest.begin(), rest.end());
    const KeptTimes times = KeepTimes(intervals, num_times);
    OccupancyTree tree(times.num_points, alignment);
    ArenaLayout layout;
    layout.algorithm = std::string(name());
    layout.offsets.assign(intervals.size(), 0);
    for (int id : all) {
      const int64_t offset = tree.BestFit(times.start[id], times.end[id], intervals[id].bytes);
      tree.Occupy(times.start[id], times.end[id], offset, intervals[id].bytes);
      layout.offsets[id] = offset;
      layout.arena_bytes = std::max(layout.arena_bytes, offset + intervals[id].bytes);
    }
    return layout;
  }

 private:
  static constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

  // The best order of `dominant` (ids into `intervals`, by decreasing size)
  // the annealing finds; `dominant` itself when there is nothing to search.
  std::vector<int> SearchOrder(absl::Span<const LiveInterval> intervals, int num_times,
                               int64_t alignment, int64_t peak,
                               const std::vector<int>& dominant) const {
    const int n = static_cast<int>(dominant.size());
    const int64_t trials = std::min<int64_t>(
        options_.trials_per_restart,
        options_.placement_budget / std::max<int64_t>(int64_t{n} * options_.restarts, 1));
    if (n < 2 || trials < 1) return dominant;
    std::vector<LiveInterval> sub;
    sub.reserve(n);
    for (int id : dominant) sub.push_back(intervals[id]);
    const int64_t sub_peak = PeakLive(sub, num_times);
    const KeptTimes times = KeepTimes(sub, num_times);
    OccupancyTree tree(times.num_points, alignment);
    // Positions into `sub`; sub is in decreasing size, so 0..n-1 is by size.
    std::vector<int> start(n);
    for (int k = 0; k < n; ++k) start[k] = k;
    std::vector<int> best = start;
    int64_t best_bytes = Decode(sub, times, start, kNoLimit, tree);
    for (int restart = 0; restart < options_.restarts && best_bytes > sub_peak; ++restart) {
      Random random(0x5eed0000ULL + static_cast<uint64_t>(restart));
      std::vector<int> order = start, next;
      int64_t bytes = Decode(sub, times, order, kNoLimit, tree);
      double temperature = static_cast<double>(peak) * options_.start_temperature;
      for (int64_t trial = 0; trial < trials && best_bytes > sub_peak; ++trial) {
        // Move one buffer to another place in the order.
        next = order;
        const int from = random.Below(n), to = random.Below(n);
        const int moved = next[from];
        next.erase(next.begin() + from);
        next.insert(next.begin() + to, moved);
        // Accepted when no larger than bytes + T * ln(1/u) (Metropolis), so
        // the decoding may stop as soon as it passes that.
        const double slack = temperature * -std::log(random.Unit());
        const int64_t limit =
            slack >= 0x1p62 ? kNoLimit : bytes + static_cast<int64_t>(slack);
        temperature *= options_.cooling;
        const int64_t got = Decode(sub, times, next, limit, tree);
        if (got > limit) continue;
        order.swap(next);
        bytes = got;
        if (bytes < best_bytes) {
          best_bytes = bytes;
          best = order;
        }
      }
    }
    std::vector<int> out;
    out.reserve(n);
    for (int k : best) out.push_back(dominant[k]);
    return out;
  }

  // Best fit of `sub` in `order` into the emptied `tree`: the arena, or a
  // value above `limit` as soon as it passes it.
  static int64_t Decode(const std::vector<LiveInterval>& sub, const KeptTimes& times,
                        const std::vector<int>& order, int64_t limit, OccupancyTree& tree) {
    tree.Clear();
    int64_t high = 0;
    for (int k : order) {
      const int64_t offset = tree.BestFit(times.start[k], times.end[k], sub[k].bytes);
      tree.Occupy(times.start[k], times.end[k], offset, sub[k].bytes);
      high = std::max(high, offset + sub[k].bytes);
      if (high > limit) return high;
    }
    return high;
  }

  DominantSearchOptions options_;
};

}  // namespace

bool DominantSearchApplies(absl::Span<const LiveInterval> intervals, int num_times,
                           const DominantSearchOptions& options) {
  const int64_t peak = PeakLive(intervals, num_times);
  int dominant = 0;
  for (const LiveInterval& in : intervals) {
    if (Dominates(in.bytes, peak, options) && ++dominant >= 2) return true;
  }
  return false;
}

std::unique_ptr<ArenaAlgorithm> MakeDominantOrderSearch(DominantSearchOptions options) {
  return std::make_unique<DominantOrderSearch>(options);
}

}  // namespace jitpipe
