#include "scheduler/generators/dual_pipe_v.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/unit_cost_replay.h"

namespace jitpipe::dual_pipe_v_test {
namespace {

using ::jitpipe::testing::Message;
using ::jitpipe::testing::ProgramText;
using ::jitpipe::testing::ReplayUnitCosts;
using ::jitpipe::testing::UnitCostResult;
using Text = std::vector<std::vector<std::string>>;

// p = 1, m = 2: step 2 runs F(s0) F(s1); step 4's single iteration is the
// last rank's first, so its first pair is not overlapped; step 6 switches
// rank 0 to split backwards between its two actions; step 8 emits the W.
TEST(DualPipeVTest, OneRank) {
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateDualPipeV(1, 2, 2));
  EXPECT_EQ(ProgramText(s.ranks), (Text{{"0F0", "1F0", "0F1", "1B0", "(1F1;0B0)OVERLAP_F_B",
                                         "1B1", "0I1", "0W1"}}));
  EXPECT_EQ(s.name, "dualpipev");
  EXPECT_EQ(s.placement, Placement::kV);
}

// DeepSeek's DualPipeV anchor, pp4 m8, costs an overlapped pair as F + B:
// makespan 54, every rank busy 48 with spans 54..51, and a peak of 4.5
// full-rank units (9 stage activations) per rank.
TEST(DualPipeVTest, MatchesDeepSeeksUnitCostAnchor) {
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateDualPipeV(4, 8, 2));
  ASSERT_OK_AND_ASSIGN(UnitCostResult r, ReplayUnitCosts(s));
  EXPECT_EQ(r.makespan, 54);
  EXPECT_EQ(r.busy, (std::vector<double>{48, 48, 48, 48}));
  EXPECT_EQ(r.span, (std::vector<double>{54, 53, 52, 51}));
  EXPECT_EQ(r.peak_stage_units, (std::vector<int>{9, 9, 9, 9}));
}

struct RefusalCase {
  int pp, microbatches, stages_per_rank;
  std::string message;
};

class DualPipeVRefusalTest : public ::testing::TestWithParam<RefusalCase> {};

TEST_P(DualPipeVRefusalTest, StatesTheConstraint) {
  const RefusalCase& c = GetParam();
  absl::StatusOr<Schedule> s = GenerateDualPipeV(c.pp, c.microbatches, c.stages_per_rank);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(s), c.message);
}

INSTANTIATE_TEST_SUITE_P(
    Messages, DualPipeVRefusalTest,
    ::testing::Values(
        RefusalCase{4, 5, 2,
                    "dualpipev: needs at least 2 x pp = 8 microbatches (2 stages per rank x 4 "
                    "ranks), got 5"},
        RefusalCase{1, 1, 2,
                    "dualpipev: needs at least 2 x pp = 2 microbatches (2 stages per rank x 1 "
                    "rank), got 1"},
        RefusalCase{4, 8, 1, "dualpipev: needs exactly 2 stages per rank, got 1"}));

}  // namespace
}  // namespace jitpipe::dual_pipe_v_test
