#include "memory/liveness.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/memory/lowered_text.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::liveness_test {
namespace {

using ::jitpipe::testing::LoweredFromText;
using ::testing::ElementsAre;

Model Sizes(int64_t input, int64_t output, int64_t stash) {
  Model m;
  m.defaults.input_bytes = input;
  m.defaults.output_bytes = output;
  m.defaults.stash_bytes = stash;
  return m;
}

// Rank 1 (last stage) of pp 2, one microbatch. Buffers by id:
//   0 input [0,2] (needed 1..2), 1 stash [1,2], 2 output [1,1],
//   3 input_grad [2,3] after send (needed 2..2), 4 param_grad [2,3] (0 B).
RankBuffers LastStage() {
  Schedule s = LoweredFromText(2, 1, Placement::kLoop, 1,
                               {"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"});
  absl::StatusOr<RankBuffers> b = ComputeBufferLifetimes(s, Sizes(64, 128, 256), 1, {});
  EXPECT_OK(b);
  return *b;
}

std::vector<std::string> Text(const std::vector<MemoryEvent>& events) {
  std::vector<std::string> out;
  for (const MemoryEvent& e : events) {
    out.push_back(absl::StrCat(e.alloc ? "alloc " : "free ", e.buffer, " @", e.index));
  }
  return out;
}

TEST(LivenessTest, EventsAllocBeforeAndFreeAfterEachAction) {
  EXPECT_THAT(Text(MemoryEvents(LastStage())),
              ElementsAre("alloc 0 @0", "alloc 1 @1", "alloc 2 @1", "free 2 @1", "alloc 3 @2",
                          "alloc 4 @2", "free 0 @2", "free 1 @2", "free 3 @3", "free 4 @3"));
}

TEST(LivenessTest, LiveBytesPeakAndLowerBound) {
  RankBuffers b = LastStage();
  const std::vector<int64_t> live = LiveBytes(b);
  EXPECT_THAT(live, ElementsAre(64, 448, 384, 64));
  Peak peak = PeakOf(live);
  EXPECT_EQ(peak.bytes, 448);
  EXPECT_EQ(peak.index, 1);
  // The received input need not exist before 1F0, the sent grad not after 1B0.
  EXPECT_THAT(NeededBytes(b), ElementsAre(0, 448, 384, 0));
  EXPECT_THAT(BuffersLiveAt(b, 1), ElementsAre(0, 1, 2));
  EXPECT_THAT(BuffersLiveAt(b, 3), ElementsAre(3, 4));
}

TEST(LivenessTest, EagerLiveBytesHoldsReceivedAndSentBuffersAllStep) {
  // The received input 0 from step start (already), the sent input grad 3
  // to step end: 64 more at index 3 than under jit.
  EXPECT_THAT(EagerLiveBytes(LastStage()), ElementsAre(64, 448, 384, 128));
  // Rank 0: input and stash (320 B) all step; output (128) sent at index 1,
  // output grad (128) received at index 2: one of them live at a time under
  // jit, both all step under eager.
  Schedule s = LoweredFromText(2, 1, Placement::kLoop, 1,
                               {"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"});
  ASSERT_OK_AND_ASSIGN(RankBuffers jit, ComputeBufferLifetimes(s, Sizes(64, 128, 256), 0, {}));
  ASSERT_OK_AND_ASSIGN(RankBuffers eager, ComputeBufferLifetimes(s, Sizes(64, 128, 256), 0,
                                                                  {.policy = MemoryPolicy::kEager}));
  EXPECT_THAT(LiveBytes(jit), ElementsAre(448, 448, 448, 448));
  EXPECT_THAT(EagerLiveBytes(jit), ElementsAre(576, 576, 576, 576));
  EXPECT_EQ(EagerLiveBytes(jit), LiveBytes(eager));
}

TEST(LivenessTest, PeakOfNothingHasNoIndex) {
  Peak peak = PeakOf({0, 0, 0});
  EXPECT_EQ(peak.bytes, 0);
  EXPECT_EQ(peak.index, -1);
  EXPECT_EQ(PeakOf({}).index, -1);
}

TEST(LivenessTest, ARecvPostedBeforeASendRaisesThePeakAboveTheLowerBound) {
  // Outputs only (128 B). 0RECV_B0 at index 2 is posted while outputs 0 and 1
  // wait for their SEND_F: 384 B live, where 128 B is all any order needs.
  Schedule s = LoweredFromText(
      2, 1, Placement::kLoop, 2,
      {"0F0 0F1 0RECV_B0 0SEND_F0 0SEND_F1 0B0 0RECV_B1 0B1",
       "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1"});
  ASSERT_OK_AND_ASSIGN(RankBuffers b, ComputeBufferLifetimes(s, Sizes(0, 128, 0), 0, {}));
  EXPECT_THAT(LiveBytes(b), ElementsAre(128, 256, 384, 384, 256, 128, 128, 128));
  EXPECT_EQ(PeakOf(LiveBytes(b)).index, 2);
  EXPECT_EQ(PeakOf(NeededBytes(b)).bytes, 128);
}

TEST(LivenessTest, SeriesByCategorySumToTheLiveBytes) {
  RankBuffers b = LastStage();
  auto series = LiveBytesByCategory(b);
  EXPECT_THAT(series[static_cast<int>(MemoryCategory::kReceive)], ElementsAre(64, 64, 64, 0));
  EXPECT_THAT(series[static_cast<int>(MemoryCategory::kStash)], ElementsAre(0, 256, 256, 0));
  EXPECT_THAT(series[static_cast<int>(MemoryCategory::kActivations)], ElementsAre(0, 128, 0, 0));
  EXPECT_THAT(series[static_cast<int>(MemoryCategory::kGradients)], ElementsAre(0, 0, 64, 64));
  EXPECT_THAT(series[static_cast<int>(MemoryCategory::kParameters)], ElementsAre(0, 0, 0, 0));
  EXPECT_EQ(MemoryCategoryName(MemoryCategory::kReceive), "receive");
}

}  // namespace
}  // namespace jitpipe::liveness_test
