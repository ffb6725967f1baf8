// Conformance with files from PyTorch's and torchtitan's repositories and
// with PyTorch main's lowering rules:
//   - tests/testdata/conformance/real/dualpipev_4rank_10mb.csv (PyTorch's
//     test artifact) and torchtitan_custom_schedule.csv (torchtitan's
//     tests/assets/custom_schedule.csv), as data: generated, shown, lowered
//     and simulated, the outputs held to tests/testdata/real_golden/;
//   - tests/testdata/pytorch_main/*_waits.csv, lowered programs with WAIT
//     actions written by hand from the PRs' rules (that directory's README):
//     jitpipe's lowering must produce them byte for byte.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"
#include "scheduler/ir/format_grid.h"
#include "scheduler/ir/schedule_csv.h"
#include "scheduler/passes/lower.h"
#include "scheduler/analysis/validate.h"
#include "stages/predict/predict.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::real_files_test {
namespace {

using ::jitpipe::testing::ReadTestdata;

// PyTorch's artifact is exactly what its DualPipeV generator gives for
// pp 4, 10 microbatches, and so is ours.
TEST(RealFilesTest, DualPipeVArtifactIsTheGeneratorsOrder) {
  const std::string file = ReadTestdata("conformance/real/dualpipev_4rank_10mb.csv");
  ASSERT_OK_AND_ASSIGN(Schedule generated, Generate({"dualpipev", 4, 10, 0}));
  EXPECT_EQ(ScheduleToCsv(generated), file);
}

struct RealFile {
  std::string name;
  double makespan_us;  // under UnitModel
  double busy_us;      // per rank
};

class RealFileGoldenTest : public ::testing::TestWithParam<RealFile> {};

// Each file: its grid, PyTorch's full lowering (--recv early --fsdp
// --reduce-grad) and jitpipe's with PyTorch main's waits (--reduce-grad
// --wait-send --defer-reduce-wait) as the golden files hold them; every
// lowering valid, PyTorch's under strict semantics too; one step's
// makespan under unit costs.
TEST_P(RealFileGoldenTest, ShowsLowersAndSimulatesAsTheGoldenFiles) {
  const RealFile& f = GetParam();
  ASSERT_OK_AND_ASSIGN(Schedule s,
                       ParseScheduleCsv(ReadTestdata("conformance/real/" + f.name + ".csv")));
  EXPECT_OK(Validate(s));
  EXPECT_EQ(FormatPipelineOrder(s.ranks), ReadTestdata("real_golden/" + f.name + ".show.txt"));
  ASSERT_OK_AND_ASSIGN(Schedule pytorch, Lower(s, {.recv = RecvPlacement::kEarly, .fsdp = true,
                                                   .reduce_grad = true}));
  EXPECT_EQ(ScheduleToCsv(pytorch),
            ReadTestdata("real_golden/" + f.name + ".pytorch_lowering.csv"));
  EXPECT_OK(Validate(pytorch, {.semantics = CommSemantics::kStrict}));
  ASSERT_OK_AND_ASSIGN(Schedule waits,
                       Lower(s, {.reduce_grad = true, .defer_reduce_wait = true,
                                 .wait_send = true, .check_invariants = true}));
  EXPECT_EQ(ScheduleToCsv(waits), ReadTestdata("real_golden/" + f.name + ".jit_waits.csv"));
  EXPECT_OK(Validate(waits));
  ASSERT_OK_AND_ASSIGN(Prediction p, Predict(s, UnitCostModel()));
  EXPECT_DOUBLE_EQ(p.simulation.makespan_us, f.makespan_us);
  for (const RankSimulation& r : p.simulation.ranks) EXPECT_DOUBLE_EQ(r.busy_us, f.busy_us);
}

INSTANTIATE_TEST_SUITE_P(
    Files, RealFileGoldenTest,
    ::testing::Values(
        // 2 stages x 10 microbatches x (F + B) = 60 busy; the V's 6 bubbles,
        // as at 8 microbatches (the DualPipe anchor: 54 = 48 + 6).
        RealFile{"dualpipev_4rank_10mb", 66, 60},
        // 2 stages x 8 microbatches x (F + I + W) = 48 busy on each rank.
        RealFile{"torchtitan_custom_schedule", 50, 48}),
    [](const ::testing::TestParamInfo<RealFile>& param) { return param.param.name; });

struct HandWritten {
  std::string file;
  GenerateOptions compute;
};

class PyTorchMainGoldenTest : public ::testing::TestWithParam<HandWritten> {};

// PyTorch's lowering of its generator's order (--recv early --fsdp
// --reduce-grad), then _add_wait_send and defer_reduce_grad_wait as the PRs
// state them, written out by hand: jitpipe's passes give the same program
// byte for byte, which every check accepts, FIFO communicators included.
TEST_P(PyTorchMainGoldenTest, LoweringEqualsTheHandWrittenProgram) {
  const HandWritten& h = GetParam();
  const std::string golden = ReadTestdata("pytorch_main/" + h.file);
  ASSERT_OK_AND_ASSIGN(Schedule compute, Generate(h.compute));
  ASSERT_OK_AND_ASSIGN(Schedule lowered,
                       Lower(compute, {.recv = RecvPlacement::kEarly, .fsdp = true,
                                       .reduce_grad = true, .defer_reduce_wait = true,
                                       .wait_send = true, .check_invariants = true}));
  EXPECT_EQ(ScheduleToCsv(lowered), golden);
  ASSERT_OK_AND_ASSIGN(Schedule read, ParseScheduleCsv(golden));
  EXPECT_EQ(read.ranks, lowered.ranks);
  EXPECT_OK(Validate(read, {.semantics = CommSemantics::kStrict}));
  EXPECT_OK(Validate(read, {.comms = CommLayout::kPerEdge}));
  EXPECT_OK(Validate(read, {.comms = CommLayout::kPerGroup}));
  EXPECT_OK(Predict(read, UnitCostModel()).status());
}

INSTANTIATE_TEST_SUITE_P(
    Files, PyTorchMainGoldenTest,
    ::testing::Values(HandWritten{"interleaved1f1b_pp2_mb2_v2_waits.csv",
                                  {"interleaved-1f1b", 2, 2, 2}},
                      HandWritten{"dualpipev_pp2_mb4_waits.csv", {"dualpipev", 2, 4, 0}}),
    [](const ::testing::TestParamInfo<HandWritten>& param) {
      return param.param.compute.schedule == "dualpipev" ? "DualPipeV" : "Interleaved1F1B";
    });

}  // namespace
}  // namespace jitpipe::real_files_test
