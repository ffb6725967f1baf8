#include "scheduler/execution/lock_step.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/ir/schedule_csv.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::lock_step_test {
namespace {

using ::jitpipe::testing::CsvFromJson;
using ::jitpipe::testing::JsonText;
using ::jitpipe::testing::ProgramText;
using ::jitpipe::testing::PytorchConformanceNames;
using ::jitpipe::testing::ReadTestdataJson;

class LockStepConformanceTest : public ::testing::TestWithParam<std::string> {};

// PyTorch's _simulate_comms_compute of its own send/recv lowering, step for
// step: the blocking-receive replay gives the very same grid.
TEST_P(LockStepConformanceTest, ReproducesPytorchsDryRun) {
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/" + GetParam() + ".json");
  int checked = 0;
  for (auto [program, simulated] :
       {std::pair{"ranks_send_recv_only", "simulated_send_recv"},
        std::pair{"ranks_runtime_equivalent_send_recv", "simulated_runtime_equivalent_send_recv"}}) {
    if (!d.contains(simulated)) continue;
    ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(CsvFromJson(d[program])));
    ASSERT_OK_AND_ASSIGN(CommPositions positions, MatchSendRecv(s));
    LockStepReplay replay = ReplayLockStep(s, positions, WaitModel::kBlockingRecv);
    EXPECT_FALSE(replay.deadlocked()) << program;
    EXPECT_EQ(ProgramText(replay.steps), JsonText(d[simulated])) << program;
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no dry run in this file";
}

INSTANTIATE_TEST_SUITE_P(Pytorch, LockStepConformanceTest,
                         ::testing::ValuesIn(PytorchConformanceNames()));

absl::StatusOr<LockStepReplay> Replay(const std::string& csv, WaitModel model) {
  absl::StatusOr<Schedule> s = ParseScheduleCsv(csv);
  if (!s.ok()) return s.status();
  absl::StatusOr<CommPositions> positions = MatchSendRecv(*s);
  if (!positions.ok()) return positions.status();
  return ReplayLockStep(*s, *positions, model);
}

// Two ranks that each SEND before they RECV: the three models differ.
constexpr char kCrossing[] =
    "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
    "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n";

TEST(LockStepTest, RelaxedSemanticsLetTheComputeWaitInsteadOfTheReceive) {
  ASSERT_OK_AND_ASSIGN(LockStepReplay replay, Replay(kCrossing, WaitModel::kRelaxed));
  EXPECT_FALSE(replay.deadlocked());
  EXPECT_EQ(replay.stuck_at, (std::vector<int32_t>{kAbsent, kAbsent}));
  // 1F0 runs in step 1 because rank 0 posted 0SEND_F0 earlier in that step;
  // 0B1 runs in step 7 on the second try, after rank 1 posted 1SEND_B1.
  EXPECT_EQ(ProgramText(replay.steps),
            (std::vector<std::vector<std::string>>{
                {"0F0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B0", "0B0", "0RECV_B1", "0B1"},
                {"1RECV_F0", "1F0", "1B0", "1SEND_B0", "1RECV_F1", "1F1", "1B1", "1SEND_B1"}}));
  EXPECT_EQ(replay.num_steps(), 8);
}

TEST(LockStepTest, BlockingReceiveWaitsAtTheReceive) {
  ASSERT_OK_AND_ASSIGN(LockStepReplay replay, Replay(kCrossing, WaitModel::kBlockingRecv));
  EXPECT_FALSE(replay.deadlocked());
  EXPECT_EQ(ProgramText(replay.steps),
            (std::vector<std::vector<std::string>>{
                {"0F0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B0", "0B0", "", "", "0RECV_B1",
                 "0B1"},
                {"", "1RECV_F0", "1F0", "1B0", "1SEND_B0", "1RECV_F1", "1F1", "1B1",
                 "1SEND_B1"}}));
}

TEST(LockStepTest, StrictSemanticsStopWhereBothRanksSend) {
  ASSERT_OK_AND_ASSIGN(LockStepReplay replay, Replay(kCrossing, WaitModel::kStrict));
  EXPECT_TRUE(replay.deadlocked());
  EXPECT_EQ(replay.stuck_at, (std::vector<int32_t>{3, 3}));
  EXPECT_EQ(ProgramText(replay.steps),
            (std::vector<std::vector<std::string>>{{"0F0", "0SEND_F0", "0F1"},
                                                   {"1RECV_F0", "1F0", "1B0"}}));
}

TEST(LockStepTest, StuckGridAppendsTheRowOfStuckActions) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(kCrossing));
  ASSERT_OK_AND_ASSIGN(CommPositions positions, MatchSendRecv(s));
  LockStepReplay replay = ReplayLockStep(s, positions, WaitModel::kStrict);
  EXPECT_EQ(FormatStuckGrid(s, replay, 40),
            "        Rank 0   Rank 1  \n"
            "Step 0: 0F0      1RECV_F0\n"
            "Step 1: 0SEND_F0 1F0     \n"
            "Step 2: 0F1      1B0     \n"
            "Step 3: 0SEND_F1 1SEND_B0 <-- ERROR HERE\n");
  EXPECT_EQ(FormatStuckGrid(s, replay, 2),
            "        Rank 0   Rank 1  \n"
            "  (steps 0-1 not shown)\n"
            "Step 2: 0F1      1B0     \n"
            "Step 3: 0SEND_F1 1SEND_B0 <-- ERROR HERE\n");
}

}  // namespace
}  // namespace jitpipe::lock_step_test
