#include "scheduler/passes/lower_send_recv_early.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/ir/schedule_csv.h"
#include "tests/scheduler/passes/pass_test_util.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::lower_send_recv_early_test {
namespace {

using ::jitpipe::testing::CsvFromJson;
using ::jitpipe::testing::FromRows;
using ::jitpipe::testing::JsonText;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::ProgramText;
using ::jitpipe::testing::PytorchConformanceNames;
using ::jitpipe::testing::ReadTestdataJson;
using ::jitpipe::testing::Rows;
using ::jitpipe::testing::TwoChainsFromRows;

class EarlyConformanceTest : public ::testing::TestWithParam<std::string> {};

// PyTorch's _add_send_recv of every compute order it accepts, exactly. GPipe's
// compute order is the one before _add_reduce_grad; 1F1B's is the order its
// runtime executes (its _get_pipeline_order is off by one on the last rank).
TEST_P(EarlyConformanceTest, EqualsPyTorchsAddSendRecv) {
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/" + GetParam() + ".json");
  if (d.contains("error")) GTEST_SKIP() << "PyTorch refuses these parameters";
  const bool one_f_one_b = d["schedule"] == "1F1B";
  const std::string source = d["schedule"] == "GPipe" ? "ranks_before_reduce_grad"
                             : one_f_one_b            ? "ranks_runtime_equivalent"
                                                      : "ranks";
  const std::string want = one_f_one_b ? "ranks_runtime_equivalent_send_recv"
                                       : "ranks_send_recv_only";
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(CsvFromJson(d[source])));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, LowerSendRecvEarly(s));
  EXPECT_TRUE(lowered.lowered);
  EXPECT_EQ(ProgramText(lowered.ranks), JsonText(d[want]));
}

INSTANTIATE_TEST_SUITE_P(Pytorch, EarlyConformanceTest,
                         ::testing::ValuesIn(PytorchConformanceNames()));

struct Case {
  std::string name;
  std::vector<std::string> in;
  std::vector<std::string> out;
};

class EarlyTextTest : public ::testing::TestWithParam<Case> {};

TEST_P(EarlyTextTest, LowersAsPyTorch) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows(GetParam().in));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, LowerSendRecvEarly(s));
  EXPECT_EQ(Rows(lowered), GetParam().out);
}

INSTANTIATE_TEST_SUITE_P(
    Hand, EarlyTextTest,
    ::testing::Values(
        // The header's example: each RECV lands on the receiver when its sender computes.
        Case{"TwoRanks",
             {"0F0 0F1 0B0 0B1", ". 1F0 1B0 1F1 1B1"},
             {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
              "1RECV_F0 1RECV_F1 1F0 1B0 1SEND_B0 1F1 1B1 1SEND_B1"}},
        // V placement (rank 0: stages 0, 3; rank 1: 1, 2): 1 -> 2 is the turn
        // on rank 1, handed over locally; bubbles cost their round.
        Case{"VTurnIsLocal",
             {"0F0 . . 3F0 3B0 . . 0B0", ". 1F0 2F0 . . 2B0 1B0 ."},
             {"0F0 0SEND_F0 3RECV_F0 3F0 3B0 3SEND_B0 0RECV_B0 0B0",
              "1RECV_F0 1F0 2F0 2SEND_F0 2RECV_B0 2B0 1B0 1SEND_B0"}},
        // A compound is ready when all its sub-actions are; each sub-action's
        // SEND follows it, in sub-action order.
        Case{"OverlapSendsPerSubAction",
             {"0F0 3F0 (0F1;3B0)OVERLAP_F_B 3F1 3B1 0B0 0B1",
              "1F0 2F0 1F1 2B0 2F1 1B0 2B1 1B1"},
             {"0F0 0SEND_F0 3RECV_F0 3F0 (0F1;3B0)OVERLAP_F_B 0SEND_F1 3SEND_B0 3RECV_F1 3F1 "
              "0RECV_B0 3B1 3SEND_B1 0B0 0RECV_B1 0B1",
              "1RECV_F0 1F0 2F0 2SEND_F0 1RECV_F1 2RECV_B0 1F1 2B0 2F1 2SEND_F1 1B0 1SEND_B0 "
              "2RECV_B1 2B1 1B1 1SEND_B1"}},
        // One rank: nothing to send; only the bubbles go.
        Case{"OneRankDoesNothing", {"0F0 . 1F0 1B0 . 0B0"}, {"0F0 1F0 1B0 0B0"}},
        // W never communicates.
        Case{"WeightBackwardSendsNothing",
             {"0F0 . . 0I0 0W0", ". 1F0 1I0 1W0"},
             {"0F0 0SEND_F0 0RECV_B0 0I0 0W0", "1RECV_F0 1F0 1I0 1SEND_B0 1W0"}}),
    [](const ::testing::TestParamInfo<Case>& param) { return param.param.name; });

// Two chains over two ranks, as DualPipe runs them: chain 0 is stages 0 -> 1
// (rank 0 -> rank 1), chain 1 is stages 2 -> 3 (rank 1 -> rank 0). Stage 1
// ends chain 0 and sends nothing to stage 2; stage 2 starts chain 1 and
// receives nothing.
TEST(LowerSendRecvEarlyTest, ChainsEndOnTheirOwn) {
  ASSERT_OK_AND_ASSIGN(Schedule s, TwoChainsFromRows({"0F0 3F0 3B0 0B0", "2F0 1F0 1B0 2B0"}));
  ASSERT_EQ(s.chains, 2);
  ASSERT_OK_AND_ASSIGN(Schedule lowered, LowerSendRecvEarly(s));
  EXPECT_EQ(Rows(lowered),
            (std::vector<std::string>{"0F0 0SEND_F0 3RECV_F0 3F0 3B0 3SEND_B0 0RECV_B0 0B0",
                                      "1RECV_F0 2F0 2SEND_F0 1F0 2RECV_B0 1B0 1SEND_B0 2B0"}));
}

TEST(LowerSendRecvEarlyTest, CyclicWaitNamesEveryStuckRank) {
  // Rank 0 needs 1B0 before it sends F1; rank 1 needs F1 before it runs 1B0.
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0B0 0F1 0B1", "1F1 1B1 1F0 1B0"}));
  absl::StatusOr<Schedule> lowered = LowerSendRecvEarly(s);
  EXPECT_EQ(lowered.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(lowered),
            "no rank can make progress (a cyclic wait; PyTorch: \"Malformed compute schedule, "
            "can't schedule sends/recvs\"): rank 0, index 1 (0B0) waits for 0RECV_B0 from rank "
            "1; rank 1, index 0 (1F1) waits for 1RECV_F1 from rank 0");
}

TEST(LowerSendRecvEarlyTest, CyclicWaitOnTheSameRankNamesTheLocalAction) {
  // Stage 1 needs stage 0's forward, which comes later on the same rank.
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"1F0 0F0 0B0 1B0"}));
  EXPECT_EQ(Message(LowerSendRecvEarly(s)),
            "no rank can make progress (a cyclic wait; PyTorch: \"Malformed compute schedule, "
            "can't schedule sends/recvs\"): rank 0, index 0 (1F0) waits for 0F0 on this rank");
}

TEST(LowerSendRecvEarlyTest, RefusesSendsInTheInput) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0SEND_F0 0B0", "1RECV_F0 1F0 1B0"}));
  absl::StatusOr<Schedule> lowered = LowerSendRecvEarly(s);
  EXPECT_EQ(lowered.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Message(lowered),
            "rank 0, index 1 (0SEND_F0): expected a program without sends and receives");
}

TEST(LowerSendRecvEarlyTest, RefusesAStageOnTheWrongRank) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0B0", "1F0 1B0"}));
  s.ranks[0].push_back(Action::Make(ActionKind::kForward, 1, 0));
  absl::StatusOr<Schedule> lowered = LowerSendRecvEarly(s);
  EXPECT_EQ(lowered.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(lowered), "rank 0, index 2 (1F0): stage 1 lives on rank 1, not on this rank");
}

}  // namespace
}  // namespace jitpipe::lower_send_recv_early_test
