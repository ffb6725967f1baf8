#include "scheduler/passes/defer_reduce_wait.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/passes/lower.h"
#include "scheduler/analysis/validate.h"
#include "tests/scheduler/passes/generator_cases.h"
#include "tests/scheduler/passes/pass_test_util.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::defer_reduce_wait_test {
namespace {

using ::jitpipe::testing::EveryGenerator;
using ::jitpipe::testing::FromRows;
using ::jitpipe::testing::GeneratorCase;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::Rows;

// The header's example: one rank, stages 0 and 1.
TEST(DeferReduceWaitTest, WaitsJustBeforeTheNextReduction) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 1F0 1B0 1REDUCE_GRAD 0B0 0REDUCE_GRAD"}));
  s.stages_per_rank = 2;
  ASSERT_OK_AND_ASSIGN(Schedule out, DeferReduceWait(s));
  EXPECT_EQ(Rows(out), (std::vector<std::string>{
                           "0F0 1F0 1B0 1REDUCE_GRAD 0B0 1WAIT_REDUCE_GRAD 0REDUCE_GRAD "
                           "0WAIT_REDUCE_GRAD"}));
}

TEST(DeferReduceWaitTest, RefusesSingleStageSchedulesAndProgramsWithoutReductions) {
  ASSERT_OK_AND_ASSIGN(Schedule single,
                       FromRows({"0F0 0SEND_F0 0RECV_B0 0B0 0REDUCE_GRAD",
                                 "1RECV_F0 1F0 1B0 1SEND_B0 1REDUCE_GRAD"}));
  EXPECT_EQ(Message(DeferReduceWait(single)),
            "deferring reduction waits needs ranks with two or more stages: with one, nothing "
            "can run between a stage's reduction and its wait (PyTorch refuses "
            "defer_reduce_grad_wait for single-stage schedules)");
  ASSERT_OK_AND_ASSIGN(Schedule none, FromRows({"0F0 1F0 1B0 0B0 0UNSHARD 0RESHARD"}));
  none.stages_per_rank = 2;
  EXPECT_EQ(Message(DeferReduceWait(none)),
            "no REDUCE_GRAD to defer the wait of (lower with reduce_grad)");
  ASSERT_OK_AND_ASSIGN(Schedule compute, FromRows({"0F0 1F0 1B0 0B0"}));
  compute.stages_per_rank = 2;
  EXPECT_EQ(Message(Lower(compute, {.defer_reduce_wait = true})),
            "defer_reduce_wait needs reduce_grad (there is no reduction to wait for)");
}

class DeferReduceWaitGeneratorTest : public ::testing::TestWithParam<GeneratorCase> {};

// On every schedule with two stages per rank: every reduction is waited for
// once, before the rank's next reduction starts (at most one outstanding),
// the last at the program's end; only waits were added; the program stays
// deadlock-free. Single-stage schedules are refused.
TEST_P(DeferReduceWaitGeneratorTest, AtMostOneReductionOutstanding) {
  const GeneratorCase& gen = GetParam();
  ASSERT_OK_AND_ASSIGN(Schedule compute, Generate(gen.Spec()));
  absl::StatusOr<Schedule> out =
      Lower(compute, {.reduce_grad = true, .defer_reduce_wait = true, .check_invariants = true});
  if (compute.stages_per_rank < 2) {
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    return;
  }
  ASSERT_OK(out.status());
  ASSERT_OK_AND_ASSIGN(Schedule plain, Lower(compute, {.reduce_grad = true}));
  EXPECT_OK(Validate(*out));
  for (int r = 0; r < out->pp; ++r) {
    SCOPED_TRACE(r);
    int outstanding = -1, reductions = 0, waits = 0;
    RankProgram without;
    for (const Action& a : out->ranks[r]) {
      if (a.kind == ActionKind::kReduceGrad) {
        EXPECT_EQ(outstanding, -1) << "a reduction starts while another is outstanding";
        outstanding = a.stage;
        ++reductions;
      }
      if (a.kind == ActionKind::kWaitReduceGrad) {
        EXPECT_EQ(a.stage, outstanding);
        outstanding = -1;
        ++waits;
        continue;
      }
      without.push_back(a);
    }
    EXPECT_EQ(outstanding, -1);
    EXPECT_EQ(waits, reductions);
    EXPECT_EQ(out->ranks[r].back().kind, ActionKind::kWaitReduceGrad);
    EXPECT_EQ(without, plain.ranks[r]);
  }
}

INSTANTIATE_TEST_SUITE_P(Generators, DeferReduceWaitGeneratorTest,
                         ::testing::ValuesIn(EveryGenerator()),
                         ::jitpipe::testing::GeneratorCaseName);

}  // namespace
}  // namespace jitpipe::defer_reduce_wait_test
