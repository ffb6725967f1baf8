#include "scheduler/analysis/validate.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/ir/schedule_csv.h"
#include "scheduler/analysis/grid_report.h"
#include "scheduler/passes/lower.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::validate_test {
namespace {

using ::jitpipe::testing::CsvFromJson;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::PytorchConformanceNames;
using ::jitpipe::testing::ReadTestdata;
using ::jitpipe::testing::ReadTestdataJson;

constexpr ValidateOptions kStrict{.semantics = CommSemantics::kStrict};

// A lowered program with one transfer each way: pp 2, one microbatch.
constexpr char kSimple[] =
    "0F0,0SEND_F0,0RECV_B0,0B0\n"
    "1RECV_F0,1F0,1B0,1SEND_B0\n";

TEST(ValidateTest, AcceptsAMatchedProgramUnderBothSemantics) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(kSimple));
  EXPECT_OK(Validate(s));
  EXPECT_OK(Validate(s, kStrict));
}

TEST(ValidateTest, ComputeOnlyGetsTheStructureCheck) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv("0F0,0B0\n1F0,1B0\n"));
  EXPECT_FALSE(s.lowered);
  EXPECT_OK(Validate(s));
  ASSERT_OK_AND_ASSIGN(Schedule bad, ParseScheduleCsv("0F0,0B0\n1B0,1F0\n"));
  EXPECT_EQ(Message(Validate(bad)),
            "rank 1, index 0 (1B0): full backward of stage 1 microbatch 0 comes before its "
            "forward");
}

// Rank 1 receives F1 before F0, which rank 0 sends in the other order.
constexpr char kOutOfPairOrder[] =
    "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
    "1RECV_F1,1RECV_F0,1F0,1F1,1B0,1SEND_B0,1B1,1SEND_B1\n";

struct BadProgram {
  std::string name;
  std::string csv;
  CommSemantics semantics;
  std::string error;
};

class ValidateErrorTest : public ::testing::TestWithParam<BadProgram> {};

TEST_P(ValidateErrorTest, ExactMessage) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(GetParam().csv));
  ASSERT_TRUE(s.lowered);
  absl::Status status = Validate(s, {.semantics = GetParam().semantics});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(status), GetParam().error);
  EXPECT_TRUE(GridOf(status).has_value());
}

INSTANTIATE_TEST_SUITE_P(
    Bad, ValidateErrorTest,
    ::testing::Values(
        // Each rank SENDs to the other before it RECVs: fine when a SEND is
        // posted and the rank moves on, a hang when it waits for its RECV.
        BadProgram{"CrossingSendsUnderStrict",
                   "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
                   "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n",
                   CommSemantics::kStrict,
                   "deadlock under strict rendezvous semantics: wait cycle 0 -> 1 -> 0: "
                   "rank 0 at index 3 (0SEND_F1) waits for rank 1 to post 1RECV_F1 (index 4); "
                   "rank 1 at index 3 (1SEND_B0) waits for rank 0 to post 0RECV_B0 (index 4)"},
        // Rank 0 sends its activation only after the backward that needs
        // rank 1's gradient, which rank 1 computes from that activation.
        BadProgram{"RecvWhoseSendNeverComes",
                   "0F0,0RECV_B0,0B0,0SEND_F0\n"
                   "1RECV_F0,1F0,1B0,1SEND_B0\n",
                   CommSemantics::kRelaxed,
                   "deadlock under relaxed semantics: wait cycle 0 -> 1 -> 0: "
                   "rank 0 at index 2 (0B0) waits for rank 1 to post 1SEND_B0 (index 3); "
                   "rank 1 at index 1 (1F0) waits for rank 0 to post 0SEND_F0 (index 3)"},
        // pp 3, v 2, loop: rank 0 runs 3F0 before sending 0F0's output.
        BadProgram{"ThreeRankCycle",
                   "0F0,3RECV_F0,3F0,0SEND_F0,3SEND_F0,3RECV_B0,3B0,3SEND_B0,0RECV_B0,0B0\n"
                   "1RECV_F0,1F0,1SEND_F0,4RECV_F0,4F0,4SEND_F0,4RECV_B0,4B0,4SEND_B0,1RECV_B0,"
                   "1B0,1SEND_B0\n"
                   "2RECV_F0,2F0,2SEND_F0,5RECV_F0,5F0,5B0,5SEND_B0,2RECV_B0,2B0,2SEND_B0\n",
                   CommSemantics::kRelaxed,
                   "deadlock under relaxed semantics: wait cycle 0 -> 2 -> 1 -> 0: "
                   "rank 0 at index 2 (3F0) waits for rank 2 to post 2SEND_F0 (index 2); "
                   "rank 2 at index 1 (2F0) waits for rank 1 to post 1SEND_F0 (index 2); "
                   "rank 1 at index 1 (1F0) waits for rank 0 to post 0SEND_F0 (index 3)"},
        // Ranks 0 and 1 deadlock; rank 2 waits behind them.
        BadProgram{"RankStuckBehindTheCycle",
                   "0F0,0RECV_B0,0B0,0SEND_F0\n"
                   "1RECV_F0,1F0,1SEND_F0,1RECV_B0,1B0,1SEND_B0\n"
                   "2RECV_F0,2F0,2B0,2SEND_B0\n",
                   CommSemantics::kRelaxed,
                   "deadlock under relaxed semantics: wait cycle 0 -> 1 -> 0: "
                   "rank 0 at index 2 (0B0) waits for rank 1 to post 1SEND_B0 (index 5); "
                   "rank 1 at index 1 (1F0) waits for rank 0 to post 0SEND_F0 (index 3); "
                   "also stuck: rank 2 at index 1 (2F0) waits for rank 1 to post 1SEND_F0 "
                   "(index 2)"},
        // Ordered transports match rank 0's F0 with rank 1's first RECV
        // (PerPairOrderIsNoRuleUnderRelaxedSemantics has the same program).
        BadProgram{"WrongPerPairOrderUnderStrict",
                   kOutOfPairOrder,
                   CommSemantics::kStrict,
                   "rank 1, index 0 (1RECV_F1): out of order with rank 0: rank 0 sends 0SEND_F0 "
                   "(index 1) before 0SEND_F1 (index 3), but this rank receives 1RECV_F1 before "
                   "1RECV_F0 (index 1); under strict rendezvous semantics sends and receives "
                   "between two ranks match in posting order"},
        BadProgram{"SendWithoutRecv",
                   "0F0,0SEND_F0,0RECV_B0,0B0\n"
                   "1F0,1B0,1SEND_B0\n",
                   CommSemantics::kRelaxed,
                   "rank 0, index 1 (0SEND_F0): no matching 1RECV_F0 on rank 1"},
        BadProgram{"RecvWithoutSend",
                   "0F0,0RECV_B0,0B0\n"
                   "1RECV_F0,1F0,1B0,1SEND_B0\n",
                   CommSemantics::kRelaxed,
                   "rank 1, index 0 (1RECV_F0): no matching 0SEND_F0 on rank 0"},
        // V placement, pp 2: rank 1 holds stages 1 and 2.
        BadProgram{"CommBetweenColocatedStages",
                   "0F0,0SEND_F0,3RECV_F0,3F0,3B0,3SEND_B0,0RECV_B0,0B0\n"
                   "1RECV_F0,1F0,1SEND_F0,2RECV_F0,2F0,2SEND_F0,2RECV_B0,2B0,2SEND_B0,1B0,"
                   "1SEND_B0\n",
                   CommSemantics::kRelaxed,
                   "rank 1, index 2 (1SEND_F0): stages 1 and 2 are both on rank 1; the V turn "
                   "hands over locally, without SEND/RECV"},
        BadProgram{"RecvAfterItsConsumer",
                   "0F0,0SEND_F0,0RECV_B0,0B0\n"
                   "1F0,1RECV_F0,1B0,1SEND_B0\n",
                   CommSemantics::kRelaxed,
                   "rank 1, index 0 (1F0): needs 1RECV_F0 earlier in this rank's program; it is "
                   "at index 1"},
        BadProgram{"NoRecvForAConsumer",
                   "0F0,0RECV_B0,0B0\n"
                   "1F0,1B0,1SEND_B0\n",
                   CommSemantics::kRelaxed,
                   "rank 1, index 0 (1F0): needs 1RECV_F0 earlier in this rank's program (stage "
                   "0 is on rank 0)"},
        BadProgram{"SendFromAChainsLastStage",
                   "0F0,0SEND_F0,0RECV_B0,0B0\n"
                   "1RECV_F0,1F0,1SEND_F0,1B0,1SEND_B0\n",
                   CommSemantics::kRelaxed,
                   "rank 1, index 2 (1SEND_F0): stage 1 is the last stage of its chain; it has "
                   "no next stage to send to"},
        BadProgram{"RecvBackwardAtAChainsLastStage",
                   "0F0,0SEND_F0,0RECV_B0,0B0\n"
                   "1RECV_F0,1F0,1RECV_B0,1B0,1SEND_B0\n",
                   CommSemantics::kRelaxed,
                   "rank 1, index 2 (1RECV_B0): stage 1 is the last stage of its chain; it has "
                   "no next stage to receive from"},
        BadProgram{"SendBackwardFromAChainsFirstStage",
                   "0F0,0SEND_F0,0RECV_B0,0B0,0SEND_B0\n"
                   "1RECV_F0,1F0,1B0,1SEND_B0\n",
                   CommSemantics::kRelaxed,
                   "rank 0, index 4 (0SEND_B0): stage 0 is the first stage of its chain; it has "
                   "no previous stage to send to"},
        BadProgram{"DuplicateSend",
                   "0F0,0SEND_F0,0SEND_F0,0RECV_B0,0B0\n"
                   "1RECV_F0,1F0,1B0,1SEND_B0\n",
                   CommSemantics::kRelaxed,
                   "rank 0, index 2 (0SEND_F0): a second 0SEND_F0; the first is at index 1"},
        BadProgram{"SendBeforeItsProducer",
                   "0SEND_F0,0F0,0RECV_B0,0B0\n"
                   "1RECV_F0,1F0,1B0,1SEND_B0\n",
                   CommSemantics::kRelaxed,
                   "rank 0, index 0 (0SEND_F0): its data is produced later, at index 1 (0F0)"},
        BadProgram{"GradientSentBeforeItsInputBackward",
                   "0F0,0SEND_F0,0RECV_B0,0I0,0W0\n"
                   "1RECV_F0,1F0,1SEND_B0,1I0,1W0\n",
                   CommSemantics::kRelaxed,
                   "rank 1, index 2 (1SEND_B0): its data is produced later, at index 3 (1I0)"},
        // V placement, pp 2: 2F0 takes 1F0's output on the same rank.
        BadProgram{"VTurnConsumerBeforeItsProducer",
                   "0F0,0SEND_F0,3RECV_F0,3F0,3B0,3SEND_B0,0RECV_B0,0B0\n"
                   "1RECV_F0,2F0,1F0,2SEND_F0,2RECV_B0,2B0,1B0,1SEND_B0\n",
                   CommSemantics::kRelaxed,
                   "rank 1, index 1 (2F0): needs 1F0 earlier on this rank (stages 1 and 2 are "
                   "both on rank 1); it is at index 2"}),
    [](const ::testing::TestParamInfo<BadProgram>& param) { return param.param.name; });

TEST(ValidateTest, CrossingSendsPassUnderRelaxedSemantics) {
  ASSERT_OK_AND_ASSIGN(Schedule s,
                       ParseScheduleCsv("0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
                                        "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n"));
  EXPECT_OK(Validate(s));
  EXPECT_FALSE(Validate(s, kStrict).ok());
}

// Transports that match by tag (jitpipe's, PyTorch's runtime) take the
// RECVs from one peer in any order.
TEST(ValidateTest, PerPairOrderIsNoRuleUnderRelaxedSemantics) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(kOutOfPairOrder));
  EXPECT_OK(Validate(s));
  EXPECT_FALSE(Validate(s, kStrict).ok());
}

TEST(ValidateTest, PairOrderIsCheckedBeforeTheStrictDeadlock) {
  // Out of pair order (rank 0 receives B1 first) and, under strict
  // semantics, also crossing SENDs: the order error is what is reported.
  ASSERT_OK_AND_ASSIGN(Schedule s,
                       ParseScheduleCsv("0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B1,0RECV_B0,0B0,0B1\n"
                                        "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n"));
  EXPECT_OK(Validate(s));
  EXPECT_EQ(Message(Validate(s, kStrict)),
            "rank 0, index 4 (0RECV_B1): out of order with rank 1: rank 1 sends 1SEND_B0 "
            "(index 3) before 1SEND_B1 (index 7), but this rank receives 0RECV_B1 before "
            "0RECV_B0 (index 5); under strict rendezvous semantics sends and receives between "
            "two ranks match in posting order");
}

// Over FIFO communicators a pair of ranks' operations match in posting
// order too (NCCL), then the FIFO deadlock check runs (comm_fifo.h).
TEST(ValidateTest, CommunicatorsNeedPairOrderThenNoFifoCycle) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(kOutOfPairOrder));
  EXPECT_OK(Validate(s));
  const absl::Status per_edge = Validate(s, {.comms = CommLayout::kPerEdge});
  EXPECT_THAT(Message(per_edge), ::testing::EndsWith(
                                     "; on NCCL communicators a pair of ranks' sends and "
                                     "receives match in posting order"));
  ASSERT_OK_AND_ASSIGN(Schedule cycle,
                       ParseScheduleCsv("0F0,0SEND_F0,0F1,0RECV_B0,0SEND_F1,0B0,0RECV_B1,0B1\n"
                                        "1RECV_F0,1F0,1B0,1RECV_F1,1SEND_B0,1F1,1B1,1SEND_B1\n"));
  EXPECT_OK(Validate(cycle, {.comms = CommLayout::kPerEdge}));
  EXPECT_THAT(Message(Validate(cycle, {.comms = CommLayout::kPerGroup})),
              ::testing::StartsWith("deadlock under FIFO completion on one communicator for "
                                    "the pipeline group: wait cycle 0 -> 1 -> 0: "));
}

TEST(ValidateTest, DeadlockGridEndsInTheRowOfStuckActions) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv("0F0,0RECV_B0,0B0,0SEND_F0\n"
                                                    "1RECV_F0,1F0,1B0,1SEND_B0\n"));
  absl::Status status = Validate(s);
  ASSERT_TRUE(GridOf(status).has_value());
  EXPECT_EQ(*GridOf(status),
            "        Rank 0   Rank 1  \n"
            "Step 0: 0F0      1RECV_F0\n"
            "Step 1: 0RECV_B0         \n"
            "Step 2: 0B0      1F0      <-- ERROR HERE\n");
}

TEST(ValidateTest, MatchingErrorGridMarksTheFailingIndex) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv("0F0,0SEND_F0,0RECV_B0,0B0\n"
                                                    "1F0,1B0,1SEND_B0\n"));
  absl::Status status = Validate(s);
  ASSERT_TRUE(GridOf(status).has_value());
  EXPECT_EQ(*GridOf(status),
            "        Rank 0   Rank 1  \n"
            "Step 0: 0F0      1F0     \n"
            "Step 1: 0SEND_F0 1B0      <-- ERROR HERE\n"
            "Step 2: 0RECV_B0 1SEND_B0\n"
            "Step 3: 0B0              \n");
  EXPECT_FALSE(GridOf(Validate(s, {.grid_rows = 0})).has_value());
}

// PyTorch's own lowerings (early receives: each RECV placed when its SEND
// is) run under PyTorch's runtime semantics; whether they also survive a
// rendezvous transport is recorded, not assumed.
class ValidateConformanceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ValidateConformanceTest, PytorchLoweringsAreDeadlockFree) {
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/" + GetParam() + ".json");
  int checked = 0;
  for (const char* key :
       {"ranks_with_comms", "ranks_send_recv_only", "ranks_runtime_equivalent_send_recv"}) {
    if (!d.contains(key)) continue;
    ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(CsvFromJson(d[key])));
    ASSERT_TRUE(s.lowered) << key;
    EXPECT_OK(Validate(s)) << key;
    EXPECT_OK(Validate(s, kStrict)) << key;
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no lowering in this file";
}

// PyTorch's compute orders lowered by Lower(): with early receives
// (PyTorch's own placement) and with receives just in time (the default)
// they run under relaxed semantics; with --recv jit-rendezvous under strict
// semantics too.
TEST_P(ValidateConformanceTest, LoweredComputeOrdersAreDeadlockFree) {
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/" + GetParam() + ".json");
  if (d.contains("error")) GTEST_SKIP() << "PyTorch refuses these parameters";
  const std::string source = d["schedule"] == "GPipe" ? "ranks_before_reduce_grad"
                             : d["schedule"] == "1F1B" ? "ranks_runtime_equivalent"
                                                       : "ranks";
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(CsvFromJson(d[source])));
  ASSERT_OK_AND_ASSIGN(Schedule jit, Lower(s));
  EXPECT_OK(Validate(jit));
  ASSERT_OK_AND_ASSIGN(Schedule rendezvous, Lower(s, {.recv = RecvPlacement::kJitRendezvous}));
  EXPECT_OK(Validate(rendezvous));
  EXPECT_OK(Validate(rendezvous, kStrict));
  ASSERT_OK_AND_ASSIGN(Schedule early, Lower(s, {.recv = RecvPlacement::kEarly}));
  EXPECT_OK(Validate(early));
}

INSTANTIATE_TEST_SUITE_P(Pytorch, ValidateConformanceTest,
                         ::testing::ValuesIn(PytorchConformanceNames()));

// torchtitan's example leaves out RESHARD for stages 0 and 1, as PyTorch's
// runtime allows; RESHARD never blocks, so that is no error. Its ranks send
// to each other before receiving (0SEND_F1 before 2RECV_F0 on rank 0,
// 1SEND_F0 before 1RECV_F1 on rank 1): it needs the relaxed model.
TEST(ValidateTest, TorchtitanLoweredExampleNeedsRelaxedSemantics) {
  ASSERT_OK_AND_ASSIGN(Schedule s,
                       ParseScheduleCsv(ReadTestdata("conformance/real/torchtitan_example.csv")));
  ASSERT_TRUE(s.lowered);
  EXPECT_OK(Validate(s));
  EXPECT_EQ(Message(Validate(s, kStrict)),
            "deadlock under strict rendezvous semantics: wait cycle 0 -> 1 -> 0: rank 0 at index "
            "5 (0SEND_F1) waits for rank 1 to post 1RECV_F1 (index 5); rank 1 at index 4 "
            "(1SEND_F0) waits for rank 0 to post 2RECV_F0 (index 6)");
}

TEST(ValidateTest, RealComputeOnlyFilesValidateAfterLowering) {
  for (const char* file : {"torchtitan_4-rank.csv", "dualpipev_4rank_10mb.csv",
                           "zb1p_2rank_2stagep_compute.csv"}) {
    ASSERT_OK_AND_ASSIGN(Schedule s,
                         ParseScheduleCsv(ReadTestdata(std::string("conformance/real/") + file),
                                          CsvReadOptions{.legacy_backward_names = true}));
    ASSERT_FALSE(s.lowered) << file;
    EXPECT_OK(Validate(s)) << file;
    ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(s));
    EXPECT_OK(Validate(lowered)) << file;
    ASSERT_OK_AND_ASSIGN(Schedule rendezvous,
                         Lower(s, {.recv = RecvPlacement::kJitRendezvous}));
    EXPECT_OK(Validate(rendezvous, kStrict)) << file;
  }
}

}  // namespace
}  // namespace jitpipe::validate_test
