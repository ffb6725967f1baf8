// The arena algorithms on arbitrary live intervals. Properties (arena.h):
// every ordering, and ChooseBestArena over them, returns a layout that
// VerifyArenaLayout accepts (aligned, no two live intervals overlapping in
// bytes, arena_bytes the high-water mark) and that is no smaller than the
// peak live bytes.
//
// Input: 5 bytes per interval: size (2 bytes, in 16-byte units), start and
// length (1 byte each, over 256 time points), alignment exponent (1 byte,
// only the first interval's is used); at most 256 intervals, the rest is
// ignored. Random intervals over 256 time points all overlap one another,
// the planner's quadratic worst case: 512 of them took 10 s per input under
// the fuzzing instrumentation (a libFuzzer timeout, not a finding), 256 take
// a quarter of that. Planning speed at real sizes is bench/'s business.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "memory/arena.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using jitpipe::ArenaAlgorithm;
using jitpipe::ArenaLayout;
using jitpipe::LiveInterval;
using jitpipe::PlacementOrder;
using jitpipe::fuzz::Check;

constexpr int kTimes = 256;
constexpr size_t kBytesPerInterval = 5;
constexpr size_t kMaxIntervals = 256;

int64_t PeakLiveBytes(const std::vector<LiveInterval>& intervals) {
  std::vector<int64_t> live(kTimes + 1, 0);
  for (const LiveInterval& i : intervals) {
    live[i.start] += i.bytes;
    live[i.end + 1] -= i.bytes;
  }
  int64_t peak = 0, now = 0;
  for (int t = 0; t < kTimes; ++t) peak = std::max(peak, now += live[t]);
  return peak;
}

void CheckLayout(const std::vector<LiveInterval>& intervals, const ArenaLayout& layout,
                 int64_t alignment, int64_t peak) {
  const absl::Status verified = jitpipe::VerifyArenaLayout(intervals, layout, alignment);
  Check(verified.ok(), "VerifyArenaLayout accepts the layout",
        absl::StrCat(layout.algorithm, ": ", verified.ToString()));
  Check(layout.arena_bytes >= peak, "arena >= peak live bytes", layout.algorithm);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<LiveInterval> intervals;
  for (size_t at = 0; at + kBytesPerInterval <= size && intervals.size() < kMaxIntervals;
       at += kBytesPerInterval) {
    const uint8_t* d = data + at;
    const int start = d[2];
    const int end = std::min(kTimes - 1, start + d[3]);
    intervals.push_back({.bytes = 16 * (d[0] | (d[1] << 8)), .start = start, .end = end});
  }
  if (intervals.empty()) return 0;
  const int64_t alignment = int64_t{1} << (data[4] % 13);
  const int64_t peak = PeakLiveBytes(intervals);

  std::vector<std::unique_ptr<ArenaAlgorithm>> owned;
  for (PlacementOrder order : {PlacementOrder::kDecreasingSize, PlacementOrder::kDecreasingDuration,
                               PlacementOrder::kStart}) {
    owned.push_back(jitpipe::MakeGreedyBestFit(order));
    CheckLayout(intervals, owned.back()->Place(intervals, kTimes, alignment), alignment, peak);
  }
  owned.push_back(jitpipe::MakeGreedyBestFit(PlacementOrder::kDecreasingSize, 0));
  std::vector<const ArenaAlgorithm*> algorithms;
  for (const auto& a : owned) algorithms.push_back(a.get());
  CheckLayout(intervals,
              jitpipe::ChooseBestArena(algorithms, intervals, kTimes, alignment, peak),
              alignment, peak);
  return 0;
}
