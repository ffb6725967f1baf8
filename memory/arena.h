// Static arena placement: given live intervals over a fixed sequential order
// (one rank's program), assign every interval an offset in one slab so that
// no two intervals live at the same time overlap in bytes. The mechanism half
// of the planner (TFLite's SimpleMemoryArena, XLA's HeapAlgorithm); offsets
// become pointers only at runtime (base + offset), so a plan can move.
//
// The algorithm is XLA's GlobalDecreasingSizeBestFitHeap / TFLite's greedy
// by size: sort the intervals, then place each one in the smallest gap that
// fits among the already placed intervals that overlap it in time (best fit;
// the lowest such gap on a tie), or above all of them. Every offset is a
// multiple of the alignment; zero-byte intervals get offset 0 and take no
// room. Ties in the sort are broken by interval id, so plans are
// deterministic. Three sort orders are offered (PlacementOrder); the planner
// runs them through ChooseBestArena and keeps the smallest arena.
//
//   time ->   0  1  2  3  4
//   offset 0  [a a a]  [c c]     a: 3 units live 0..2
//          1  [b b]   [d d d]    b, c, d reuse the bytes a or b freed
//
// Cost, for n intervals over T time points: by size and by duration, one
// query and one update of an OccupancyTree per interval and pass, each over
// O(log T) nodes (T counted in kept time points: where an interval starts
// and one ends before the next start) and proportional to the merged byte
// ranges in those nodes and the gaps that still fit; by start, a sweep over
// time with a free list, O(n) operations each proportional to the number of
// free gaps at that time. Both counts stay small for the tight packings of
// pipeline buffers: there is no pairwise scan over all intervals.
#ifndef JITPIPE_MEMORY_ARENA_H_
#define JITPIPE_MEMORY_ARENA_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace jitpipe {

inline constexpr int64_t kDefaultArenaAlignment = 64;

// One buffer to place: live during every time point in [start, end].
// An interval's id is its position in the span given to Place().
struct LiveInterval {
  int64_t bytes = 0;
  int32_t start = 0;
  int32_t end = 0;
};

struct ArenaLayout {
  std::string algorithm;         // the ordering that produced it
  std::vector<int64_t> offsets;  // per interval id
  int64_t arena_bytes = 0;       // the high-water mark: max(offset + bytes)
};

// A placement algorithm (XLA's HeapAlgorithm): a pure function of the
// intervals. Implementations are stateless and thread-safe.
class ArenaAlgorithm {
 public:
  virtual ~ArenaAlgorithm() = default;
  virtual absl::string_view name() const = 0;
  // REQUIRES: 0 <= start <= end < num_times and bytes >= 0 for every
  // interval; alignment is a power of two.
  virtual ArenaLayout Place(absl::Span<const LiveInterval> intervals, int num_times,
                            int64_t alignment) const = 0;
};

enum class PlacementOrder {
  kDecreasingSize,      // bytes descending, then id (TFLite, XLA kSpatial)
  kDecreasingDuration,  // end - start descending, then bytes descending, then id (XLA kTemporal)
  // start ascending, then id. The intervals overlapping one being placed are
  // then exactly those live at its start, so this is a best-fit allocator
  // replayed over the program: the cheapest of the three.
  kStart,
};

inline constexpr int kDefaultRefineRounds = 4;

// Greedy best fit in the given order. name(): "greedy-by-size",
// "greedy-by-duration" or "greedy-by-start".
//
// By size and by duration are refined by up to `refine_rounds` further
// passes while the arena exceeds the peak live bytes (squeaky-wheel
// optimisation): each pass moves the intervals the previous layout put above
// the peak line to the front of the order, keeping their relative order and
// that of the rest, and places everything again. The first pass that does
// not beat the best layout so far ends the refinement (it stops placing as
// soon as its arena reaches the best's: the result is the same).
// kStart ignores `refine_rounds`: its order is what makes it a sweep.
std::unique_ptr<ArenaAlgorithm> MakeGreedyBestFit(PlacementOrder order,
                                                  int refine_rounds = kDefaultRefineRounds);

// Simulated annealing over the order in which the dominant intervals (bytes
// >= peak live bytes / dominant_share) are placed, each order decoded by
// best fit over those intervals alone; the best order found, then every
// other interval by decreasing size, gives the layout. name():
// "searched-dominant". For programs whose arena a few huge buffers decide
// (a transformer's loss head, its parameter gradients): no fixed sort key
// packs them, some order does. Deterministic (a fixed random stream). Each
// of `restarts` runs starts from decreasing size at temperature
// start_temperature x peak, cooled by `cooling` a trial, for at most
// trials_per_restart trials and placement_budget / (restarts x dominant
// intervals) of them, so its cost is bounded whatever the program; it stops
// when the dominant intervals alone reach their own peak. Fewer than two
// dominant intervals: greedy by size, no search.
struct DominantSearchOptions {
  int64_t dominant_share = 32;
  int restarts = 4;
  int64_t trials_per_restart = 8000;
  int64_t placement_budget = int64_t{1} << 20;
  double start_temperature = 0.01;
  double cooling = 0.9995;
};
std::unique_ptr<ArenaAlgorithm> MakeDominantOrderSearch(DominantSearchOptions options = {});

// Whether MakeDominantOrderSearch(options) would search `intervals` (two or
// more dominant ones) rather than repeat greedy by size. O(n + num_times).
// REQUIRES: as ArenaAlgorithm::Place.
bool DominantSearchApplies(absl::Span<const LiveInterval> intervals, int num_times,
                           const DominantSearchOptions& options = {});

// Runs `algorithms` in turn and returns the layout with the smallest arena
// (the earlier one on a tie), as XLA's ChooseBestHeapAlgorithm. Stops as soon
// as a layout's arena is at most `good_enough` bytes: the peak live bytes
// (no layout can be smaller) for the best these orderings give, or more to
// trade arena bytes for time. REQUIRES: algorithms is not empty; as Place().
ArenaLayout ChooseBestArena(absl::Span<const ArenaAlgorithm* const> algorithms,
                            absl::Span<const LiveInterval> intervals, int num_times,
                            int64_t alignment, int64_t good_enough);

// PlanOptions::arena_slack's default (memory_plan.h says why).
inline constexpr double kDefaultArenaSlack = 1.0 / 256;

// The `good_enough` bytes for a search that may stop within `slack` of the
// peak: peak * (1 + slack), saturating at INT64_MAX (any slack >= 0 is
// valid, however large). REQUIRES: peak >= 0, slack >= 0.
int64_t ArenaGoodEnough(int64_t peak, double slack);

// ChooseBestArena over the three greedy best-fit orders, by start, by
// decreasing size and by decreasing duration (each refined as
// MakeGreedyBestFit says), then, when none of them is good enough and
// DominantSearchApplies, the dominant-order search: the planner's arena (memory_plan.h) and the receive arena
// (recv_pool.h). REQUIRES: as ChooseBestArena.
ArenaLayout ChooseBestGreedyArena(absl::Span<const LiveInterval> intervals, int num_times,
                                  int64_t alignment, int64_t good_enough);

// Checks a layout: one offset per interval, each a multiple of `alignment`,
// arena_bytes the high-water mark, and no two intervals overlapping in both
// time and bytes. O(n log n). Errors: Internal naming the two intervals.
absl::Status VerifyArenaLayout(absl::Span<const LiveInterval> intervals,
                               const ArenaLayout& layout, int64_t alignment);

}  // namespace jitpipe

#endif  // JITPIPE_MEMORY_ARENA_H_
