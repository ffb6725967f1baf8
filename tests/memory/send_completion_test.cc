#include "memory/send_completion.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/memory_plan.h"
#include "tests/memory/lowered_text.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::send_completion_test {
namespace {

using ::jitpipe::testing::LoweredFromText;
using ::testing::ElementsAreArray;

constexpr int32_t A = kAbsent;

// Stage sizes for hand computation: input 10, output (and output grad) 100,
// stash 1, no parameters.
Model Sizes() {
  Model m;
  m.defaults.input_bytes = 10;
  m.defaults.output_bytes = 100;
  m.defaults.stash_bytes = 1;
  return m;
}

struct Case {
  std::string name;
  int microbatches;
  std::vector<std::string> programs;  // pp 2, one stage per rank
  std::vector<std::vector<int32_t>> holds;  // SendHolds per rank
  std::vector<int64_t> post_peaks, bound_peaks;  // per rank
};

// Each case is worked by hand in its comment.
std::vector<Case> Cases() {
  return {
      // Rank 0's 0SEND_F0 (1) is received at rank 1's index 0; the first
      // rank-0 action after that is 0B0 (3), through 1SEND_B0 -> 0B0. Rank
      // 1's 1SEND_B0 (3) is its last action: held to the step's end, 3.
      // Rank 0 live (post): out0 [0,1] in0 [0,3] st0 [0,3] og0 [2,3] ->
      // 111 111 111 111; bound: out0 [0,3] -> 111 111 211 211.
      // Rank 1: in [0,2] st [1,2] out [1,1] ig [2,3] -> 10 111 21 10 both.
      {"one_microbatch", 1,
       {"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"},
       {{A, 3, A, A}, {A, A, A, 3}},
       {111, 111},
       {211, 111}},
      // Two microbatches, rank 0 sends both forwards first. 0SEND_F0 (1):
      // peer RECV at 0, first after it 0B0 (5, via 1SEND_B0 at 3).
      // 0SEND_F1 (3): peer RECV at 4, first after it 0B1 (7, via 1SEND_B1).
      // 1SEND_B0 (3): peer RECV at 4; rank 1 only learns rank 0's index 3
      // (1F1 <- 0SEND_F1), never 4: step end, 7. 1SEND_B1 (7): 7.
      // Rank 0 post:  111 111 122 122 122 122 111 111 -> 122
      //        bound: out0 [0,5], out1 [2,7] -> 111 111 222 222 322 322 211 211 -> 322
      // Rank 1 post:  10 111 21 10 10 111 21 10 -> 111
      //        bound: ig0 [2,7] -> 10 111 21 10 20 121 31 20 -> 121
      {"two_microbatches", 2,
       {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
        "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1"},
       {{A, 5, A, 7, A, A, A, A}, {A, A, A, 7, A, A, A, 7}},
       {122, 111},
       {322, 121}},
      // A WAIT_SEND is an edge from the peer's RECV: rank 0's
      // 0WAIT_SEND_F0 (2) comes after 1RECV_F0 (0), so 0SEND_F0's hold is 2
      // (its buffer is freed after the WAIT under both models anyway).
      // 0SEND_F1 (4) is received at rank 1's 2; 1SEND_B0 (5) follows it, so
      // 0B0 (6) is the first action after it: hold 6. Rank 1 learns at most
      // rank 0's index 4 (1F1 <- 0SEND_F1), never its RECVs (5, 7): 7, 7.
      // Rank 0 post: in/st0 [0,6] out0 [0,2] og0 [5,6] in/st1 [3,8]
      //   out1 [3,4] og1 [7,8] -> 111 111 111 122 122 122 122 111 111 -> 122
      //   bound: out1 [3,6] -> 5: 222, 6: 222 -> 222.
      // Rank 1: in0 [0,4] st0 [1,4] out0 [1,1] ig0 [4,5] in1 [2,6]
      //   st1 [3,6] out1 [3,3] ig1 [6,7] -> 10 111 21 122 32 21 21 10 -> 122
      //   bound: ig0 [4,7] -> 5: 21, 6: 31, 7: 20 -> 122.
      {"wait_send", 2,
       {"0F0 0SEND_F0 0WAIT_SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
        "1RECV_F0 1F0 1RECV_F1 1F1 1B0 1SEND_B0 1B1 1SEND_B1"},
       {{A, 2, A, A, 6, A, A, A, A}, {A, A, A, A, A, 7, A, 7}},
       {122, 122},
       {222, 122}},
  };
}

class SendCompletionTest : public ::testing::TestWithParam<Case> {};

TEST_P(SendCompletionTest, HoldsAndPeaks) {
  const Case& c = GetParam();
  const Schedule s = LoweredFromText(2, 1, Placement::kLoop, c.microbatches, c.programs);
  const ProgramIndex index = ProgramIndex::Build(s);
  ASSERT_OK_AND_ASSIGN(const HappensBefore order, HappensBefore::Build(s, index));
  PlanOptions post;
  PlanOptions bound;
  bound.send_completion = SendCompletionModel::kReceive;
  ASSERT_OK_AND_ASSIGN(std::vector<RankMemoryPlan> post_plans, PlanMemory(s, Sizes(), post));
  ASSERT_OK_AND_ASSIGN(std::vector<RankMemoryPlan> bound_plans, PlanMemory(s, Sizes(), bound));
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    EXPECT_THAT(order.SendHolds(r), ElementsAreArray(c.holds[r]));
    EXPECT_EQ(post_plans[r].peak.bytes, c.post_peaks[r]);
    EXPECT_EQ(post_plans[r].post_peak.bytes, c.post_peaks[r]);
    EXPECT_EQ(bound_plans[r].peak.bytes, c.bound_peaks[r]);
    EXPECT_EQ(bound_plans[r].post_peak.bytes, c.post_peaks[r]);
    // One rank planned alone agrees with the plan of every rank.
    ASSERT_OK_AND_ASSIGN(RankMemoryPlan alone, PlanRankMemory(s, Sizes(), r, bound));
    EXPECT_EQ(alone.peak.bytes, c.bound_peaks[r]);
    // The runtime still releases on the SEND's completion: send_index stays.
    for (size_t id = 0; id < bound_plans[r].buffers.buffers.size(); ++id) {
      const Buffer& b = bound_plans[r].buffers.buffers[id];
      const Buffer& p = post_plans[r].buffers.buffers[id];
      EXPECT_EQ(b.send_index, p.send_index) << b.ToString();
      if (b.free_timing == FreeTiming::kAfterSend) {
        EXPECT_EQ(p.free_index, p.send_index) << p.ToString();
        EXPECT_EQ(b.free_index, c.holds[r][b.send_index]) << b.ToString();
      } else {
        EXPECT_EQ(b.free_index, p.free_index) << b.ToString();
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(HandBuilt, SendCompletionTest, ::testing::ValuesIn(Cases()),
                         [](const auto& param_info) { return param_info.param.name; });

TEST(SendCompletionModelTest, ParsesItsNames) {
  EXPECT_EQ(*ParseSendCompletionModel("post"), SendCompletionModel::kPost);
  EXPECT_EQ(*ParseSendCompletionModel("receive"), SendCompletionModel::kReceive);
  EXPECT_EQ(SendCompletionModelName(SendCompletionModel::kReceive), "receive");
  const absl::Status bad = ParseSendCompletionModel("rendezvous").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "--send-completion must be post or receive, not \"rendezvous\"");
}

TEST(SendCompletionModelTest, ComputeOnlyIsAPreconditionFailure) {
  Schedule s = LoweredFromText(2, 1, Placement::kLoop, 1, {"0F0 0B0", "1F0 1B0"});
  s.lowered = false;
  const ProgramIndex index = ProgramIndex::Build(s);
  EXPECT_EQ(HappensBefore::Build(s, index).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace jitpipe::send_completion_test
