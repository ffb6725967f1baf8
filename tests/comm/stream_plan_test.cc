// The stream and event plan of the device backends (comm/stream_plan.h):
// where each operation runs and what orders it, and how reductions are cut
// into buckets and carried in their wire dtype.
#include "comm/stream_plan.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::stream_plan_test {
namespace {

using ::testing::ElementsAre;

TEST(StreamPlanTest, PointToPointRunsOnItsP2pStreamAfterTheComputeStream) {
  EXPECT_EQ(StepsToString(PlanPointToPoint(P2pDirection::kSend, 0)),
            "record ready on compute; wait ready on p2p[0]; send on p2p[0]; record done on p2p[0]");
  EXPECT_EQ(StepsToString(PlanPointToPoint(P2pDirection::kRecv, 3)),
            "record ready on compute; wait ready on p2p[3]; recv on p2p[3]; record done on p2p[3]");
}

TEST(StreamPlanTest, OneGpuTransfersWaitForBothSidesOnTheReceiversStream) {
  EXPECT_EQ(StepsToString(PlanOneGpuCopy(/*send_pending=*/true)),
            "wait ready on p2p[0]; wait peer-ready on p2p[0]; copy on p2p[0]; record done on "
            "p2p[0]; record peer-done on p2p[0]");
  EXPECT_EQ(StepsToString(PlanOneGpuCopy(/*send_pending=*/false)),
            "wait ready on p2p[0]; wait peer-ready on p2p[0]; copy on p2p[0]; record done on "
            "p2p[0]");
  EXPECT_EQ(StepsToString(PlanOneGpuStagedSend()),
            "wait ready on p2p[0]; stage on p2p[0]; record done on p2p[0]");
}

// fp32 gradients reduced with a null reduce dtype stay fp32; a bf16 wire
// moves half the bytes and converts before and after.
TEST(StreamPlanTest, TheWireDtypeDecidesTheBytesAndTheConversions) {
  ASSERT_OK_AND_ASSIGN(ReductionPlan fp32,
                       PlanReduction(CollectiveKind::kAllReduce, WireType::kFp32, 1000, 4, 1));
  ASSERT_OK_AND_ASSIGN(ReductionPlan bf16,
                       PlanReduction(CollectiveKind::kAllReduce, WireType::kBf16, 1000, 4, 1));
  EXPECT_EQ(fp32.wire_bytes, 4000);
  EXPECT_EQ(bf16.wire_bytes, 2000);
  EXPECT_FALSE(fp32.converts());
  EXPECT_TRUE(bf16.converts());
  EXPECT_EQ(StepsToString(PlanReductionSteps(fp32)),
            "record ready on compute; wait ready on reduce; collective 0 on reduce; record done "
            "on reduce");
  EXPECT_EQ(StepsToString(PlanReductionSteps(bf16)),
            "record ready on compute; wait ready on reduce; to-wire on reduce; collective 0 on "
            "reduce; from-wire on reduce; record done on reduce");
  EXPECT_EQ(WireTypeName(WireType::kBf16), "bf16");
}

// Equal buckets, the last taking the remainder, one collective each, as the
// simulator charges k buckets of 1/k of the bytes.
TEST(StreamPlanTest, BucketsAreEqualSlicesTheLastTakingTheRest) {
  ASSERT_OK_AND_ASSIGN(ReductionPlan plan,
                       PlanReduction(CollectiveKind::kAllReduce, WireType::kFp32, 10, 2, 3));
  EXPECT_THAT(plan.buckets, ElementsAre(ReductionBucket{0, 3}, ReductionBucket{3, 3},
                                        ReductionBucket{6, 4}));
  EXPECT_EQ(StepsToString(PlanReductionSteps(plan)),
            "record ready on compute; wait ready on reduce; collective 0 on reduce; collective 1 "
            "on reduce; collective 2 on reduce; record done on reduce");
  // Fewer elements than buckets: no empty bucket; nothing to reduce: none.
  ASSERT_OK_AND_ASSIGN(ReductionPlan tiny,
                       PlanReduction(CollectiveKind::kAllReduce, WireType::kFp32, 2, 2, 8));
  EXPECT_THAT(tiny.buckets, ElementsAre(ReductionBucket{0, 1}, ReductionBucket{1, 1}));
  ASSERT_OK_AND_ASSIGN(ReductionPlan empty,
                       PlanReduction(CollectiveKind::kAllReduce, WireType::kFp32, 0, 2, 8));
  EXPECT_TRUE(empty.buckets.empty());
}

// A reduce-scatter reduces whole shards (a tail of fewer than members
// elements is left out, as the reduction worker does) and buckets each
// member's shard alike.
TEST(StreamPlanTest, AReduceScatterBucketsEveryShard) {
  ASSERT_OK_AND_ASSIGN(ReductionPlan plan,
                       PlanReduction(CollectiveKind::kReduceScatter, WireType::kBf16, 13, 3, 2));
  EXPECT_EQ(plan.shard, 4);
  EXPECT_EQ(plan.elements, 12);
  EXPECT_EQ(plan.wire_bytes, 24);
  EXPECT_THAT(plan.buckets, ElementsAre(ReductionBucket{0, 2}, ReductionBucket{2, 2}));
}

TEST(StreamPlanTest, RefusesImpossibleReductions) {
  EXPECT_EQ(PlanReduction(CollectiveKind::kAllReduce, WireType::kFp32, 10, 0, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanReduction(CollectiveKind::kAllReduce, WireType::kFp32, 10, 2, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanReduction(CollectiveKind::kAllReduce, WireType::kFp32, -1, 2, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace jitpipe::stream_plan_test
