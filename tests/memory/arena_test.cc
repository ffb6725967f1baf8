#include "memory/arena.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::arena_test {
namespace {

using ::jitpipe::testing::Message;
using ::testing::ElementsAre;

// id: bytes [start, end]
//   0: 256 [0,0]   1: 128 [0,3]   2: 128 [0,1]
//   3:  64 [1,3]   4:  64 [0,3]   5:  64 [2,3]
// Peak live: 576 at time 0 (0 + 1 + 2 + 4).
const std::vector<LiveInterval> kSix = {{256, 0, 0}, {128, 0, 3}, {128, 0, 1},
                                        {64, 1, 3},  {64, 0, 3},  {64, 2, 3}};

// id: bytes [start, end]
//   0: 192 [0,1]   1: 192 [1,3]   2: 128 [2,3]   3: 128 [3,3]
// Peak live: 448 at time 3 (1 + 2 + 3).
const std::vector<LiveInterval> kFour = {{192, 0, 1}, {192, 1, 3}, {128, 2, 3}, {128, 3, 3}};

// One greedy pass, without refinement.
ArenaLayout Place(PlacementOrder order, const std::vector<LiveInterval>& intervals,
                  int num_times) {
  return MakeGreedyBestFit(order, /*refine_rounds=*/0)->Place(intervals, num_times, 64);
}

TEST(ArenaTest, BySizeTakesTheSmallestGapThatFits) {
  // Order 0 1 2 3 4 5. 0 -> 0; 1 over 0 -> 256; 2 over 0, 1 -> 384; 3 (time
  // 1..3) over 1, 2: gap [0, 256) -> 0; 4 over everything -> 512; 5 (time 2..3)
  // over 1 [256,384), 3 [0,64), 4 [512,576): gaps [64,256) and [384,512); the
  // smaller one wins -> 384 (first fit would take 64).
  ArenaLayout layout = Place(PlacementOrder::kDecreasingSize, kSix, 4);
  EXPECT_EQ(layout.algorithm, "greedy-by-size");
  EXPECT_THAT(layout.offsets, ElementsAre(0, 256, 384, 0, 512, 384));
  EXPECT_EQ(layout.arena_bytes, 576);
  EXPECT_OK(VerifyArenaLayout(kSix, layout, 64));
}

TEST(ArenaTest, ByStartReplaysABestFitAllocator) {
  // Time 0: 0, 1, 2, 4 stack up to 576. Time 1: 0 freed -> 3 at 0. Time 2: 2
  // freed -> gaps [64,256) and [384,512); 5 takes the smaller -> 384.
  ArenaLayout layout = Place(PlacementOrder::kStart, kSix, 4);
  EXPECT_EQ(layout.algorithm, "greedy-by-start");
  EXPECT_THAT(layout.offsets, ElementsAre(0, 256, 384, 0, 512, 384));
  EXPECT_EQ(layout.arena_bytes, 576);
}

TEST(ArenaTest, ByDurationCanBeatBySize) {
  // By size: 0 -> 0; 1 -> 192; 2 (time 2..3) over 1 -> 0; 3 over 1, 2: the gap
  // [128,192) is too small -> 384: 512 bytes.
  ArenaLayout by_size = Place(PlacementOrder::kDecreasingSize, kFour, 4);
  EXPECT_THAT(by_size.offsets, ElementsAre(0, 192, 0, 384));
  EXPECT_EQ(by_size.arena_bytes, 512);
  // By duration (1, then 0 and 2, then 3): 1 -> 0; 0 -> 192; 2 -> 192; 3 -> 320:
  // 448 bytes, the peak.
  ArenaLayout by_duration = Place(PlacementOrder::kDecreasingDuration, kFour, 4);
  EXPECT_EQ(by_duration.algorithm, "greedy-by-duration");
  EXPECT_THAT(by_duration.offsets, ElementsAre(192, 0, 192, 320));
  EXPECT_EQ(by_duration.arena_bytes, 448);
  EXPECT_OK(VerifyArenaLayout(kFour, by_duration, 64));
}

TEST(ArenaTest, RefinementPlacesTheIntervalsAboveThePeakFirst) {
  // id: bytes [start, end]: 0: 128 [1,2]  1: 192 [0,0]  2: 128 [0,3]  3: 128 [1,2]
  // Peak live: 384 at times 1 and 2 (0 + 2 + 3).
  const std::vector<LiveInterval> intervals = {{128, 1, 2}, {192, 0, 0}, {128, 0, 3}, {128, 1, 2}};
  // By size (1 0 2 3): 1 -> 0; 0 -> 0; 2 over 1, 0 -> 192; 3 over 0 [0,128)
  // and 2 [192,320): the gap [128,192) is too small -> 320: 448 bytes.
  ArenaLayout greedy = Place(PlacementOrder::kDecreasingSize, intervals, 4);
  EXPECT_THAT(greedy.offsets, ElementsAre(0, 0, 192, 320));
  // Round 1 places 3, the one above the peak line, first (3 1 0 2): 3 -> 0,
  // 1 -> 0, 0 -> 128, 2 over [0,256) -> 256: 384 bytes, the peak. Round 2
  // would not run: the peak is reached.
  ArenaLayout refined =
      MakeGreedyBestFit(PlacementOrder::kDecreasingSize, 4)->Place(intervals, 4, 64);
  EXPECT_THAT(refined.offsets, ElementsAre(128, 0, 256, 0));
  EXPECT_EQ(refined.arena_bytes, 384);
  EXPECT_OK(VerifyArenaLayout(intervals, refined, 64));
  // A round that does not beat the best ends the refinement: kFour stays at
  // 512 bytes by size (its first round gives 512 again).
  EXPECT_EQ(MakeGreedyBestFit(PlacementOrder::kDecreasingSize, 4)->Place(kFour, 4, 64).arena_bytes,
            512);
}

TEST(ArenaTest, ChooseBestArenaKeepsTheSmallestAndStopsAtTheLowerBound) {
  std::unique_ptr<ArenaAlgorithm> size = MakeGreedyBestFit(PlacementOrder::kDecreasingSize, 0);
  std::unique_ptr<ArenaAlgorithm> duration =
      MakeGreedyBestFit(PlacementOrder::kDecreasingDuration, 0);
  const ArenaAlgorithm* const both[] = {size.get(), duration.get()};
  EXPECT_EQ(ChooseBestArena(both, kFour, 4, 64, 0).algorithm, "greedy-by-duration");
  EXPECT_EQ(ChooseBestArena(both, kSix, 4, 64, 0).algorithm, "greedy-by-size");
  // Once a layout is no bigger than the bound, the next algorithm does not run
  // (by size would have found 576 bytes for kSix).
  const ArenaAlgorithm* const reversed[] = {duration.get(), size.get()};
  EXPECT_EQ(ChooseBestArena(reversed, kSix, 4, 64, 640).arena_bytes, 640);
  EXPECT_EQ(ChooseBestArena(reversed, kSix, 4, 64, 576).arena_bytes, 576);
}

TEST(ArenaTest, GoodEnoughIsThePeakPlusTheSlackSaturating) {
  EXPECT_EQ(ArenaGoodEnough(1000, 0), 1000);
  EXPECT_EQ(ArenaGoodEnough(1024, 1.0 / 256), 1028);
  EXPECT_EQ(ArenaGoodEnough(1000, 0.0015), 1001);  // 1.5 extra bytes: rounded down
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(ArenaGoodEnough(kMax / 2, 1.5), kMax);
  EXPECT_EQ(ArenaGoodEnough(1000, 1e300), kMax);
}

TEST(ArenaTest, AlignsOffsetsAndSkipsEmptyIntervals) {
  // 0 (100 B) -> 0; 1 (0 B) takes no room; 2 (10 B) -> 128, the next multiple
  // of 64 after byte 100.
  const std::vector<LiveInterval> intervals = {{100, 0, 1}, {0, 0, 1}, {10, 1, 1}};
  for (PlacementOrder order : {PlacementOrder::kDecreasingSize,
                               PlacementOrder::kDecreasingDuration, PlacementOrder::kStart}) {
    ArenaLayout layout = Place(order, intervals, 2);
    EXPECT_THAT(layout.offsets, ElementsAre(0, 0, 128)) << layout.algorithm;
    EXPECT_EQ(layout.arena_bytes, 138);
    EXPECT_OK(VerifyArenaLayout(intervals, layout, 64));
  }
}

TEST(ArenaTest, VerifyFindsOverlapsMisalignmentAndAWrongHighWaterMark) {
  const std::vector<LiveInterval> intervals = {{128, 0, 2}, {128, 2, 3}, {64, 3, 3}};
  ArenaLayout layout{"hand", {0, 64, 0}, 192};
  EXPECT_EQ(Message(VerifyArenaLayout(intervals, layout, 64)),
            "intervals 0 and 1 overlap in bytes [64, 128) while both are live");
  layout.offsets = {0, 128, 0};
  EXPECT_EQ(Message(VerifyArenaLayout(intervals, layout, 64)),
            "arena_bytes is 192 but the intervals reach 256");
  layout.arena_bytes = 256;
  EXPECT_OK(VerifyArenaLayout(intervals, layout, 64));
  layout.offsets = {0, 130, 0};
  EXPECT_EQ(Message(VerifyArenaLayout(intervals, layout, 64)),
            "interval 1 has offset 130, not a multiple of 64");
  layout.offsets = {0};
  EXPECT_EQ(Message(VerifyArenaLayout(intervals, layout, 64)),
            "the layout has 1 offsets for 3 intervals");
}

}  // namespace
}  // namespace jitpipe::arena_test
