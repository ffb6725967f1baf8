#include "scheduler/analysis/program_index.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"
#include "scheduler/ir/schedule_csv.h"
#include "scheduler/passes/lower.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::program_index_test {
namespace {

using ::jitpipe::testing::Message;

// pp 2, loop, one stage per rank, one microbatch, lowered:
//   rank 0: 0F0 0SEND_F0 0RECV_B0 0B0
//   rank 1: 1RECV_F0 1F0 1B0 1SEND_B0
constexpr const char* kLowered =
    "0F0,0SEND_F0,0RECV_B0,0B0\n"
    "1RECV_F0,1F0,1B0,1SEND_B0\n";

TEST(ProgramIndexTest, RecordsEveryKindsPositionByStageAndMicrobatch) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(kLowered));
  const ProgramIndex x = ProgramIndex::Build(s);
  EXPECT_TRUE(x.clean);
  EXPECT_EQ(x.microbatches, 1);
  EXPECT_EQ(x.rows, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(x.forward, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(x.backward, (std::vector<int32_t>{3, 2}));
  // No I, W or WAIT_SEND in the program: those tables take no memory.
  EXPECT_TRUE(x.backward_input.empty());
  EXPECT_TRUE(x.backward_weight.empty());
  EXPECT_TRUE(x.wait_send_f.empty());
  EXPECT_EQ(ProgramIndex::Get(x.backward_input, 1), kAbsent);
  EXPECT_EQ(x.send_f, (std::vector<int32_t>{1, kAbsent}));
  EXPECT_EQ(x.recv_f, (std::vector<int32_t>{kAbsent, 0}));
  EXPECT_EQ(x.send_b, (std::vector<int32_t>{kAbsent, 3}));
  EXPECT_EQ(x.recv_b, (std::vector<int32_t>{2, kAbsent}));
  EXPECT_EQ(x.stages[0].prev_rank, kAbsent);
  EXPECT_EQ(x.stages[0].next_rank, 1);
  EXPECT_EQ(x.stages[1].prev_rank, 0);
  EXPECT_EQ(x.stages[1].next_rank, kAbsent);
}

TEST(ProgramIndexTest, StageWideActionsAndWaits) {
  ASSERT_OK_AND_ASSIGN(
      Schedule s,
      ParseScheduleCsv("0UNSHARD,0F0,0SEND_F0,0WAIT_SEND_F0,0RECV_B0,0B0,0RESHARD,0REDUCE_GRAD,"
                       "0UNSHARD,0WAIT_REDUCE_GRAD\n"
                       "1RECV_F0,1F0,1I0,1SEND_B0,1W0\n"));
  const ProgramIndex x = ProgramIndex::Build(s);
  EXPECT_TRUE(x.clean);
  EXPECT_EQ(x.wait_send_f[0], 3);
  EXPECT_EQ(ProgramIndex::Get(x.wait_send_b, 0), kAbsent);
  EXPECT_EQ(x.reduce_grad, (std::vector<int32_t>{7, kAbsent}));
  EXPECT_EQ(x.wait_reduce_grad, (std::vector<int32_t>{9, kAbsent}));
  ASSERT_EQ(x.shards[0].size(), 2u);
  EXPECT_EQ(x.shards[0][0], std::make_pair(0, 6));
  EXPECT_EQ(x.shards[0][1], std::make_pair(8, static_cast<int>(kAbsent)));  // open to the end
  EXPECT_EQ(x.backward_input[1], 2);
  EXPECT_EQ(x.backward_weight[1], 4);
  EXPECT_EQ(x.BackwardAt(1), 2);
}

TEST(ProgramIndexTest, BackwardAtIsTheFirstOfIAndB) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv("0F0,0I0,0B0\n"));
  const ProgramIndex x = ProgramIndex::Build(s);
  EXPECT_EQ(x.BackwardAt(0), 1);
}

TEST(ProgramIndexTest, CompoundPartsShareTheirIndex) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv("0F0,0F1,(0F2;0B0)OVERLAP_F_B,0B1,0B2\n"));
  const ProgramIndex x = ProgramIndex::Build(s);
  EXPECT_TRUE(x.clean);
  EXPECT_EQ(x.forward[2], 2);
  EXPECT_EQ(x.backward[0], 2);
  EXPECT_EQ(x.backward[2], 4);
}

TEST(ProgramIndexTest, OneRankIndexHoldsOnlyThatRanksStages) {
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({.schedule = "interleaved-1f1b",
                                             .pp = 2,
                                             .microbatches = 4,
                                             .stages_per_rank = 2}));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(s, {}));
  const ProgramIndex full = ProgramIndex::Build(lowered);
  const ProgramIndex one = ProgramIndex::BuildForRank(lowered, 1);
  EXPECT_EQ(one.forward.size(), 2u * 4u);  // rank 1's two stages
  for (int stage = 0; stage < lowered.num_stages(); ++stage) {
    if (lowered.RankOf(stage) != 1) {
      EXPECT_EQ(one.rows[stage], kAbsent);
      continue;
    }
    for (int mb = 0; mb < 4; ++mb) {
      for (ActionKind kind : {ActionKind::kForward, ActionKind::kBackward, ActionKind::kSendF,
                              ActionKind::kRecvF, ActionKind::kSendB, ActionKind::kRecvB}) {
        EXPECT_EQ(one.At(one.TableOf(kind), stage, mb), full.At(full.TableOf(kind), stage, mb))
            << Action::Make(kind, stage, mb).ToString();
      }
    }
  }
}

TEST(ProgramIndexTest, LoweredOrNotDecidesWhatBelongs) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(kLowered));
  s.lowered = false;
  ProgramIndex x = ProgramIndex::Build(s);
  EXPECT_FALSE(x.clean);
  EXPECT_EQ(Message(x.FaultStatus(s, 0)),
            "rank 0, index 1 (0SEND_F0): SEND_F in a compute-only program (lowered is false)");
  s.lowered = true;
  s.ranks[1].insert(s.ranks[1].begin() + 1, Action{});  // a bubble
  ASSERT_TRUE(s.ranks[1][1].is_bubble());
  x = ProgramIndex::Build(s);
  EXPECT_EQ(Message(x.FaultStatus(s, 1)), "rank 1, index 1 (): a bubble in a lowered program");
  EXPECT_TRUE(x.FaultStatus(s, 0).ok());
}

// A fault is kept per rank (the first), worded as the structure checker
// words it; the tables keep the first occurrence.
struct FaultCase {
  const char* name;
  const char* csv;
  int rank;
  const char* message;
  // Applied after parsing, for what the parser itself refuses.
  void (*edit)(Schedule&) = nullptr;
};

class ProgramIndexFaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(ProgramIndexFaultTest, FirstFaultOfTheRankIsNamed) {
  const FaultCase& c = GetParam();
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(c.csv));
  if (c.edit != nullptr) c.edit(s);
  const ProgramIndex x = ProgramIndex::Build(s);
  EXPECT_FALSE(x.clean);
  EXPECT_EQ(Message(x.FaultStatus(s, c.rank)), c.message);
  for (int r = 0; r < s.pp; ++r) {
    if (r != c.rank) {
      EXPECT_TRUE(x.FaultStatus(s, r).ok()) << "rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, ProgramIndexFaultTest,
    ::testing::Values(
        FaultCase{"repeat_forward", "0F0,0F0,0B0\n", 0,
                  "rank 0, index 1 (0F0): a second forward of stage 0 microbatch 0; the first "
                  "is at index 0"},
        FaultCase{"repeat_send", "0F0,0SEND_F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n",
                  0, "rank 0, index 2 (0SEND_F0): a second 0SEND_F0; the first is at index 1"},
        FaultCase{"other_rank", kLowered, 1,
                  "rank 1, index 1 (0F0): stage 0 lives on rank 0, not on this rank",
                  [](Schedule& s) { s.ranks[1][1] = Action::Make(ActionKind::kForward, 0, 0); }},
        FaultCase{"microbatch", kLowered, 0,
                  "rank 0, index 0 (0F1): microbatch 1 is out of range; each stage runs 1 "
                  "microbatches (0..0)",
                  [](Schedule& s) { s.ranks[0][0] = Action::Make(ActionKind::kForward, 0, 1); }},
        FaultCase{"reduce_twice", "0F0,0SEND_F0,0RECV_B0,0B0,0REDUCE_GRAD,0REDUCE_GRAD\n"
                  "1RECV_F0,1F0,1B0,1SEND_B0\n", 0,
                  "rank 0, index 5 (0REDUCE_GRAD): a second gradient reduction of stage 0; the "
                  "first is at index 4"},
        FaultCase{"wait_reduce_first", "0F0,0SEND_F0,0RECV_B0,0B0,0WAIT_REDUCE_GRAD\n"
                  "1RECV_F0,1F0,1B0,1SEND_B0\n", 0,
                  "rank 0, index 4 (0WAIT_REDUCE_GRAD): waits for the gradient reduction of "
                  "stage 0, which has not started (no REDUCE_GRAD before it)"},
        FaultCase{"unshard_twice", "0UNSHARD,0UNSHARD,0F0,0SEND_F0,0RECV_B0,0B0\n"
                  "1RECV_F0,1F0,1B0,1SEND_B0\n", 0,
                  "rank 0, index 1 (0UNSHARD): stage 0 is already unsharded (UNSHARD at index 0, "
                  "no RESHARD since)"},
        FaultCase{"reshard_first", "0F0,0SEND_F0,0RECV_B0,0B0,0RESHARD\n"
                  "1RECV_F0,1F0,1B0,1SEND_B0\n", 0,
                  "rank 0, index 4 (0RESHARD): stage 0 is not unsharded (no UNSHARD before it)"}),
    [](const ::testing::TestParamInfo<FaultCase>& param) { return std::string(param.param.name); });

}  // namespace
}  // namespace jitpipe::program_index_test
