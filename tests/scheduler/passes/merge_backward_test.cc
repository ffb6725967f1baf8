#include "scheduler/passes/merge_backward.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/ir/schedule_csv.h"
#include "scheduler/passes/split_backward.h"
#include "tests/scheduler/passes/pass_test_util.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::merge_backward_test {
namespace {

using ::jitpipe::testing::FromRows;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::Rows;

struct Case {
  std::string name;
  std::vector<std::string> in;
  std::vector<std::string> out;
};

class MergeBackwardTest : public ::testing::TestWithParam<Case> {};

TEST_P(MergeBackwardTest, MergesAsPyTorch) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows(GetParam().in));
  ASSERT_OK_AND_ASSIGN(Schedule merged, MergeBackward(s));
  EXPECT_EQ(Rows(merged), GetParam().out);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MergeBackwardTest,
    ::testing::Values(
        // The header's example: a bubble between I and its W does not count;
        // an I followed by something else stays.
        Case{"HeaderExample",
             {"0F0 0I0 . 0W0 0F1 0I1 1F0 0W1"},
             {"0F0 0B0 0F1 0I1 1F0 0W1"}},
        // A W of another microbatch or stage does not merge.
        Case{"OnlyItsOwnW",
             {"0F0 0F1 0I0 0I1 0W0 0W1 ."},
             {"0F0 0F1 0I0 0I1 0W0 0W1"}},
        // An I inside a compound is left alone.
        Case{"CompoundStays",
             {"0F0 (0F1;0I0)OVERLAP_F_B 0W0 0I1 0W1"},
             {"0F0 (0F1;0I0)OVERLAP_F_B 0W0 0B1"}},
        // Nothing to merge beyond the bubbles PyTorch drops.
        Case{"NothingToMerge", {". 0F0 . 0B0"}, {"0F0 0B0"}}),
    [](const ::testing::TestParamInfo<Case>& param) { return param.param.name; });

// Merging undoes splitting where each I is directly followed by its W.
TEST(MergeBackwardTest, UndoesSplitBackward) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0F1 0B0 0B1", "1F0 1B0 1F1 1B1"}));
  ASSERT_OK_AND_ASSIGN(Schedule split, SplitBackward(s));
  ASSERT_OK_AND_ASSIGN(Schedule merged, MergeBackward(split));
  EXPECT_EQ(Rows(merged), Rows(s));
}

// PyTorch's zero-bubble test artifact (legacy names: B is I) merges every
// adjacent I/W pair.
TEST(MergeBackwardTest, MergesTheZeroBubbleArtifact) {
  ASSERT_OK_AND_ASSIGN(
      Schedule s,
      ParseScheduleCsv(::jitpipe::testing::ReadTestdata(
                           "conformance/real/zb1p_2rank_2stagep_compute.csv"),
                       CsvReadOptions{.legacy_backward_names = true}));
  ASSERT_OK_AND_ASSIGN(Schedule merged, MergeBackward(s));
  size_t i = 0, b = 0, w = 0;
  for (const RankProgram& program : merged.ranks) {
    for (const Action& a : program) {
      i += a.kind == ActionKind::kBackwardInput;
      b += a.kind == ActionKind::kBackward;
      w += a.kind == ActionKind::kBackwardWeight;
      EXPECT_FALSE(a.is_bubble());
    }
  }
  EXPECT_EQ(i, w);
  EXPECT_EQ(b + i, static_cast<size_t>(merged.num_stages() * merged.microbatches));
  EXPECT_GT(b, 0u);
}

TEST(MergeBackwardErrorTest, RefusesALoweredProgram) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0I0 0W0 0REDUCE_GRAD"}));
  EXPECT_EQ(Message(MergeBackward(s)),
            "rank 0, index 3 (0REDUCE_GRAD): expected a compute-only program (F, B, I, W, "
            "OVERLAP_F_B and bubbles)");
}

}  // namespace
}  // namespace jitpipe::merge_backward_test
