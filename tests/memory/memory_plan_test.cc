#include "memory/memory_plan.h"

#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/memory/lowered_text.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::memory_plan_test {
namespace {

using ::jitpipe::testing::LoweredFromText;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::ProgramsFromJson;
using ::jitpipe::testing::PytorchConformanceNames;
using ::jitpipe::testing::ReadTestdataJson;
using ::testing::ElementsAre;

constexpr int64_t kUnit = 1 << 20;

Model Sizes(int64_t input, int64_t output, int64_t stash) {
  Model m;
  m.defaults.input_bytes = input;
  m.defaults.output_bytes = output;
  m.defaults.stash_bytes = stash;
  return m;
}

Schedule TwoRanks() {
  return LoweredFromText(2, 1, Placement::kLoop, 1,
                         {"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"});
}

// A conformance file's lowered program under `key` as a schedule.
Schedule FromConformance(const nlohmann::json& d, const std::string& key) {
  Schedule s;
  s.pp = d["pp"].get<int>();
  s.stages_per_rank = d["stages_per_rank"].get<int>();
  s.microbatches = d["microbatches"].get<int>();
  // GPipe and 1F1B files have no stage_to_rank: the identity.
  s.stage_to_rank = StageToRank(Placement::kLoop, s.pp, s.stages_per_rank);
  for (int stage = 0; stage < s.pp * s.stages_per_rank && d.contains("stage_to_rank"); ++stage) {
    s.stage_to_rank[stage] = d["stage_to_rank"][std::to_string(stage)].get<int>();
  }
  s.placement = DetectPlacement(s.stage_to_rank, s.pp);
  s.lowered = true;
  s.ranks = ProgramsFromJson(d[key]);
  return s;
}

std::vector<int64_t> PeakUnits(const std::vector<RankMemoryPlan>& plans) {
  std::vector<int64_t> out;
  for (const RankMemoryPlan& p : plans) out.push_back(p.peak.bytes / kUnit);
  return out;
}

TEST(MemoryPlanTest, SummarisesOneRank) {
  ASSERT_OK_AND_ASSIGN(RankMemoryPlan plan,
                       PlanRankMemory(TwoRanks(), Sizes(64, 128, 256), 1, {}));
  EXPECT_EQ(plan.peak.bytes, 448);
  EXPECT_EQ(plan.peak.index, 1);
  EXPECT_EQ(plan.peak_action, "1F0");
  EXPECT_THAT(plan.peak_buffers, ElementsAre(0, 1, 2));
  EXPECT_EQ(plan.lower_bound.bytes, 448);
  // By start: input 0 at 0; stash at 64, output at 320; the input grad reuses
  // the output's bytes at index 2 (320 is the smallest gap that fits 64 B).
  EXPECT_THAT(plan.arena.offsets, ElementsAre(0, 64, 320, 320, 0));
  EXPECT_EQ(plan.arena.arena_bytes, 448);
  EXPECT_EQ(plan.fragmentation_bytes(), 0);
  EXPECT_EQ(plan.ToString(),
            "rank 1, jit: peak 448 B at index 1 (1F0), lower bound 448 B, arena 448 B "
            "(greedy-by-start), fragmentation 0 B (0.00%)\n"
            "buffers live at the peak: 0 1 2\n"
            "    id  kind        stage    mb        bytes  alloc   free  from until       offset  "
            "notes\n"
            "     0  input           1     0           64      0      2     1     2            0"
            "  received\n"
            "     1  stash           1     0          256      1      2     1     2           64\n"
            "     2  output          1     0          128      1      1     1     1          320\n"
            "     3  input_grad      1     0           64      2 3/send     2     2          320\n"
            "     4  param_grad      1     -            0      2  3/end     2     3            0"
            "\n");
}

TEST(MemoryPlanTest, DrawsTheArenaOverTime) {
  Schedule s = TwoRanks();
  ASSERT_OK_AND_ASSIGN(RankMemoryPlan plan, PlanRankMemory(s, Sizes(64, 128, 256), 1, {}));
  EXPECT_EQ(MemoryMap(plan, s.ranks[1], 16),
            "rank 1 arena 448 B, 16 columns of 28 B; I input S stash O output g output_grad "
            "i input_grad G param_grad R reduce P params . free\n"
            "     0 1RECV_F0               |II..............| 64\n"
            "     1 1F0                    |IISSSSSSSSSOOOOO| 448 <- peak\n"
            "     2 1B0                    |IISSSSSSSSSiii..| 384\n"
            "     3 1SEND_B0               |...........iii..| 64\n");
}

TEST(MemoryPlanTest, EagerPaysForEveryReceiveAndSendAllStep) {
  PlanOptions eager;
  eager.policy = MemoryPolicy::kEager;
  ASSERT_OK_AND_ASSIGN(RankMemoryPlan plan, PlanRankMemory(TwoRanks(), Sizes(64, 128, 256), 1,
                                                            eager));
  EXPECT_EQ(plan.peak.bytes, 448);
  EXPECT_EQ(plan.lower_bound.bytes, 448);
  ASSERT_OK_AND_ASSIGN(plan, PlanRankMemory(TwoRanks(), Sizes(64, 128, 256), 0, eager));
  // Output and output grad both held to step end: 64 + 256 + 128 + 128.
  EXPECT_EQ(plan.peak.bytes, 576);
  EXPECT_EQ(plan.lower_bound.bytes, 448);
}

TEST(MemoryPlanTest, OneFOneBStashOnlyPeaksAtFourThreeTwoOne) {
  // PyTorch's 1F1B runtime order, lowered by PyTorch: rank r holds
  // min(m, p - r) stashes at once.
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/1F1B_pp4_mb8_v1.json");
  Schedule s = FromConformance(d, "ranks_runtime_equivalent_send_recv");
  for (MemoryPolicy policy : {MemoryPolicy::kJit, MemoryPolicy::kEager}) {
    PlanOptions options;
    options.policy = policy;
    ASSERT_OK_AND_ASSIGN(std::vector<RankMemoryPlan> plans,
                         PlanMemory(s, Sizes(0, 0, kUnit), options));
    EXPECT_THAT(PeakUnits(plans), ElementsAre(4, 3, 2, 1));
    for (const RankMemoryPlan& p : plans) {
      EXPECT_EQ(p.lower_bound.bytes, p.peak.bytes);
      EXPECT_EQ(p.arena.arena_bytes, p.peak.bytes);
    }
  }
}

TEST(MemoryPlanTest, PytorchLoweredProgramsPlan) {
  // Every conformance file with PyTorch's full lowering (UNSHARD/RESHARD,
  // REDUCE_GRAD, SEND/RECV, OVERLAP_F_B) plans under both policies.
  Model model = Sizes(1000, 1000, 4000);
  model.defaults.param_bytes = 8192;
  model.dp.grad_dtype = Dtype::kBf16;
  model.dp.reduce_dtype = Dtype::kFp32;
  int files = 0;
  for (const std::string& name : PytorchConformanceNames()) {
    nlohmann::json d = ReadTestdataJson("conformance/pytorch/" + name + ".json");
    if (!d.contains("ranks_with_comms")) continue;
    ++files;
    Schedule s = FromConformance(d, "ranks_with_comms");
    PlanOptions eager;
    eager.policy = MemoryPolicy::kEager;
    ASSERT_OK_AND_ASSIGN(std::vector<RankMemoryPlan> jit, PlanMemory(s, model, {}));
    ASSERT_OK_AND_ASSIGN(std::vector<RankMemoryPlan> held, PlanMemory(s, model, eager));
    for (int r = 0; r < s.pp; ++r) {
      EXPECT_LE(jit[r].lower_bound.bytes, jit[r].peak.bytes) << name << " rank " << r;
      EXPECT_LE(jit[r].peak.bytes, held[r].peak.bytes) << name << " rank " << r;
      EXPECT_LE(jit[r].peak.bytes, jit[r].arena.arena_bytes) << name << " rank " << r;
    }
  }
  EXPECT_EQ(files, 104);
}

TEST(MemoryPlanTest, ValidatesOptions) {
  PlanOptions options;
  options.prefetch = -1;
  EXPECT_EQ(Message(ValidatePlanOptions(options)), "--prefetch must be >= 0, got -1");
  options.prefetch = 2;
  options.policy = MemoryPolicy::kEager;
  EXPECT_EQ(Message(ValidatePlanOptions(options)), "--prefetch applies to the jit policy only");
  options = PlanOptions{};
  options.arena_slack = -0.5;
  EXPECT_EQ(Message(ValidatePlanOptions(options)),
            "--arena-slack must be a finite number >= 0, got -0.5");
  options.arena_slack = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(Message(ValidatePlanOptions(options)),
            "--arena-slack must be a finite number >= 0, got nan");
  options.arena_slack = std::numeric_limits<double>::infinity();
  EXPECT_EQ(Message(ValidatePlanOptions(options)),
            "--arena-slack must be a finite number >= 0, got inf");
  options = PlanOptions{};
  options.alignment = 48;
  EXPECT_EQ(Message(PlanRankMemory(TwoRanks(), Model{}, 0, options)),
            "the arena alignment must be a power of two, got 48");
}

// Any finite slack is valid, however large: the search then keeps the
// first layout, the start-order sweep's.
TEST(MemoryPlanTest, AHugeArenaSlackKeepsTheSweepsLayout) {
  for (double slack : {1e300, 1e18, 1.0}) {
    PlanOptions options;
    options.arena_slack = slack;
    ASSERT_OK_AND_ASSIGN(RankMemoryPlan plan,
                         PlanRankMemory(TwoRanks(), Sizes(64, 128, 256), 0, options));
    EXPECT_EQ(plan.arena.algorithm, "greedy-by-start") << slack;
    EXPECT_GE(plan.arena.arena_bytes, plan.peak.bytes) << slack;
  }
}

TEST(MemoryPlanTest, WithoutArenaOnlyLifetimesAndPeaks) {
  PlanOptions options;
  options.arena = false;
  ASSERT_OK_AND_ASSIGN(RankMemoryPlan plan,
                       PlanRankMemory(TwoRanks(), Sizes(64, 128, 256), 0, options));
  EXPECT_EQ(plan.peak.bytes, 448);
  EXPECT_TRUE(plan.arena.offsets.empty());
}

}  // namespace
}  // namespace jitpipe::memory_plan_test
