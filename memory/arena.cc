#include "memory/arena.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <numeric>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "memory/kept_times.h"

namespace jitpipe {

ArenaLayout ChooseBestArena(absl::Span<const ArenaAlgorithm* const> algorithms,
                            absl::Span<const LiveInterval> intervals, int num_times,
                            int64_t alignment, int64_t good_enough) {
  ArenaLayout best;
  for (size_t k = 0; k < algorithms.size(); ++k) {
    ArenaLayout layout = algorithms[k]->Place(intervals, num_times, alignment);
    if (k == 0 || layout.arena_bytes < best.arena_bytes) best = std::move(layout);
    if (best.arena_bytes <= good_enough) break;
  }
  return best;
}

int64_t ArenaGoodEnough(int64_t peak, double slack) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const double extra = static_cast<double>(peak) * slack;
  if (extra >= 0x1p62) return kMax;
  const auto bytes = static_cast<int64_t>(extra);
  return bytes > kMax - peak ? kMax : peak + bytes;
}

ArenaLayout ChooseBestGreedyArena(absl::Span<const LiveInterval> intervals, int num_times,
                                  int64_t alignment, int64_t good_enough) {
  const std::unique_ptr<ArenaAlgorithm> by_start = MakeGreedyBestFit(PlacementOrder::kStart);
  const std::unique_ptr<ArenaAlgorithm> by_size =
      MakeGreedyBestFit(PlacementOrder::kDecreasingSize);
  const std::unique_ptr<ArenaAlgorithm> by_duration =
      MakeGreedyBestFit(PlacementOrder::kDecreasingDuration);
  const ArenaAlgorithm* const algorithms[] = {by_start.get(), by_size.get(), by_duration.get()};
  ArenaLayout best = ChooseBestArena(algorithms, intervals, num_times, alignment, good_enough);
  // Where no interval dominates, the search would be greedy by size again:
  // skipped, so programs of many similar buffers pay nothing for it. It is
  // also skipped where greedy is already within 5% of the peak (the arena
  // target): there it costs ~10 ms a rank on small programs whose buffers
  // all dominate, for a gain of a few percent at most.
  const int64_t peak = PeakLive(intervals, num_times);
  const int64_t within_target = peak + peak / 20;
  if (best.arena_bytes <= std::max(good_enough, within_target) ||
      !DominantSearchApplies(intervals, num_times)) {
    return best;
  }
  ArenaLayout searched = MakeDominantOrderSearch()->Place(intervals, num_times, alignment);
  return searched.arena_bytes < best.arena_bytes ? searched : best;
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
      const int64_t hi =
          std::min(offset + in.bytes, layout.offsets[other] + intervals[other].bytes);
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
