#include "scheduler/execution/rank_cursor.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/analysis/comm_matching.h"
#include "scheduler/execution/run_ranks.h"
#include "scheduler/ir/schedule_csv.h"
#include "tests/scheduler/execution/matched_program.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::rank_cursor_test {
namespace {

// A lowered 1F1B pp2 m1, receives just before their consumers.
constexpr char kOneFOneB[] =
    "0F0,0SEND_F0,0RECV_B0,0B0\n"
    "1RECV_F0,1F0,1B0,1SEND_B0\n";

using Program = ::jitpipe::testing::MatchedProgram;

Program Parse(const std::string& csv) { return ::jitpipe::testing::ParseMatched(csv); }

// Every instruction of one rank's cursor, passing each wait as if it held.
std::vector<std::string> Walk(const Program& p, int rank, WaitModel model,
                              const RankMemoryEvents* memory = nullptr) {
  RankCursor c(p.schedule, p.positions, rank, model, memory);
  std::vector<std::string> out;
  while (!c.done()) {
    out.push_back(c.ToString(p.schedule));
    c.Advance();
  }
  out.push_back(c.ToString(p.schedule));
  return out;
}

TEST(RankCursorTest, RelaxedComputeWaitsForThePeersSendToHaveRun) {
  EXPECT_EQ(Walk(Parse(kOneFOneB), 1, WaitModel::kRelaxed),
            (std::vector<std::string>{"kBegin {}", "kRun 0 (1RECV_F0)",
                                      "kWait before 1 (1F0): rank 0 runs 0SEND_F0 (index 1)",
                                      "kRun 1 (1F0)", "kRun 2 (1B0)", "kRun 3 (1SEND_B0)",
                                      "kEnd {}", "kDone"}));
}

// The header's example: the memory events sit around the actions they
// belong to, a sent buffer rides on its SEND.
TEST(RankCursorTest, MemoryEventsSurroundTheirActions) {
  // Buffers of rank 1: 0 input, 1 stash, 2 input gradient.
  RankMemoryEvents memory;
  //            action 0       1            2            3
  //            alloc rel snd  alloc rel snd alloc rel snd alloc rel snd
  std::vector<std::vector<int32_t>> lists = {{0}, {}, {}, {1}, {0}, {}, {2}, {1}, {}, {}, {}, {2}};
  memory.offsets.push_back(0);
  for (const auto& list : lists) {
    memory.ids.insert(memory.ids.end(), list.begin(), list.end());
    memory.offsets.push_back(static_cast<int32_t>(memory.ids.size()));
  }
  EXPECT_EQ(Walk(Parse(kOneFOneB), 1, WaitModel::kRelaxed, &memory),
            (std::vector<std::string>{
                "kBegin {}", "kAllocate before 0 (1RECV_F0) {0}", "kRun 0 (1RECV_F0)",
                "kWait before 1 (1F0): rank 0 runs 0SEND_F0 (index 1)",
                "kAllocate before 1 (1F0) {1}", "kRun 1 (1F0)", "kRelease after 1 (1F0) {0}",
                "kAllocate before 2 (1B0) {2}", "kRun 2 (1B0)", "kRelease after 2 (1B0) {1}",
                "kRun 3 (1SEND_B0) {2}", "kEnd {}", "kDone"}));
}

TEST(RankCursorTest, EagerBuffersLiveFromTheBeginToTheEnd) {
  RankMemoryEvents memory;
  memory.at_start = {0, 1};
  memory.at_end = {0, 1};
  EXPECT_EQ(Walk(Parse(kOneFOneB), 0, WaitModel::kRelaxed, &memory),
            (std::vector<std::string>{"kBegin {0,1}", "kRun 0 (0F0)", "kRun 1 (0SEND_F0)",
                                      "kRun 2 (0RECV_B0)",
                                      "kWait before 3 (0B0): rank 1 runs 1SEND_B0 (index 3)",
                                      "kRun 3 (0B0)", "kEnd {0,1}", "kDone"}));
}

TEST(RankCursorTest, StrictTransfersWaitForTheirPartnerToBeReached) {
  EXPECT_EQ(Walk(Parse(kOneFOneB), 0, WaitModel::kStrict),
            (std::vector<std::string>{
                "kBegin {}", "kRun 0 (0F0)",
                "kWait before 1 (0SEND_F0): rank 1 reaches 1RECV_F0 (index 0)",
                "kRun 1 (0SEND_F0)", "kWait before 2 (0RECV_B0): rank 1 reaches 1SEND_B0 (index 3)",
                "kRun 2 (0RECV_B0)", "kWait before 3 (0B0): rank 1 runs 1SEND_B0 (index 3)",
                "kRun 3 (0B0)", "kEnd {}", "kDone"}));
}

TEST(RankCursorTest, BlockingReceiveWaitsAtTheReceiveOnly) {
  EXPECT_EQ(Walk(Parse(kOneFOneB), 1, WaitModel::kBlockingRecv),
            (std::vector<std::string>{
                "kBegin {}", "kWait before 0 (1RECV_F0): rank 0 runs 0SEND_F0 (index 1)",
                "kRun 0 (1RECV_F0)", "kRun 1 (1F0)", "kRun 2 (1B0)", "kRun 3 (1SEND_B0)",
                "kEnd {}", "kDone"}));
}

// An OVERLAP_F_B consumes two transfers: both waits come before it runs,
// each naming the local RECV its data arrives in. pp 2, loop placement,
// stages 0 and 2 on rank 0, 1 and 3 on rank 1.
constexpr char kOverlap[] =
    "0F0,0SEND_F0,0F1,0SEND_F1,2RECV_F0,2F0,2SEND_F0,2RECV_B0,2B0,2SEND_B0,2RECV_F1,0RECV_B0,"
    "(2F1;0B0)OVERLAP_F_B,2SEND_F1,2RECV_B1,2B1,2SEND_B1,0RECV_B1,0B1\n"
    "1RECV_F0,1F0,1SEND_F0,1RECV_F1,1F1,1SEND_F1,3RECV_F0,3F0,3B0,3SEND_B0,1RECV_B0,1B0,"
    "1SEND_B0,3RECV_F1,3F1,3B1,3SEND_B1,1RECV_B1,1B1,1SEND_B1\n";

TEST(RankCursorTest, AnOverlapWaitsForBothOfItsInputs) {
  const Program p = Parse(kOverlap);
  RankCursor c(p.schedule, p.positions, 0, WaitModel::kRelaxed);
  while (c.current().index < 12) c.Advance();
  EXPECT_EQ(c.ToString(p.schedule),
            "kWait before 12 ((2F1;0B0)OVERLAP_F_B): rank 1 runs 1SEND_F1 (index 5)");
  EXPECT_EQ(c.current().wait.kind, WaitKind::kTransfer);
  EXPECT_EQ(c.current().wait.local, 10);  // 2RECV_F1
  c.Advance();
  EXPECT_EQ(c.ToString(p.schedule),
            "kWait before 12 ((2F1;0B0)OVERLAP_F_B): rank 1 runs 1SEND_B0 (index 12)");
  EXPECT_EQ(c.current().wait.local, 11);  // 0RECV_B0
  c.Advance();
  EXPECT_EQ(c.ToString(p.schedule), "kRun 12 ((2F1;0B0)OVERLAP_F_B)");
  EXPECT_EQ(c.pc(), 12);
  c.Advance();
  EXPECT_EQ(c.pc(), 13);
}

// A compute waits for the asynchronous UNSHARD of its stage that came last.
TEST(RankCursorTest, AComputeWaitsForItsStagesUnshard) {
  EXPECT_EQ(Walk(Parse("0UNSHARD,0F0,0B0,0RESHARD\n"), 0, WaitModel::kRelaxed),
            (std::vector<std::string>{"kBegin {}", "kRun 0 (0UNSHARD)",
                                      "kWait before 1 (0F0): rank 0 runs 0UNSHARD (index 0)",
                                      "kRun 1 (0F0)",
                                      "kWait before 2 (0B0): rank 0 runs 0UNSHARD (index 0)",
                                      "kRun 2 (0B0)", "kRun 3 (0RESHARD)", "kEnd {}", "kDone"}));
}

// PyTorch main's explicit waits. A WAIT_SEND waits, under every model, for
// the peer to have run the RECV of its SEND (the transfer then completes);
// the buffer sent lives until the WAIT, so the cursor hands it out as a
// release after it, not with the SEND.
constexpr char kWithWaits[] =
    "0F0,0SEND_F0,0RECV_B0,0B0,0WAIT_SEND_F0,0REDUCE_GRAD,0WAIT_REDUCE_GRAD\n"
    "1RECV_F0,1F0,1B0,1SEND_B0,1WAIT_SEND_B0\n";

TEST(RankCursorTest, AWaitSendWaitsForThePeersReceiveUnderEveryModel) {
  for (WaitModel model : {WaitModel::kRelaxed, WaitModel::kStrict, WaitModel::kBlockingRecv}) {
    SCOPED_TRACE(WaitModelName(model));
    const Program p = Parse(kWithWaits);
    RankCursor c(p.schedule, p.positions, 1, model);
    while (c.current().index < 4) c.Advance();
    EXPECT_EQ(c.ToString(p.schedule),
              "kWait before 4 (1WAIT_SEND_B0): rank 0 runs 0RECV_B0 (index 2)");
    EXPECT_EQ(c.current().wait.kind, WaitKind::kSendDone);
    EXPECT_EQ(c.current().wait.local, 3);  // 1SEND_B0
  }
}

TEST(RankCursorTest, AWaitReduceGradWaitsForItsRanksReduction) {
  const Program p = Parse(kWithWaits);
  std::vector<std::string> walk = Walk(p, 0, WaitModel::kRelaxed);
  EXPECT_EQ(std::vector<std::string>(walk.end() - 5, walk.end()),
            (std::vector<std::string>{"kRun 5 (0REDUCE_GRAD)",
                                      "kWait before 6 (0WAIT_REDUCE_GRAD): rank 0 runs "
                                      "0REDUCE_GRAD (index 5)",
                                      "kRun 6 (0WAIT_REDUCE_GRAD)", "kEnd {}", "kDone"}));
  RankCursor c(p.schedule, p.positions, 0, WaitModel::kRelaxed);
  while (c.current().index < 6) c.Advance();
  EXPECT_EQ(c.current().wait.kind, WaitKind::kReduction);
  EXPECT_EQ(c.current().wait.local, 5);
}

// Rank 0's output (buffer 1) is sent at index 1 and waited for at index 4:
// it is released after the WAIT, and its SEND carries nothing.
TEST(RankCursorTest, ASentBufferWithAWaitIsReleasedAfterTheWait) {
  RankMemoryEvents memory;
  //            0F0          0SEND_F0   0RECV_B0  0B0          0WAIT_SEND_F0 0REDUCE 0WAIT_R
  std::vector<std::vector<int32_t>> lists = {{0, 1}, {}, {}, {}, {}, {}, {2}, {}, {}, {},
                                             {0, 2}, {}, {}, {1}, {}, {}, {}, {}, {}, {},
                                             {}};
  memory.offsets.push_back(0);
  for (const auto& list : lists) {
    memory.ids.insert(memory.ids.end(), list.begin(), list.end());
    memory.offsets.push_back(static_cast<int32_t>(memory.ids.size()));
  }
  EXPECT_EQ(Walk(Parse(kWithWaits), 0, WaitModel::kRelaxed, &memory),
            (std::vector<std::string>{
                "kBegin {}", "kAllocate before 0 (0F0) {0,1}", "kRun 0 (0F0)",
                "kRun 1 (0SEND_F0)", "kAllocate before 2 (0RECV_B0) {2}", "kRun 2 (0RECV_B0)",
                "kWait before 3 (0B0): rank 1 runs 1SEND_B0 (index 3)", "kRun 3 (0B0)",
                "kRelease after 3 (0B0) {0,2}",
                "kWait before 4 (0WAIT_SEND_F0): rank 1 runs 1RECV_F0 (index 0)",
                "kRun 4 (0WAIT_SEND_F0)", "kRelease after 4 (0WAIT_SEND_F0) {1}",
                "kRun 5 (0REDUCE_GRAD)",
                "kWait before 6 (0WAIT_REDUCE_GRAD): rank 0 runs 0REDUCE_GRAD (index 5)",
                "kRun 6 (0WAIT_REDUCE_GRAD)", "kEnd {}", "kDone"}));
}

// RunRanks visits every instruction of every rank, waits only once they
// hold: here the visitor checks the rule itself.
TEST(RunRanksTest, VisitsWaitsOnlyOnceTheyHold) {
  const Program p = Parse(kOverlap);
  std::vector<RankCursor> cursors = MakeCursors(p.schedule, p.positions, WaitModel::kRelaxed);
  int instructions = 0;
  bool all_held = true;
  EXPECT_TRUE(RunRanks(absl::MakeSpan(cursors), [&](int, const Instruction& in) {
    ++instructions;
    if (in.step == Step::kWait) all_held &= cursors[in.wait.rank].pc() >= in.wait.threshold;
  }));
  EXPECT_TRUE(all_held);
  // Per rank: begin, end, one run per action; the waits of 39 actions.
  EXPECT_GT(instructions, 2 * 2 + 39);
  for (const RankCursor& c : cursors) EXPECT_TRUE(c.done());
}

TEST(RunRanksTest, StopsAtACycleWithEachStuckRankAtItsWait) {
  // Each rank's compute needs what the other sends only after its own compute.
  const Program p = Parse("0F0,0RECV_B0,0B0,0SEND_F0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  std::vector<RankCursor> cursors = MakeCursors(p.schedule, p.positions, WaitModel::kRelaxed);
  EXPECT_FALSE(RunRanks(absl::MakeSpan(cursors), [](int, const Instruction&) {}));
  EXPECT_EQ(cursors[0].ToString(p.schedule),
            "kWait before 2 (0B0): rank 1 runs 1SEND_B0 (index 3)");
  EXPECT_EQ(cursors[1].ToString(p.schedule),
            "kWait before 1 (1F0): rank 0 runs 0SEND_F0 (index 3)");
  EXPECT_EQ(cursors[0].pc(), 2);
  EXPECT_EQ(cursors[1].pc(), 1);
}

}  // namespace
}  // namespace jitpipe::rank_cursor_test
