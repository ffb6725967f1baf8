#include "scheduler/execution/deadlock.h"

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "scheduler/ir/schedule_csv.h"
#include "scheduler/analysis/grid_report.h"
#include "scheduler/execution/lock_step.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::deadlock_test {
namespace {

using ::jitpipe::testing::CsvFromJson;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::PytorchConformanceNames;
using ::jitpipe::testing::ReadTestdataJson;

constexpr WaitModel kModels[] = {WaitModel::kRelaxed, WaitModel::kStrict,
                                 WaitModel::kBlockingRecv};

// GPipe lowered by hand on pp ranks: all forwards, then all backwards, each
// receive just before its consumer and each send right after its producer.
Schedule LoweredGpipe(int pp, int microbatches) {
  Schedule s;
  s.pp = pp;
  s.stages_per_rank = 1;
  s.microbatches = microbatches;
  s.placement = Placement::kLoop;
  s.stage_to_rank = StageToRank(Placement::kLoop, pp, 1);
  s.lowered = true;
  s.ranks.resize(pp);
  // Index spaces: rank r = stage r; microbatch m; forward then backward.
  for (int r = 0; r < pp; ++r) {
    RankProgram& p = s.ranks[r];
    for (int m = 0; m < microbatches; ++m) {
      if (r > 0) p.push_back(Action::Make(ActionKind::kRecvF, r, m));
      p.push_back(Action::Make(ActionKind::kForward, r, m));
      if (r < pp - 1) p.push_back(Action::Make(ActionKind::kSendF, r, m));
    }
    for (int m = 0; m < microbatches; ++m) {
      if (r < pp - 1) p.push_back(Action::Make(ActionKind::kRecvB, r, m));
      p.push_back(Action::Make(ActionKind::kBackward, r, m));
      if (r > 0) p.push_back(Action::Make(ActionKind::kSendB, r, m));
    }
  }
  return s;
}

absl::Status Check(const Schedule& s, WaitModel model, int grid_rows = 0) {
  absl::StatusOr<CommPositions> positions = MatchSendRecv(s);
  if (!positions.ok()) return positions.status();
  return CheckDeadlockFree(s, *positions, model, grid_rows);
}

TEST(DeadlockTest, BigGpipeRunsUnderEveryModel) {
  const Schedule s = LoweredGpipe(16, 256);
  for (WaitModel model : kModels) EXPECT_OK(Check(s, model)) << WaitModelName(model);
}

TEST(DeadlockTest, LateSendNamesTheCycleFarIntoTheProgram) {
  // Rank 7 sends its last activation only after all its backwards: ranks 7
  // and 8 wait for each other; the other ranks wait behind them.
  Schedule s = LoweredGpipe(10, 64);
  RankProgram& p = s.ranks[7];
  // Rank 7: 64 x (RECV_F, F, SEND_F), then 64 x (RECV_B, B, SEND_B).
  const Action late_send = p[3 * 63 + 2];
  ASSERT_EQ(late_send.ToString(), "7SEND_F63");
  p.erase(p.begin() + 3 * 63 + 2);
  p.insert(p.end() - 1, late_send);  // between 7B63 and 7SEND_B63
  EXPECT_EQ(Message(Check(s, WaitModel::kRelaxed)),
            "deadlock under relaxed semantics: wait cycle 7 -> 8 -> 7: "
            "rank 7 at index 192 (7B0) waits for rank 8 to post 8SEND_B0 (index 194); "
            "rank 8 at index 190 (8F63) waits for rank 7 to post 7SEND_F63 (index 382); "
            "also stuck: "
            "rank 0 at index 129 (0B0) waits for rank 1 to post 1SEND_B0 (index 194); "
            "rank 1 at index 193 (1B0) waits for rank 2 to post 2SEND_B0 (index 194); "
            "rank 2 at index 193 (2B0) waits for rank 3 to post 3SEND_B0 (index 194); "
            "rank 3 at index 193 (3B0) waits for rank 4 to post 4SEND_B0 (index 194); "
            "rank 4 at index 193 (4B0) waits for rank 5 to post 5SEND_B0 (index 194); "
            "rank 5 at index 193 (5B0) waits for rank 6 to post 6SEND_B0 (index 194); "
            "rank 6 at index 193 (6B0) waits for rank 7 to post 7SEND_B0 (index 193); "
            "rank 9 at index 127 (9F63) waits for rank 8 to post 8SEND_F63 (index 191)");
}

TEST(DeadlockTest, EarlyReceiveBeforeSendHangsOnlyWhenReceivesBlock) {
  // Rank 0 posts 0RECV_B0 before 0SEND_F0; under relaxed semantics the
  // receive does not block, so rank 1 gets its activation.
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv("0F0,0RECV_B0,0SEND_F0,0B0\n"
                                                    "1RECV_F0,1F0,1B0,1SEND_B0\n"));
  EXPECT_OK(Check(s, WaitModel::kRelaxed));
  EXPECT_EQ(Message(Check(s, WaitModel::kBlockingRecv)),
            "deadlock under blocking-receive semantics: wait cycle 0 -> 1 -> 0: "
            "rank 0 at index 1 (0RECV_B0) waits for rank 1 to post 1SEND_B0 (index 3); "
            "rank 1 at index 0 (1RECV_F0) waits for rank 0 to post 0SEND_F0 (index 2)");
  EXPECT_EQ(Message(Check(s, WaitModel::kStrict)),
            "deadlock under strict rendezvous semantics: wait cycle 0 -> 1 -> 0: "
            "rank 0 at index 1 (0RECV_B0) waits for rank 1 to post 1SEND_B0 (index 3); "
            "rank 1 at index 0 (1RECV_F0) waits for rank 0 to post 0SEND_F0 (index 2)");
}

TEST(DeadlockTest, GridIsTheLockStepReplay) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv("0F0,0RECV_B0,0SEND_F0,0B0\n"
                                                    "1RECV_F0,1F0,1B0,1SEND_B0\n"));
  EXPECT_FALSE(GridOf(Check(s, WaitModel::kStrict)).has_value());
  absl::Status status = Check(s, WaitModel::kStrict, 40);
  ASSERT_TRUE(GridOf(status).has_value());
  ASSERT_OK_AND_ASSIGN(CommPositions positions, MatchSendRecv(s));
  EXPECT_EQ(*GridOf(status),
            FormatStuckGrid(s, ReplayLockStep(s, positions, WaitModel::kStrict), 40));
}

// The O(actions) detector and the lock-step replay run the same rules, so
// they agree on which programs finish and where the others get stuck: for
// PyTorch's lowerings, and for those programs with random adjacent actions
// swapped (kept when matching still holds; many of them hang).
class DeadlockAgreesWithLockStepTest : public ::testing::TestWithParam<std::string> {};

void ExpectAgreement(const Schedule& s, const CommPositions& positions, WaitModel model,
                     int& deadlocks) {
  const absl::Status status = CheckDeadlockFree(s, positions, model);
  const LockStepReplay replay = ReplayLockStep(s, positions, model);
  ASSERT_EQ(status.ok(), !replay.deadlocked()) << WaitModelName(model) << ": " << status;
  if (status.ok()) return;
  ++deadlocks;
  for (int r = 0; r < s.pp; ++r) {
    const std::string stuck = absl::StrCat("rank ", r, " at index ", replay.stuck_at[r], " (");
    EXPECT_EQ(Message(status).find(stuck) != std::string::npos, replay.stuck_at[r] != kAbsent)
        << Message(status) << " / rank " << r << " stuck at " << replay.stuck_at[r];
  }
}

TEST_P(DeadlockAgreesWithLockStepTest, UnderEveryModel) {
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/" + GetParam() + ".json");
  if (!d.contains("ranks_send_recv_only")) GTEST_SKIP() << "no lowering in this file";
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(CsvFromJson(d["ranks_send_recv_only"])));
  ASSERT_OK_AND_ASSIGN(CommPositions positions, MatchSendRecv(s));
  int deadlocks = 0;
  for (WaitModel model : kModels) ExpectAgreement(s, positions, model, deadlocks);
  EXPECT_EQ(deadlocks, 0);

  std::mt19937 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    Schedule mutant = s;
    for (int swap = 0; swap <= trial % 2; ++swap) {
      RankProgram& p = mutant.ranks[rng() % mutant.pp];
      if (p.size() < 2) continue;
      const size_t i = rng() % (p.size() - 1);
      std::swap(p[i], p[i + 1]);
    }
    absl::StatusOr<CommPositions> mutant_positions = MatchSendRecv(mutant);
    if (!mutant_positions.ok()) continue;  // the swap broke matching
    for (WaitModel model : kModels) ExpectAgreement(mutant, *mutant_positions, model, deadlocks);
  }
}

// Such mutations do produce hangs, so the agreement above is not only about
// programs that finish.
TEST(DeadlockTest, MutationsOfInterleavedLoweringHang) {
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/Interleaved1F1B_pp4_mb8_v2.json");
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(CsvFromJson(d["ranks_send_recv_only"])));
  std::mt19937 rng(7);
  int deadlocks = 0;
  for (int trial = 0; trial < 200; ++trial) {
    Schedule mutant = s;
    for (int swap = 0; swap < 4; ++swap) {
      RankProgram& p = mutant.ranks[rng() % mutant.pp];
      const size_t i = rng() % (p.size() - 1);
      std::swap(p[i], p[i + 1]);
    }
    absl::StatusOr<CommPositions> positions = MatchSendRecv(mutant);
    if (!positions.ok()) continue;
    for (WaitModel model : kModels) ExpectAgreement(mutant, *positions, model, deadlocks);
  }
  EXPECT_GT(deadlocks, 0);
}

INSTANTIATE_TEST_SUITE_P(Pytorch, DeadlockAgreesWithLockStepTest,
                         ::testing::ValuesIn(PytorchConformanceNames()));

// A WAIT_SEND placed where its transfer cannot have completed: rank 0
// waits for rank 1 to post 1RECV_F0, which rank 1 does only after consuming
// 0SEND_F1, which rank 0 posts after the wait. Without the wait the program
// runs under every model but the lock-step one's blocking receive.
TEST(DeadlockTest, AWaitSendTooEarlyIsACycle) {
  constexpr char kEarlyWait[] =
      "0F0,0SEND_F0,0WAIT_SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
      "1RECV_F1,1F1,1RECV_F0,1F0,1B0,1SEND_B0,1B1,1SEND_B1\n";
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(kEarlyWait));
  EXPECT_EQ(Message(Check(s, WaitModel::kRelaxed)),
            "deadlock under relaxed semantics: wait cycle 0 -> 1 -> 0: rank 0 at index 2 "
            "(0WAIT_SEND_F0) waits for rank 1 to post 1RECV_F0 (index 2); rank 1 at index 1 "
            "(1F1) waits for rank 0 to post 0SEND_F1 (index 4)");
  std::string without = kEarlyWait;
  without.erase(without.find("0WAIT_SEND_F0,"), std::string("0WAIT_SEND_F0,").size());
  ASSERT_OK_AND_ASSIGN(Schedule fine, ParseScheduleCsv(without));
  EXPECT_OK(Check(fine, WaitModel::kRelaxed));
}

// The same wait after the backward that consumes the answer to its send
// (PyTorch's _add_wait_send placement) never waits on anything new. (Rank
// 1 receives out of rank 0's send order, which strict semantics refuses on
// its own.)
TEST(DeadlockTest, AWaitSendAfterTheLocalBackwardRuns) {
  ASSERT_OK_AND_ASSIGN(
      Schedule s,
      ParseScheduleCsv("0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0WAIT_SEND_F0,0RECV_B1,0B1,"
                       "0WAIT_SEND_F1\n"
                       "1RECV_F1,1F1,1RECV_F0,1F0,1B0,1SEND_B0,1B1,1SEND_B1\n"));
  for (WaitModel model : {WaitModel::kRelaxed, WaitModel::kBlockingRecv}) {
    EXPECT_OK(Check(s, model)) << WaitModelName(model);
  }
}

}  // namespace
}  // namespace jitpipe::deadlock_test
