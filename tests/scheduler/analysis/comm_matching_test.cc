#include "scheduler/analysis/comm_matching.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"
#include "scheduler/ir/schedule_csv.h"
#include "scheduler/passes/lower.h"
#include "scheduler/analysis/validate_structure.h"
#include "tests/testing/program_mutations.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::comm_matching_test {
namespace {

using ::jitpipe::testing::Message;
using ::jitpipe::testing::MutateProgram;

RankProgram Program(const std::vector<std::string>& texts) {
  RankProgram program;
  for (const std::string& text : texts) program.push_back(*ParseAction(text));
  return program;
}

TEST(CommMatchingTest, RecordsWhereEachEndIs) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv("0F0,0SEND_F0,0RECV_B0,0B0\n"
                                                    "1RECV_F0,1F0,1B0,1SEND_B0\n"));
  ASSERT_OK_AND_ASSIGN(CommPositions p, MatchSendRecv(s));
  EXPECT_EQ(p.microbatches, 1);
  EXPECT_EQ(p.send_f, (std::vector<int32_t>{1, kAbsent}));
  EXPECT_EQ(p.recv_f, (std::vector<int32_t>{kAbsent, 0}));
  EXPECT_EQ(p.send_b, (std::vector<int32_t>{kAbsent, 3}));
  EXPECT_EQ(p.recv_b, (std::vector<int32_t>{2, kAbsent}));

  const Endpoint recv = Partner(p, s.ranks[0][1]);  // 0SEND_F0 -> 1RECV_F0
  EXPECT_EQ(recv.rank, 1);
  EXPECT_EQ(recv.index, 0);
  const Endpoint send = Partner(p, s.ranks[0][2]);  // 0RECV_B0 <- 1SEND_B0
  EXPECT_EQ(send.rank, 1);
  EXPECT_EQ(send.index, 3);
}

TEST(CommMatchingTest, AwaitedSendIsTheRemoteProducer) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv("0F0,0SEND_F0,0RECV_B0,0B0\n"
                                                    "1RECV_F0,1F0,1B0,1SEND_B0\n"));
  ASSERT_OK_AND_ASSIGN(CommPositions p, MatchSendRecv(s));
  std::optional<Endpoint> f = AwaitedSend(p, s.ranks[1][1]);  // 1F0 <- 0SEND_F0
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->rank, 0);
  EXPECT_EQ(f->index, 1);
  std::optional<Endpoint> b = AwaitedSend(p, s.ranks[0][3]);  // 0B0 <- 1SEND_B0
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->rank, 1);
  EXPECT_EQ(b->index, 3);
  EXPECT_FALSE(AwaitedSend(p, s.ranks[0][0]).has_value());  // first stage
  EXPECT_FALSE(AwaitedSend(p, s.ranks[1][2]).has_value());  // last stage
}

TEST(CommMatchingTest, ColocatedNeighboursAwaitNothing) {
  // V placement, pp 2: rank 1 holds stages 1 and 2 and hands over locally.
  ASSERT_OK_AND_ASSIGN(
      Schedule s,
      ParseScheduleCsv("0F0,0SEND_F0,3RECV_F0,3F0,3B0,3SEND_B0,0RECV_B0,0B0\n"
                       "1RECV_F0,1F0,2F0,2SEND_F0,2RECV_B0,2B0,1B0,1SEND_B0\n"));
  ASSERT_EQ(s.placement, Placement::kV);
  ASSERT_OK_AND_ASSIGN(CommPositions p, MatchSendRecv(s));
  EXPECT_FALSE(AwaitedSend(p, s.ranks[1][2]).has_value());  // 2F0 after 1F0
  EXPECT_FALSE(AwaitedSend(p, s.ranks[1][6]).has_value());  // 1B0 after 2B0
}

// Transfers match by identity: rank 1 receives F1 before F0, which rank 0
// sends in the other order (an ordered transport's rule, CheckPairOrder).
TEST(CommMatchingTest, RecvsFromOnePeerMayComeInAnyOrder) {
  ASSERT_OK_AND_ASSIGN(Schedule s,
                       ParseScheduleCsv("0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
                                        "1RECV_F1,1RECV_F0,1F0,1F1,1B0,1SEND_B0,1B1,1SEND_B1\n"));
  ASSERT_OK_AND_ASSIGN(CommPositions p, MatchSendRecv(s));
  const Endpoint recv_f1 = Partner(p, s.ranks[0][3]);  // 0SEND_F1 -> 1RECV_F1
  EXPECT_EQ(recv_f1.rank, 1);
  EXPECT_EQ(recv_f1.index, 0);
  const Endpoint send_f0 = Partner(p, s.ranks[1][1]);  // 1RECV_F0 <- 0SEND_F0
  EXPECT_EQ(send_f0.rank, 0);
  EXPECT_EQ(send_f0.index, 1);
}

TEST(CommMatchingTest, ComputeOnlyIsAPreconditionError) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv("0F0,0B0\n1F0,1B0\n"));
  EXPECT_EQ(MatchSendRecv(s).status().code(), absl::StatusCode::kFailedPrecondition);
}

// DualPipe-style: two chains over two ranks, chain 0 = stages 0 -> 1 on
// ranks 0 -> 1, chain 1 = stages 2 -> 3 on ranks 0 -> 1. Stage 1 ends
// chain 0, so it sends nothing on, though stage 2 exists on another rank.
Schedule TwoChains() {
  Schedule s;
  s.pp = 2;
  s.stages_per_rank = 2;
  s.microbatches = 2;
  s.chains = 2;
  s.placement = Placement::kCustom;
  s.stage_to_rank = {0, 1, 0, 1};
  s.lowered = true;
  s.ranks = {Program({"0F0", "0SEND_F0", "2F0", "2SEND_F0", "2RECV_B0", "2B0", "0RECV_B0", "0B0"}),
             Program({"1RECV_F0", "1F0", "3RECV_F0", "3F0", "3B0", "3SEND_B0", "1B0", "1SEND_B0"})};
  return s;
}

TEST(CommMatchingTest, ChainsEndAtTheirOwnLastStage) {
  Schedule s = TwoChains();
  ASSERT_OK(ValidateStructure(s));
  EXPECT_OK(MatchSendRecv(s));
  s.ranks[1].insert(s.ranks[1].begin() + 2, *ParseAction("1SEND_F0"));
  EXPECT_EQ(Message(MatchSendRecv(s)),
            "rank 1, index 2 (1SEND_F0): stage 1 is the last stage of its chain; it has no next "
            "stage to send to");
}

TEST(CommMatchingTest, OverlapComputeNeedsTheReceivesOfEachPart) {
  // pp 2, loop, v 2: the forward part of the compound on rank 1 comes
  // before its receive (its backward part has 1RECV_B0 in time).
  ASSERT_OK_AND_ASSIGN(
      Schedule s,
      ParseScheduleCsv("0F0,0SEND_F0,2RECV_F0,2F0,2SEND_F0,2RECV_B0,2B0,2SEND_B0,0RECV_B0,0B0\n"
                       "1RECV_F0,1F0,1SEND_F0,1RECV_B0,(3F0;1B0)OVERLAP_F_B,3RECV_F0,3B0,"
                       "3SEND_B0,1SEND_B0\n"));
  EXPECT_EQ(Message(MatchSendRecv(s)),
            "rank 1, index 4 ((3F0;1B0)OVERLAP_F_B): needs 3RECV_F0 earlier in this rank's "
            "program; it is at index 5");
}

TEST(CommMatchingTest, GridAttachedOnlyWhenAsked) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv("0F0,0SEND_F0\n1F0\n"));
  absl::Status plain = MatchSendRecv(s).status();
  EXPECT_FALSE(plain.GetPayload("type.jitpipe/schedule_grid").has_value());
  absl::Status with_grid = MatchSendRecv(s, 10).status();
  EXPECT_EQ(Message(with_grid), Message(plain));
  EXPECT_TRUE(with_grid.GetPayload("type.jitpipe/schedule_grid").has_value());
}

// PyTorch main's WAIT_SEND: once, after the SEND it waits for, on its rank.
// REDUCE_GRAD positions are recorded for WAIT_REDUCE_GRAD.
TEST(CommMatchingTest, AWaitSendComesOnceAfterItsSend) {
  constexpr char kRank1[] = "1RECV_F0,1F0,1B0,1SEND_B0,1WAIT_SEND_B0,1REDUCE_GRAD\n";
  ASSERT_OK_AND_ASSIGN(
      Schedule fine,
      ParseScheduleCsv(absl::StrCat("0F0,0SEND_F0,0RECV_B0,0B0,0WAIT_SEND_F0\n", kRank1)));
  ASSERT_OK_AND_ASSIGN(CommPositions p, MatchSendRecv(fine));
  EXPECT_EQ(p.reduce_grad, (std::vector<int32_t>{kAbsent, 5}));
  EXPECT_EQ(WaitedSend(p, fine.ranks[0][4]), 1);
  const Endpoint recv = WaitedRecv(p, fine.ranks[0][4]);
  EXPECT_EQ(recv.rank, 1);
  EXPECT_EQ(recv.index, 0);
  EXPECT_EQ(WaitedRecv(p, fine.ranks[1][4]).index, 2);  // 0RECV_B0

  const std::pair<std::string, std::string> bad[] = {
      {"0F0,0WAIT_SEND_F0,0SEND_F0,0RECV_B0,0B0\n",
       "rank 0, index 1 (0WAIT_SEND_F0): waits for 0SEND_F0, which comes later, at index 2"},
      {"0F0,0SEND_F0,0WAIT_SEND_F0,0RECV_B0,0B0,0WAIT_SEND_F0\n",
       "rank 0, index 5 (0WAIT_SEND_F0): a second 0WAIT_SEND_F0; the first is at index 2"},
      {"0F0,0SEND_F0,0RECV_B0,0B0,0WAIT_SEND_B0\n",
       "rank 0, index 4 (0WAIT_SEND_B0): waits for 0SEND_B0, which this rank never posts"},
  };
  for (const auto& [rank0, error] : bad) {
    ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(absl::StrCat(rank0, kRank1)));
    EXPECT_EQ(Message(MatchSendRecv(s)), error);
    EXPECT_EQ(Message(MatchSendRecvPerAction(s)), error);
  }
}

// The table pass must accept exactly what the per-action checker accepts,
// with the same positions, and leave every message to it. Mutants that are
// not structurally valid are outside MatchSendRecv's contract and skipped.
TEST(CommMatchingTest, TablePassAgreesWithThePerActionChecker) {
  std::mt19937 rng(20261203);
  int compared = 0, refused = 0;
  for (const char* name : {"1f1b", "interleaved-1f1b", "zbv", "dualpipev", "dualpipe"}) {
    for (RecvPlacement recv : {RecvPlacement::kEarly, RecvPlacement::kJit}) {
      ASSERT_OK_AND_ASSIGN(Schedule compute,
                           Generate({.schedule = name, .pp = 4, .microbatches = 8}));
      ASSERT_OK_AND_ASSIGN(const Schedule lowered, Lower(compute, {.recv = recv}));
      for (int trial = 0; trial < 300; ++trial) {
        Schedule s = lowered;
        for (int edits = 1 + trial % 3; edits > 0; --edits) MutateProgram(s, rng);
        if (!ValidateStructure(s).ok()) continue;
        absl::StatusOr<CommPositions> fast = MatchSendRecv(s);
        absl::StatusOr<CommPositions> exact = MatchSendRecvPerAction(s);
        ++compared;
        ASSERT_EQ(fast.ok(), exact.ok()) << name << " trial " << trial;
        if (!fast.ok()) {
          ++refused;
          EXPECT_EQ(Message(fast), Message(exact));
          continue;
        }
        EXPECT_EQ(fast->send_f, exact->send_f);
        EXPECT_EQ(fast->recv_f, exact->recv_f);
        EXPECT_EQ(fast->send_b, exact->send_b);
        EXPECT_EQ(fast->recv_b, exact->recv_b);
        EXPECT_EQ(fast->reduce_grad, exact->reduce_grad);
      }
    }
  }
  // Both outcomes occur often enough for the comparison to mean something.
  EXPECT_GT(refused, 100) << compared << " compared";
  EXPECT_GT(compared - refused, 50) << compared << " compared";
}

}  // namespace
}  // namespace jitpipe::comm_matching_test
