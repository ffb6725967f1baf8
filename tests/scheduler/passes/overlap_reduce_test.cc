#include "scheduler/passes/overlap_reduce.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"
#include "scheduler/passes/lower.h"
#include "scheduler/analysis/validate.h"
#include "tests/scheduler/passes/pass_test_util.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::overlap_reduce_test {
namespace {

using ::jitpipe::testing::FromRows;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::Rows;

// Rank 1 of the two-rank V schedules below (stages 1 and 2; full backwards,
// so nothing to reorder).
constexpr char kRankOne[] = "1F0 1F1 2F0 2F1 2B0 2B1 2REDUCE_GRAD 1B0 1B1 1REDUCE_GRAD";

struct Case {
  std::string name;
  std::string in;   // rank 0: stages 0 and 3
  std::string out;  // rank 0 after the pass
};

class OverlapReduceTest : public ::testing::TestWithParam<Case> {};

TEST_P(OverlapReduceTest, ReordersWsAndIssuesReductions) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({GetParam().in, kRankOne}));
  ASSERT_OK_AND_ASSIGN(Schedule out, OverlapReduce(s));
  EXPECT_EQ(Rows(out), (std::vector<std::string>{GetParam().out, kRankOne}));
  EXPECT_TRUE(out.lowered);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, OverlapReduceTest,
    ::testing::Values(
        // The header's example: stage 3 completes first, so its W1 takes 0W0's
        // place and its reduction runs beside 0I1 0W0 0W1.
        Case{"HeaderExample",
             "0F0 0F1 3F0 3F1 3I0 3I1 0I0 3W0 0W0 0I1 3W1 3REDUCE_GRAD 0W1 0REDUCE_GRAD",
             "0F0 0F1 3F0 3F1 3I0 3I1 0I0 3W0 3W1 3REDUCE_GRAD 0I1 0W0 0W1 0REDUCE_GRAD"},
        // Stage 0 completes first, but its W1 may not run before its I1.
        Case{"AWWaitsForItsI",
             "0F0 0F1 3F0 3F1 3I0 0I0 0W0 3W0 3I1 0I1 0W1 0REDUCE_GRAD 3W1 3REDUCE_GRAD",
             "0F0 0F1 3F0 3F1 3I0 0I0 0W0 3W0 3I1 0I1 0W1 0REDUCE_GRAD 3W1 3REDUCE_GRAD"},
        // Stage 3's first W may not move ahead of its first W in the input,
        // where its parameter gradients are allocated.
        Case{"KeepsWhereParameterGradientsAppear",
             "0F0 0F1 3F0 3F1 3I0 3I1 0I0 0W0 3W0 3W1 3REDUCE_GRAD 0I1 0W1 0REDUCE_GRAD",
             "0F0 0F1 3F0 3F1 3I0 3I1 0I0 0W0 3W0 3W1 3REDUCE_GRAD 0I1 0W1 0REDUCE_GRAD"},
        // No W crosses an UNSHARD or RESHARD.
        Case{"StaysBetweenUnshardAndReshard",
             "0F0 0F1 3F0 3F1 3I0 3I1 0I0 3W0 0W0 3RESHARD 3UNSHARD 0I1 3W1 3REDUCE_GRAD 0W1 "
             "0REDUCE_GRAD",
             "0F0 0F1 3F0 3F1 3I0 3I1 0I0 3W0 0W0 3RESHARD 3UNSHARD 0I1 3W1 3REDUCE_GRAD 0W1 "
             "0REDUCE_GRAD"},
        // A late REDUCE_GRAD moves up to its stage's last B, after the sends
        // and receives posted right after it.
        Case{"IssuesALateReductionAfterTheLastB",
             "0F0 0F1 3F0 3F1 3B0 3SEND_B0 3B1 3SEND_B1 0RECV_B0 0B0 0B1 3REDUCE_GRAD "
             "0REDUCE_GRAD",
             "0F0 0F1 3F0 3F1 3B0 3SEND_B0 3B1 3SEND_B1 0RECV_B0 3REDUCE_GRAD 0B0 0B1 "
             "0REDUCE_GRAD"}),
    [](const ::testing::TestParamInfo<Case>& param) { return param.param.name; });

TEST(OverlapReduceTest, KeepsTheInputWhenTheReorderRaisesThePeak) {
  const std::string in =
      "0F0 0F1 3F0 3F1 3I0 3I1 0I0 3W0 0W0 0I1 3W1 3REDUCE_GRAD 0W1 0REDUCE_GRAD";
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({in, kRankOne}));
  // A "peak" that grows the earlier the first REDUCE_GRAD comes: no reorder
  // that moves 3REDUCE_GRAD up is acceptable.
  int calls = 0;
  RankPeakFunction peak = [&calls](const Schedule& probe, int rank) -> absl::StatusOr<int64_t> {
    ++calls;
    const RankProgram& p = probe.ranks[rank];
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i].kind == ActionKind::kReduceGrad) return static_cast<int64_t>(p.size() - i);
    }
    return 0;
  };
  ASSERT_OK_AND_ASSIGN(Schedule out, OverlapReduce(s, {.rank_peak = peak}));
  EXPECT_EQ(Rows(out)[0], in);
  EXPECT_GT(calls, 2);  // the input, the full reorder, then the bisection
}

TEST(OverlapReduceTest, AFlatPeakAllowsTheFullReorder) {
  ASSERT_OK_AND_ASSIGN(
      Schedule s,
      FromRows({"0F0 0F1 3F0 3F1 3I0 3I1 0I0 3W0 0W0 0I1 3W1 3REDUCE_GRAD 0W1 0REDUCE_GRAD",
                kRankOne}));
  RankPeakFunction flat = [](const Schedule&, int) -> absl::StatusOr<int64_t> { return 7; };
  ASSERT_OK_AND_ASSIGN(Schedule out, OverlapReduce(s, {.rank_peak = flat}));
  EXPECT_EQ(Rows(out)[0],
            "0F0 0F1 3F0 3F1 3I0 3I1 0I0 3W0 3W1 3REDUCE_GRAD 0I1 0W0 0W1 0REDUCE_GRAD");
}

TEST(OverlapReduceTest, PeakFunctionErrorsPropagate) {
  ASSERT_OK_AND_ASSIGN(
      Schedule s,
      FromRows({"0F0 0F1 3F0 3F1 3I0 3I1 0I0 3W0 0W0 0I1 3W1 3REDUCE_GRAD 0W1 0REDUCE_GRAD",
                kRankOne}));
  RankPeakFunction broken = [](const Schedule&, int) -> absl::StatusOr<int64_t> {
    return absl::InvalidArgumentError("no model");
  };
  EXPECT_EQ(Message(OverlapReduce(s, {.rank_peak = broken})), "no model");
}

TEST(OverlapReduceTest, ActivationUnitPeakCountsFToLastBackwardPart) {
  // Rank 0 holds four activations after its forwards; rank 1 likewise.
  ASSERT_OK_AND_ASSIGN(
      Schedule s,
      FromRows({"0F0 0F1 3F0 3F1 3I0 3I1 0I0 3W0 0W0 0I1 3W1 3REDUCE_GRAD 0W1 0REDUCE_GRAD",
                "1F0 1B0 1F1 1B1 2F0 2B0 2F1 2B1 2REDUCE_GRAD 1REDUCE_GRAD"}));
  EXPECT_EQ(ActivationUnitPeak(s, 0), 4);
  EXPECT_EQ(ActivationUnitPeak(s, 1), 1);
}

TEST(OverlapReduceTest, RefusesProgramsWithoutReductions) {
  ASSERT_OK_AND_ASSIGN(Schedule compute, FromRows({"0F0 0B0", "1F0 1B0"}));
  EXPECT_EQ(Message(OverlapReduce(compute)),
            "overlap_reduce needs a lowered program with REDUCE_GRAD; lower with reduce_grad "
            "first");
  ASSERT_OK_AND_ASSIGN(Schedule lowered,
                       FromRows({"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"}));
  EXPECT_EQ(OverlapReduce(lowered).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Message(OverlapReduce(lowered)),
            "overlap_reduce needs REDUCE_GRAD actions; lower with reduce_grad first");
}

TEST(OverlapReduceTest, NamesTheActionItRefuses) {
  ASSERT_OK_AND_ASSIGN(Schedule twice,
                       FromRows({"0F0 0B0 0REDUCE_GRAD 0REDUCE_GRAD", "1F0 1B0 1REDUCE_GRAD"}));
  EXPECT_EQ(Message(OverlapReduce(twice)),
            "rank 0, index 3 (0REDUCE_GRAD): a second REDUCE_GRAD for stage 0");
  ASSERT_OK_AND_ASSIGN(Schedule early_w,
                       FromRows({"0F0 0W0 0I0 0REDUCE_GRAD", "1F0 1B0 1REDUCE_GRAD"}));
  EXPECT_EQ(Message(OverlapReduce(early_w)), "rank 0, index 1 (0W0): W before its I");
}

TEST(OverlapReduceTest, LowerRefusesOverlapWithoutReduceGrad) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0B0", "1F0 1B0"}));
  EXPECT_EQ(Message(Lower(s, {.overlap = true})),
            "overlap needs reduce_grad (there is nothing to overlap)");
}

// Index of the first REDUCE_GRAD of each rank.
std::vector<size_t> FirstReductions(const Schedule& s) {
  std::vector<size_t> first;
  for (const RankProgram& p : s.ranks) {
    size_t i = 0;
    while (i < p.size() && p[i].kind != ActionKind::kReduceGrad) ++i;
    first.push_back(i);
  }
  return first;
}

// ZB-V defers Ws of both local stages to the end of the step; with the pass
// every rank's first-completing stage finishes earlier.
TEST(OverlapReduceTest, ZbvStartsReductionsEarlier) {
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({.schedule = "zbv", .pp = 4, .microbatches = 8,
                                             .stages_per_rank = 2}));
  ASSERT_OK_AND_ASSIGN(Schedule plain, Lower(s, {.reduce_grad = true}));
  ASSERT_OK_AND_ASSIGN(Schedule overlapped, Lower(s, {.reduce_grad = true, .overlap = true}));
  const std::vector<size_t> before = FirstReductions(plain);
  const std::vector<size_t> after = FirstReductions(overlapped);
  int earlier = 0;
  for (int r = 0; r < s.pp; ++r) {
    EXPECT_LE(after[r], before[r]) << "rank " << r;
    earlier += after[r] < before[r] ? 1 : 0;
  }
  EXPECT_GE(earlier, 1);
}

// Every generator's jit lowering with the pass: still deadlock-free (Lower's
// invariant checker runs after the pass), the same actions, F/I/B in their
// order, and no rank's activation-unit peak raised.
class OverlapReduceGeneratorTest
    : public ::testing::TestWithParam<std::tuple<std::string, int, int>> {};

TEST_P(OverlapReduceGeneratorTest, KeepsComputeOrderAndMemory) {
  const auto& [name, v, mbs] = GetParam();
  ASSERT_OK_AND_ASSIGN(Schedule s,
                       Generate({.schedule = name, .pp = 4, .microbatches = mbs,
                                 .stages_per_rank = v}));
  ASSERT_OK_AND_ASSIGN(Schedule plain, Lower(s, {.reduce_grad = true}));
  ASSERT_OK_AND_ASSIGN(Schedule overlapped, Lower(s, {.reduce_grad = true, .overlap = true,
                                                      .check_invariants = true}));
  EXPECT_OK(Validate(overlapped));
  // With receives placed for ordered rendezvous transports, strict too.
  ASSERT_OK_AND_ASSIGN(Schedule rendezvous,
                       Lower(s, {.recv = RecvPlacement::kJitRendezvous, .reduce_grad = true,
                                 .overlap = true, .check_invariants = true}));
  EXPECT_OK(Validate(rendezvous, {.semantics = CommSemantics::kStrict}));
  for (int r = 0; r < s.pp; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    auto without = [](const RankProgram& p, bool drop_w) {
      std::vector<std::string> out;
      for (const Action& a : p) {
        if (a.kind == ActionKind::kReduceGrad || (drop_w && a.kind == ActionKind::kBackwardWeight)) {
          continue;
        }
        out.push_back(a.ToString());
      }
      if (!drop_w) std::sort(out.begin(), out.end());
      return out;
    };
    EXPECT_EQ(without(overlapped.ranks[r], true), without(plain.ranks[r], true));
    EXPECT_EQ(without(overlapped.ranks[r], false), without(plain.ranks[r], false));
    EXPECT_LE(ActivationUnitPeak(overlapped, r), ActivationUnitPeak(plain, r));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Generators, OverlapReduceGeneratorTest,
    ::testing::Values(std::make_tuple("zbv", 2, 8), std::make_tuple("interleaved-zb", 2, 8),
                      std::make_tuple("v-half", 2, 8), std::make_tuple("v-min", 2, 12),
                      std::make_tuple("zb-h1", 1, 8), std::make_tuple("zb-h2", 1, 8),
                      std::make_tuple("dualpipev", 2, 8), std::make_tuple("interleaved-1f1b", 2, 8),
                      std::make_tuple("interleaved-zb", 4, 16)),
    [](const auto& param) {
      std::string name = std::get<0>(param.param);
      std::replace(name.begin(), name.end(), '-', '_');
      return absl::StrCat(name, "_v", std::get<1>(param.param), "_m", std::get<2>(param.param));
    });

}  // namespace
}  // namespace jitpipe::overlap_reduce_test
