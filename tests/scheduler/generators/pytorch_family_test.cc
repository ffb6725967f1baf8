// PyTorch's seven generators through the registry: names and defaults, every
// conformance golden (bubbles included), PyTorch's rejections, and a sweep of
// sizes beyond the goldens checked for structure and deadlock freedom.
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"
#include "scheduler/generators/generator_families.h"
#include "scheduler/generators/interleaved_rounds.h"
#include "scheduler/analysis/validate_structure.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"
#include "tests/testing/unit_cost_replay.h"

namespace jitpipe::pytorch_family_test {
namespace {

using ::jitpipe::testing::JsonText;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::ProgramText;
using ::jitpipe::testing::PytorchConformanceNames;
using ::jitpipe::testing::ReadTestdataJson;
using ::jitpipe::testing::ReplayUnitCosts;
using ::jitpipe::testing::UnitCostResult;
using ::testing::ElementsAre;

TEST(PytorchFamilyTest, ListsTheSevenWithPyTorchsClassNamesAsAliases) {
  std::vector<std::tuple<std::string, std::string, int>> got;
  for (const GeneratorInfo& g : PytorchFamily()) {
    ASSERT_EQ(g.aliases.size(), 1u) << g.name;
    EXPECT_NE(g.generate, nullptr) << g.name;
    EXPECT_FALSE(g.summary.empty()) << g.name;
    got.emplace_back(g.name, g.aliases[0], g.default_stages_per_rank);
  }
  EXPECT_THAT(got, ElementsAre(std::tuple("gpipe", "GPipe", 1), std::tuple("1f1b", "1F1B", 1),
                               std::tuple("interleaved-1f1b", "Interleaved1F1B", 2),
                               std::tuple("looped-bfs", "LoopedBFS", 2),
                               std::tuple("interleaved-zb", "InterleavedZeroBubble", 2),
                               std::tuple("zbv", "ZBVZeroBubble", 2),
                               std::tuple("dualpipev", "DualPipeV", 2)));
}

TEST(PytorchFamilyTest, DefaultStagesPerRankApplyWhenZero) {
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({.schedule = "interleavedzerobubble", .pp = 2,
                                             .microbatches = 4}));
  EXPECT_EQ(s.name, "interleaved-zb");
  EXPECT_EQ(s.stages_per_rank, 2);
  EXPECT_EQ(s.stage_to_rank, (std::vector<int>{0, 1, 0, 1}));
}

// Messages for the goldens PyTorch refuses (1F1B's are accepted: see
// one_f_one_b.h).
const std::map<std::string, std::string>& RejectionMessages() {
  static const auto* messages = new std::map<std::string, std::string>{
      {"DualPipeV_pp2_mb1_v2",
       "dualpipev: needs at least 2 x pp = 4 microbatches (2 stages per rank x 2 ranks), got 1"},
      {"DualPipeV_pp2_mb2_v2",
       "dualpipev: needs at least 2 x pp = 4 microbatches (2 stages per rank x 2 ranks), got 2"},
      {"DualPipeV_pp2_mb3_v2",
       "dualpipev: needs at least 2 x pp = 4 microbatches (2 stages per rank x 2 ranks), got 3"},
      {"DualPipeV_pp4_mb3_v2",
       "dualpipev: needs at least 2 x pp = 8 microbatches (2 stages per rank x 4 ranks), got 3"},
      {"DualPipeV_pp4_mb4_v2",
       "dualpipev: needs at least 2 x pp = 8 microbatches (2 stages per rank x 4 ranks), got 4"},
      {"DualPipeV_pp4_mb5_v2",
       "dualpipev: needs at least 2 x pp = 8 microbatches (2 stages per rank x 4 ranks), got 5"},
      {"DualPipeV_pp4_mb7_v2",
       "dualpipev: needs at least 2 x pp = 8 microbatches (2 stages per rank x 4 ranks), got 7"},
      {"Interleaved1F1B_pp2_mb5_v2",
       "interleaved-1f1b: 5 microbatches is not a multiple of max(1, 5 // 2) = 2; use 4 or 6"},
      {"Interleaved1F1B_pp2_mb5_v4",
       "interleaved-1f1b: 5 microbatches is not a multiple of max(1, 5 // 2) = 2; use 4 or 6"},
      {"Interleaved1F1B_pp4_mb9_v2",
       "interleaved-1f1b: 9 microbatches is not a multiple of max(1, 9 // 4) = 2; use 8 or 10"},
      {"Interleaved1F1B_pp4_mb9_v4",
       "interleaved-1f1b: 9 microbatches is not a multiple of max(1, 9 // 4) = 2; use 8 or 10"},
      {"InterleavedZeroBubble_pp2_mb5_v2",
       "interleaved-zb: 5 microbatches is not a multiple of max(1, 5 // 2) = 2; use 4 or 6"},
      {"InterleavedZeroBubble_pp2_mb5_v4",
       "interleaved-zb: 5 microbatches is not a multiple of max(1, 5 // 2) = 2; use 4 or 6"},
      {"InterleavedZeroBubble_pp4_mb9_v2",
       "interleaved-zb: 9 microbatches is not a multiple of max(1, 9 // 4) = 2; use 8 or 10"},
      {"InterleavedZeroBubble_pp4_mb9_v4",
       "interleaved-zb: 9 microbatches is not a multiple of max(1, 9 // 4) = 2; use 8 or 10"},
      {"ZBVZeroBubble_pp2_mb4_v4", "zbv: needs exactly 2 stages per rank, got 4"},
      {"ZBVZeroBubble_pp4_mb8_v4", "zbv: needs exactly 2 stages per rank, got 4"},
  };
  return *messages;
}

// The golden key holding the order our generator must emit exactly.
std::string GoldenKey(const std::string& schedule) {
  if (schedule == "GPipe") return "ranks_before_reduce_grad";  // `ranks` has REDUCE_GRAD
  if (schedule == "1F1B") return "ranks_runtime_equivalent";   // PyTorch's IR is off by one
  return "ranks";
}

class PytorchConformanceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PytorchConformanceTest, GeneratesPyTorchsExactOrder) {
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/" + GetParam() + ".json");
  const std::string schedule = d["schedule"];
  absl::StatusOr<Schedule> s = Generate({.schedule = schedule,  // PyTorch's class name
                                         .pp = d["pp"],
                                         .microbatches = d["microbatches"],
                                         .stages_per_rank = d["stages_per_rank"]});
  if (d.contains("error") && schedule != "1F1B") {
    auto it = RejectionMessages().find(GetParam());
    ASSERT_NE(it, RejectionMessages().end()) << "no expected message for " << GetParam();
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(Message(s), it->second);
    return;
  }
  ASSERT_OK(s);
  EXPECT_OK(ValidateStructure(*s));
  if (d.contains("error")) return;  // 1F1B with m < p: PyTorch has no order to compare
  EXPECT_EQ(ProgramText(s->ranks), JsonText(d[GoldenKey(schedule)]));
  if (d.contains("stage_to_rank")) {
    std::vector<int> want(d["stage_to_rank"].size());
    for (const auto& [stage, rank] : d["stage_to_rank"].items()) want[std::stoi(stage)] = rank;
    EXPECT_EQ(s->stage_to_rank, want);
  }
}

INSTANTIATE_TEST_SUITE_P(Pytorch, PytorchConformanceTest,
                         ::testing::ValuesIn(PytorchConformanceNames()));

TEST(PytorchFamilyTest, EveryGoldenRejectionHasAnExpectedMessage) {
  int rejections = 0;
  for (const std::string& name : PytorchConformanceNames()) {
    nlohmann::json d = ReadTestdataJson("conformance/pytorch/" + name + ".json");
    if (!d.contains("error") || d["schedule"] == "1F1B") continue;
    ++rejections;
    EXPECT_TRUE(RejectionMessages().count(name)) << name;
  }
  EXPECT_EQ(rejections, static_cast<int>(RejectionMessages().size()));
}

// Whether PyTorch accepts the parameters (1F1B: as its runtime and Megatron
// do, any m).
bool Accepts(const std::string& name, int pp, int m, int v) {
  if (name == "gpipe" || name == "1f1b") return v == 1;
  if (name == "zbv") return v == 2;
  if (name == "dualpipev") return v == 2 && m >= 2 * pp;
  if (name == "interleaved-1f1b" || name == "interleaved-zb") return FlexibleRoundsAccept(pp, m);
  return true;  // looped-bfs
}

class PytorchSweepTest
    : public ::testing::TestWithParam<std::tuple<GeneratorInfo, int>> {};

// Sizes beyond the goldens: every accepted (m, v) yields a structurally valid
// schedule that runs to completion under unit costs with every rank doing
// all of its work; every refused one is InvalidArgument.
TEST_P(PytorchSweepTest, ValidAndDeadlockFreeForEverySize) {
  const auto& [generator, pp] = GetParam();
  for (int v = 1; v <= 4; ++v) {
    for (int m = 1; m <= 3 * pp + 1; ++m) {
      SCOPED_TRACE(::testing::Message() << generator.name << " pp " << pp << " m " << m << " v " << v);
      absl::StatusOr<Schedule> s =
          Generate({.schedule = generator.name, .pp = pp, .microbatches = m, .stages_per_rank = v});
      if (!Accepts(generator.name, pp, m, v)) {
        EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
        continue;
      }
      ASSERT_OK(s);
      EXPECT_EQ(s->name, generator.name);
      EXPECT_OK(ValidateHeader(*s));
      EXPECT_FALSE(s->lowered);
      EXPECT_EQ(s->chains, 1);
      ASSERT_OK(ValidateStructure(*s));
      ASSERT_OK_AND_ASSIGN(UnitCostResult r, ReplayUnitCosts(*s));
      // F + (I + W or B) = 3 units per stage and microbatch.
      EXPECT_EQ(r.busy, std::vector<double>(pp, 3.0 * m * v));
    }
  }
}

std::string SweepName(const ::testing::TestParamInfo<std::tuple<GeneratorInfo, int>>& info) {
  std::string name = std::get<0>(info.param).aliases[0];
  return name + "_pp" + std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Pytorch, PytorchSweepTest,
                         ::testing::Combine(::testing::ValuesIn(PytorchFamily()),
                                            ::testing::Range(1, 9)),
                         SweepName);

}  // namespace
}  // namespace jitpipe::pytorch_family_test
