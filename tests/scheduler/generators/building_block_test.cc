#include "scheduler/generators/building_block.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::building_block {
namespace {

using ::jitpipe::testing::Message;

// Lists by type: F0, F1, I1, I0 (and W lists after them).
TEST(PutWeightsTest, EachWTakesTheNextFreeSlotChunkOneFirst) {
  // slot: 0  1  2  3  4  5  6  7  8  9  10 11
  //       F0 F1 I1 I0 .  .  F0 F1 I1 .  I0 .
  const RankSlots rank = {{0, 6}, {1, 7}, {2, 8}, {3, 10}};
  RankSlots per_chunk = rank;
  ASSERT_OK(PutWeights(per_chunk, WeightLists::kPerChunk));
  EXPECT_EQ(per_chunk[kW], (std::vector<int>{4, 9}));   // chunk 1
  EXPECT_EQ(per_chunk[kW0], (std::vector<int>{5, 11}));  // chunk 0; 11 follows the last slot
  RankSlots one = rank;
  ASSERT_OK(PutWeights(one, WeightLists::kOne));
  ASSERT_EQ(one.size(), 5u);
  EXPECT_EQ(one[kW], (std::vector<int>{4, 5, 9, 11}));
}

TEST(PutWeightsTest, PendingWeightsFollowTheLastSlot) {
  const RankSlots rank = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};  // no free slot
  RankSlots per_chunk = rank;
  ASSERT_OK(PutWeights(per_chunk, WeightLists::kPerChunk));
  EXPECT_EQ(per_chunk[kW], (std::vector<int>{8, 9}));
  EXPECT_EQ(per_chunk[kW0], (std::vector<int>{10, 11}));
  RankSlots one = rank;
  ASSERT_OK(PutWeights(one, WeightLists::kOne));
  EXPECT_EQ(one[kW], (std::vector<int>{8, 9, 10, 11}));
}

TEST(PutWeightsTest, RefusesASharedSlot) {
  RankSlots rank = {{0}, {0}, {1}, {2}};
  absl::Status s = PutWeights(rank, WeightLists::kOne);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(Message(s), "building block: slot 0 used twice");
}

// Two ranks, one microbatch, slots spread out: the eager run packs them.
//   rank 0: F0@10 F1@30 I1@40 I0@70   ->  F0@0 F1@3 I1@4 I0@7
//   rank 1: F0@15 F1@20 I1@50 I0@60   ->  F0@1 F1@2 I1@5 I0@6
TEST(EagerStartTimesTest, RunsEveryOperationAsEarlyAsItsDependencies) {
  const Slots slots = {{{10}, {30}, {40}, {70}}, {{15}, {20}, {50}, {60}}};
  ASSERT_OK_AND_ASSIGN(Slots start, EagerStartTimes(slots));
  EXPECT_EQ(start, (Slots{{{0}, {3}, {4}, {7}}, {{1}, {2}, {5}, {6}}}));
}

TEST(EagerStartTimesTest, WeightsOnlyFollowTheirRank) {
  const Slots slots = {{{5}, {9}, {12}, {20}, {30, 31}}};
  ASSERT_OK_AND_ASSIGN(Slots start, EagerStartTimes(slots));
  EXPECT_EQ(start, (Slots{{{0}, {1}, {2}, {3}, {4, 5}}}));
}

TEST(EagerStartTimesTest, RefusesAnOrderAgainstADependency) {
  // Rank 1's F0 comes before rank 0's, which it depends on.
  const Slots slots = {{{1}, {4}, {5}, {8}}, {{0}, {2}, {6}, {7}}};
  absl::StatusOr<Slots> start = EagerStartTimes(slots);
  EXPECT_EQ(start.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(Message(start), "building block: rank 1 type 0 microbatch 0 is ordered before a dependency");
}

// One rank, one microbatch: with explicit W the warmup (everything before
// I0 of rank 0) moves to the earliest slots; I0 and the W after it are the
// steady phase and stay.
TEST(SqueezeTest, ExplicitMovesTheWarmupOnly) {
  const Slots slots = {{{3}, {5}, {7}, {9}, {11, 12}}};
  ASSERT_OK_AND_ASSIGN(Slots out, Squeeze(slots, WeightModel::kExplicit));
  EXPECT_EQ(out, (Slots{{{0}, {1}, {2}, {9}, {11, 12}}}));
}

TEST(SqueezeTest, ImplicitLeavesTheWarmupAlone) {
  const Slots slots = {{{3}, {5}, {7}, {9}}};
  ASSERT_OK_AND_ASSIGN(Slots out, Squeeze(slots, WeightModel::kImplicit));
  EXPECT_EQ(out, slots);
}

// The cooldown (after the last microbatch's F0 on rank 0) moves, but never
// above the peak. Implicit W run in free slots:
//   slot: 0  1  2  3  4  5  6  7  8  9  10 11
//   in:   F0 F1 I1 I0 F0 w  w  .  .  F1 I1 I0    peak 3 (at slot 4)
//   out:  F0 F1 I1 I0 F0 w  F1 I1 I0 w  w  w
// F1 of microbatch 1 may not take slot 5: it would delay a W and hold 4.
TEST(SqueezeTest, CooldownMovesWithinThePeak) {
  const Slots slots = {{{0, 4}, {1, 9}, {2, 10}, {3, 11}}};
  ASSERT_OK_AND_ASSIGN(Slots out, Squeeze(slots, WeightModel::kImplicit));
  EXPECT_EQ(out, (Slots{{{0, 4}, {1, 6}, {2, 7}, {3, 8}}}));
}

TEST(SqueezeTest, RefusesAnOperationBeforeItsDependency) {
  const Slots slots = {{{0}, {5}, {3}, {6}, {7, 8}}};  // I1 before its F1
  absl::StatusOr<Slots> out = Squeeze(slots, WeightModel::kExplicit);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(Message(out), "building block: rank 0 type 2 microbatch 0 precedes a dependency");
}

TEST(RankOrderTest, SortsEachRankBySlot) {
  const Slots slots = {{{0}, {2}, {3}, {5}, {1}, {4}}};
  EXPECT_EQ(RankOrder(slots),
            (std::vector<std::vector<std::pair<Type, int>>>{
                {{kF0, 0}, {kW, 0}, {kF1, 0}, {kI1, 0}, {kW0, 0}, {kI0, 0}}}));
}

}  // namespace
}  // namespace jitpipe::building_block
