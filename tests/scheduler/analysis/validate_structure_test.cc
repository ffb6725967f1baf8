#include "scheduler/analysis/validate_structure.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"
#include "scheduler/ir/schedule_csv.h"
#include "scheduler/passes/lower.h"
#include "tests/testing/conformance.h"
#include "tests/testing/program_mutations.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::validate_structure_test {
namespace {

using ::jitpipe::testing::CsvFromJson;
using ::jitpipe::testing::MutateProgram;
using ::jitpipe::testing::PytorchConformanceNames;
using ::jitpipe::testing::ReadTestdata;
using ::jitpipe::testing::ReadTestdataJson;

class ValidateStructureConformanceTest : public ::testing::TestWithParam<std::string> {};

// Every order PyTorch validates, we validate; 1F1B's IR fails in both (its
// last rank is off by one) while its runtime order passes.
TEST_P(ValidateStructureConformanceTest, AgreesWithPyTorch) {
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/" + GetParam() + ".json");
  if (d.contains("error")) GTEST_SKIP() << "PyTorch refuses these parameters";
  const std::string source = d["schedule"] == "GPipe" ? "ranks_before_reduce_grad"
                             : d["schedule"] == "1F1B" ? "ranks_runtime_equivalent"
                                                       : "ranks";
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(CsvFromJson(d[source])));
  EXPECT_OK(ValidateStructure(s));
  if (d["schedule"] == "1F1B") {
    ASSERT_OK_AND_ASSIGN(Schedule buggy,
                         ParseScheduleCsv(CsvFromJson(d["ranks_before_reduce_grad"])));
    EXPECT_FALSE(ValidateStructure(buggy).ok());
  }
  if (!d.contains("ranks_with_comms")) return;  // PyTorch cannot lower 1F1B's IR
  ASSERT_OK_AND_ASSIGN(Schedule lowered, ParseScheduleCsv(CsvFromJson(d["ranks_with_comms"])));
  EXPECT_OK(ValidateStructure(lowered));
}

INSTANTIATE_TEST_SUITE_P(Pytorch, ValidateStructureConformanceTest,
                         ::testing::ValuesIn(PytorchConformanceNames()));

TEST(ValidateStructureTest, AcceptsTheRealFiles) {
  for (const char* file : {"dualpipev_4rank_10mb.csv", "torchtitan_example.csv",
                           "torchtitan_4-rank.csv"}) {
    ASSERT_OK_AND_ASSIGN(Schedule s,
                         ParseScheduleCsv(ReadTestdata(std::string("conformance/real/") + file)));
    EXPECT_OK(ValidateStructure(s)) << file;
  }
}

TEST(ValidateStructureTest, LegacyZeroBubbleFileNeedsLegacyNames) {
  const std::string text = ReadTestdata("conformance/real/zb1p_2rank_2stagep_compute.csv");
  ASSERT_OK_AND_ASSIGN(Schedule strict, ParseScheduleCsv(text));
  EXPECT_EQ(::jitpipe::testing::Message(ValidateStructure(strict)),
            "rank 0, index 6 (2W0): weight backward of stage 2 microbatch 0 after the full "
            "backward at index 5; B already computes weight gradients (W needs an I) (files "
            "from the zero-bubble repository use B for the input backward: pass "
            "--legacy-names)");
  ASSERT_OK_AND_ASSIGN(Schedule legacy,
                       ParseScheduleCsv(text, CsvReadOptions{.legacy_backward_names = true}));
  EXPECT_OK(ValidateStructure(legacy));
}

struct BadOrder {
  std::string name;
  std::string csv;
  std::string error;
};

class ValidateStructureErrorTest : public ::testing::TestWithParam<BadOrder> {};

TEST_P(ValidateStructureErrorTest, NamesRankIndexAndAction) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(GetParam().csv));
  absl::Status status = ValidateStructure(s);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(::jitpipe::testing::Message(status), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Bad, ValidateStructureErrorTest,
    ::testing::Values(
        BadOrder{"BackwardBeforeForward", "0F0,0F1,0B0,0B1\n1B0,1F0,1F1,1B1\n",
                 "rank 1, index 0 (1B0): full backward of stage 1 microbatch 0 comes before its "
                 "forward"},
        BadOrder{"DuplicateForward", "0F0,0F0,0B0\n1F0,1B0\n",
                 "rank 0, index 1 (0F0): a second forward of stage 0 microbatch 0; the first is "
                 "at index 0"},
        BadOrder{"WWithoutI", "0F0,0W0,0B0\n1F0,1B0\n",
                 "rank 0, index 1 (0W0): weight backward of stage 0 microbatch 0 comes before "
                 "its input backward (I)"},
        BadOrder{"IWithoutW", "0F0,0I0\n1F0,1B0\n",
                 "rank 0: stage 0 has an input backward (I) but no weight backward (W) for "
                 "microbatch 0 (I at index 1)"},
        BadOrder{"MissingForward", "0F0,0F1,0B0,0B1\n1F0,1B0\n",
                 "rank 1: stage 1 has no forward for microbatch 1"},
        BadOrder{"MissingBackward", "0F0,0B0\n1F0\n",
                 "rank 1: stage 1 has no backward (B or I) for microbatch 0"},
        BadOrder{"DuplicateBackward", "0F0,0B0,0I0,0W0\n1F0,1B0\n",
                 "rank 0, index 2 (0I0): a second input backward of stage 0 microbatch 0; the "
                 "first is at index 1"},
        BadOrder{"OverlapBackwardBeforeForward", "0F0,(0B1;0F1)OVERLAP_F_B,0B0\n1F0,1F1,1B0,1B1\n",
                 "rank 0, index 1 ((0B1;0F1)OVERLAP_F_B): full backward of stage 0 microbatch 1 "
                 "comes before its forward"}),
    [](const ::testing::TestParamInfo<BadOrder>& param_info) { return param_info.param.name; });

TEST(ValidateStructureTest, RefusesCommsInAComputeOnlyProgram) {
  Schedule s;
  s.pp = 1;
  s.stages_per_rank = 1;
  s.microbatches = 1;
  s.stage_to_rank = {0};
  s.ranks = {{Action::Make(ActionKind::kForward, 0, 0), Action::StageWide(ActionKind::kReduceGrad, 0),
              Action::Make(ActionKind::kBackward, 0, 0)}};
  EXPECT_EQ(::jitpipe::testing::Message(ValidateStructure(s)),
            "rank 0, index 1 (0REDUCE_GRAD): REDUCE_GRAD in a compute-only program (lowered is "
            "false)");
  s.lowered = true;
  EXPECT_OK(ValidateStructure(s));
}

// Stage-wide actions: one REDUCE_GRAD per stage, UNSHARD and RESHARD in
// turn (the memory planner relies on both; the pipeline fuzzer found a
// program with two REDUCE_GRADs that validated and then could not be planned).
TEST(ValidateStructureTest, StageWideActionsReduceOnceAndShardInTurn) {
  const Action f = Action::Make(ActionKind::kForward, 0, 0);
  const Action b = Action::Make(ActionKind::kBackward, 0, 0);
  const Action reduce = Action::StageWide(ActionKind::kReduceGrad, 0);
  const Action unshard = Action::StageWide(ActionKind::kUnshard, 0);
  const Action reshard = Action::StageWide(ActionKind::kReshard, 0);
  Schedule s;
  s.pp = 1;
  s.stages_per_rank = 1;
  s.microbatches = 1;
  s.stage_to_rank = {0};
  s.lowered = true;
  s.ranks = {{unshard, f, reshard, unshard, b, reshard, reduce}};
  EXPECT_OK(ValidateStructure(s));
  s.ranks = {{unshard, f, b, reduce}};  // open to the end of the step
  EXPECT_OK(ValidateStructure(s));
  s.ranks = {{f, reduce, b, reduce}};
  EXPECT_EQ(::jitpipe::testing::Message(ValidateStructure(s)),
            "rank 0, index 3 (0REDUCE_GRAD): a second gradient reduction of stage 0; the first "
            "is at index 1");
  s.ranks = {{unshard, f, unshard, b}};
  EXPECT_EQ(::jitpipe::testing::Message(ValidateStructure(s)),
            "rank 0, index 2 (0UNSHARD): stage 0 is already unsharded (UNSHARD at index 0, no "
            "RESHARD since)");
  s.ranks = {{f, reshard, b}};
  EXPECT_EQ(::jitpipe::testing::Message(ValidateStructure(s)),
            "rank 0, index 1 (0RESHARD): stage 0 is not unsharded (no UNSHARD before it)");
  // PyTorch main's WAIT_REDUCE_GRAD: once, after the stage's REDUCE_GRAD.
  const Action wait = Action::StageWide(ActionKind::kWaitReduceGrad, 0);
  s.ranks = {{f, b, reduce, wait}};
  EXPECT_OK(ValidateStructure(s));
  s.ranks = {{f, b, wait, reduce}};
  EXPECT_EQ(::jitpipe::testing::Message(ValidateStructure(s)),
            "rank 0, index 2 (0WAIT_REDUCE_GRAD): waits for the gradient reduction of stage 0, "
            "which has not started (no REDUCE_GRAD before it)");
  s.ranks = {{f, b, reduce, wait, wait}};
  EXPECT_EQ(::jitpipe::testing::Message(ValidateStructure(s)),
            "rank 0, index 4 (0WAIT_REDUCE_GRAD): a second wait for the gradient reduction of "
            "stage 0; the first is at index 3");
}

TEST(ValidateStructureTest, RefusesAStageOnTheWrongRankAndOutOfRangeMicrobatches) {
  Schedule s;
  s.pp = 2;
  s.stages_per_rank = 1;
  s.microbatches = 1;
  s.stage_to_rank = {0, 1};
  s.ranks = {{Action::Make(ActionKind::kForward, 1, 0)}, {}};
  EXPECT_EQ(::jitpipe::testing::Message(ValidateStructure(s)),
            "rank 0, index 0 (1F0): stage 1 lives on rank 1, not on this rank");
  s.ranks = {{Action::Make(ActionKind::kForward, 0, 3)}, {}};
  EXPECT_EQ(::jitpipe::testing::Message(ValidateStructure(s)),
            "rank 0, index 0 (0F3): microbatch 3 is out of range; each stage runs 1 "
            "microbatches (0..0)");
}

// The one-byte-per-pair sweep accepts exactly what the per-action checker
// accepts, and every message comes from the latter.
TEST(ValidateStructureTest, FastSweepAgreesWithThePerActionChecker) {
  std::mt19937 rng(20261203);
  int compared = 0, refused = 0;
  for (const char* name : {"1f1b", "interleaved-zb", "zbv", "dualpipev", "dualpipe"}) {
    ASSERT_OK_AND_ASSIGN(Schedule compute, Generate({.schedule = name, .pp = 4, .microbatches = 8}));
    ASSERT_OK_AND_ASSIGN(Schedule lowered,
                         Lower(compute, {.recv = RecvPlacement::kEarly, .fsdp = true, .reduce_grad = true}));
    for (const Schedule* base : {&compute, &lowered}) {
      for (int trial = 0; trial < 300; ++trial) {
        Schedule s = *base;
        for (int edits = 1 + trial % 3; edits > 0; --edits) MutateProgram(s, rng);
        const absl::Status fast = ValidateStructure(s);
        const absl::Status exact = ValidateStructurePerAction(s);
        ++compared;
        ASSERT_EQ(fast.ok(), exact.ok()) << name << " trial " << trial << ": " << exact;
        if (!fast.ok()) ++refused;
        EXPECT_EQ(fast, exact);
      }
    }
  }
  EXPECT_GT(refused, 1000) << compared << " compared";
  EXPECT_GT(compared - refused, 100) << compared << " compared";
}

}  // namespace
}  // namespace jitpipe::validate_structure_test
