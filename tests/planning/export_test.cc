// Export to torchtitan and Megatron-LM (planning/export_torchtitan.h,
// export_megatron.h) and the layer cut they write (planning/layer_cut.h):
// over the built-in schedules, what is written reads back into the same
// program, placement and cut -- the CSV through jitpipe's CSV reader, the
// placement re-derived from the schedule name as torchtitan derives it, the
// layout through jitpipe's layout parser -- and what cannot run is refused
// with the reason.
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planning/export_megatron.h"
#include "planning/export_torchtitan.h"
#include "planning/layer_cut.h"
#include "scheduler/analysis/validate_structure.h"
#include "scheduler/generators/generate.h"
#include "scheduler/ir/schedule_csv.h"
#include "scheduler/passes/lower.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::export_test {
namespace {

using ::jitpipe::testing::Message;
using ::testing::HasSubstr;

Schedule Make(const std::string& name, int pp, int m, int v = 0) {
  absl::StatusOr<Schedule> s =
      Generate({.schedule = name, .pp = pp, .microbatches = m, .stages_per_rank = v});
  EXPECT_OK(s);
  return s.ok() ? *s : Schedule{};
}

// The even cut of `layers` body layers with both heads.
LayerCut EvenCut(int layers, int stages) {
  LayeredModel model;
  model.layers.push_back({.kind = LayerKind::kEmbedding});
  for (int i = 0; i < layers; ++i) model.layers.push_back({.kind = LayerKind::kLayer});
  model.layers.push_back({.kind = LayerKind::kLoss});
  absl::StatusOr<Partition> p = EvenPartition(model, stages);
  EXPECT_OK(p);
  return CutFromPartition(*p, model);
}

std::vector<RankProgram> WithoutBubbles(std::vector<RankProgram> ranks) {
  for (RankProgram& program : ranks) {
    std::erase_if(program, [](const Action& a) { return a.is_bubble(); });
  }
  return ranks;
}

// ---- the layer cut ------------------------------------------------------

TEST(ExportLayerCutTest, LayoutFoldsEqualMiddleStagesAndReadsBack) {
  struct Case {
    std::string layout;
    int stages;
    std::string written;
  };
  const std::vector<Case> cases = {
      {"Et*3|t*4|t*4|t*3L", 4, "Et*3|(t*4|)*2,t*3L"},
      {"Ett|tt|ttL", 3, "Et*2|t*2|t*2L"},
      {"E|t*4|t*4|t*4|L", 5, "E|(t*4|)*3,L"},
      {"Et|(|)*2,tL", 4, "Et|(|)*2,tL"},
      {"Et*2|(t*2|)*6,t*2L", 8, "Et*2|(t*2|)*6,t*2L"},
      {"Et*16L", 1, "Et*16L"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.layout);
    ASSERT_OK_AND_ASSIGN(LayerCut cut, CutFromLayout(c.layout, c.stages));
    EXPECT_EQ(cut.ToLayout(), c.written);
    ASSERT_OK_AND_ASSIGN(LayerCut again, CutFromLayout(cut.ToLayout(), c.stages));
    EXPECT_EQ(again, cut);
  }
}

TEST(ExportLayerCutTest, StagesNumberBodyLayersFromZero) {
  ASSERT_OK_AND_ASSIGN(LayerCut cut, CutFromLayout("Et*3|t*4|t*4|t*3L", 4));
  EXPECT_EQ(cut.NumLayers(), 14);
  EXPECT_EQ(cut.stages[1], (StageLayers{.first_layer = 3, .num_layers = 4}));
  EXPECT_EQ(cut.ToString(),
            "stage 0: E, layers 0-2\nstage 1: layers 3-6\nstage 2: layers 7-10\n"
            "stage 3: layers 11-13, L");
}

TEST(ExportLayerCutTest, BadLayoutsAreRefusedAsTheParserRefusesThem) {
  struct Case {
    std::string layout;
    int stages;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"E|t|L", 4, "layout \"E|t|L\" has 3 stages; the schedule has 4 per chain"},
      {"t|Et|L", 3, "layout \"t|Et|L\": the embedding must open the first stage"},
      {"Et*2|t+tL", 2, "layout \"Et*2|t+tL\": unexpected \"+\" at character 7"},
      {"EtL|t", 2, "the loss must close the last stage"},
      {"Etm|L", 2, "m (multi-token prediction) is not a layer kind"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(Message(CutFromLayout(c.layout, c.stages)), HasSubstr(c.error)) << c.layout;
  }
}

// ---- torchtitan ---------------------------------------------------------

struct TorchtitanCase {
  std::string schedule;
  int pp, microbatches, stages_per_rank;
  std::string name;  // pipeline_parallel_schedule
};

class ExportTorchtitanTest : public ::testing::TestWithParam<TorchtitanCase> {};

// CSV -> the same compute program; name -> the same placement; FQN list ->
// the same cut.
TEST_P(ExportTorchtitanTest, WritesWhatReadsBackIntoTheSameProgramAndCut) {
  const TorchtitanCase& c = GetParam();
  const Schedule s = Make(c.schedule, c.pp, c.microbatches, c.stages_per_rank);
  const LayerCut cut = EvenCut(4 * s.num_stages() - 2, s.num_stages());
  ASSERT_OK_AND_ASSIGN(TorchtitanExport e, ExportTorchtitan(s, cut, {.csv_path = "x.csv"}));
  EXPECT_EQ(e.schedule_name, c.name);
  EXPECT_EQ(e.dropped_actions, 0);

  ASSERT_OK_AND_ASSIGN(Schedule back, ParseScheduleCsv(e.csv));
  EXPECT_EQ(back.ranks, s.ranks);
  EXPECT_FALSE(back.lowered);
  EXPECT_EQ(back.microbatches, s.microbatches);
  EXPECT_EQ(back.stage_to_rank, s.stage_to_rank);
  ASSERT_OK_AND_ASSIGN(std::vector<int> placed,
                       TorchtitanStageToRank(e.schedule_name, s.pp, s.num_stages()));
  EXPECT_EQ(placed, s.stage_to_rank);

  ASSERT_EQ(e.module_fqns.size(), static_cast<size_t>(s.num_stages()));
  EXPECT_EQ(e.module_fqns.front().front(), "tok_embeddings");
  EXPECT_EQ(e.module_fqns.back().back(), "lm_head");
  ASSERT_OK_AND_ASSIGN(LayerCut cut_back, CutFromModuleFqns(e.module_fqns));
  EXPECT_EQ(cut_back, cut);

  EXPECT_THAT(e.toml, HasSubstr("\npipeline_parallel_schedule = \"" + c.name + "\"\n"));
  EXPECT_THAT(e.toml, HasSubstr("\npipeline_parallel_schedule_csv = \"x.csv\"\n"));
  EXPECT_THAT(e.toml, HasSubstr("\nnum_pp_microbatches = " + std::to_string(c.microbatches)));
  EXPECT_THAT(e.toml, HasSubstr("\npipeline_parallel_module_fqns_per_model_part = [\n"
                                "    [\"tok_embeddings\", \"layers.0\""));
  EXPECT_THAT(e.recipe, HasSubstr("    p.pipeline_parallel_schedule = \"" + c.name + "\"\n"));
  EXPECT_THAT(e.recipe, HasSubstr("        p.module_fqns_per_model_part = fqns\n"));
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, ExportTorchtitanTest,
    ::testing::Values(TorchtitanCase{"1f1b", 4, 8, 1, "PipelineScheduleSingle"},
                      TorchtitanCase{"gpipe", 4, 8, 1, "PipelineScheduleSingle"},
                      TorchtitanCase{"zb-h1", 4, 8, 1, "PipelineScheduleSingle"},
                      TorchtitanCase{"interleaved-1f1b", 4, 8, 2, "PipelineScheduleMulti"},
                      TorchtitanCase{"interleaved-1f1b", 4, 8, 4, "PipelineScheduleMulti"},
                      TorchtitanCase{"looped-bfs", 4, 8, 2, "PipelineScheduleMulti"},
                      TorchtitanCase{"interleaved-zb", 4, 8, 2, "PipelineScheduleMulti"},
                      TorchtitanCase{"zbv", 4, 8, 2, "ZBVZeroBubble"},
                      TorchtitanCase{"dualpipev", 4, 8, 2, "DualPipeV"},
                      TorchtitanCase{"v-half", 4, 8, 2, "ZBVZeroBubble"}),
    [](const ::testing::TestParamInfo<TorchtitanCase>& param) {
      std::string name = param.param.schedule + "_v" + std::to_string(param.param.stages_per_rank);
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

TEST(ExportTorchtitanLoweredTest, WritesTheComputeOrderOfALoweredProgram) {
  const Schedule s = Make("interleaved-1f1b", 4, 8, 2);
  ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(s, {.reduce_grad = true}));
  ASSERT_OK_AND_ASSIGN(TorchtitanExport e, ExportTorchtitan(lowered, std::nullopt));
  EXPECT_GT(e.dropped_actions, 0);
  ASSERT_OK_AND_ASSIGN(Schedule back, ParseScheduleCsv(e.csv));
  EXPECT_FALSE(back.lowered);
  EXPECT_EQ(back.ranks, WithoutBubbles(s.ranks));
  EXPECT_OK(ValidateStructure(back));
  EXPECT_THAT(e.notes.front(), HasSubstr("the input is lowered: its "));
  EXPECT_TRUE(e.module_fqns.empty());
  EXPECT_THAT(e.toml, ::testing::Not(HasSubstr("fqns_per_model_part = ")));
}

TEST(ExportTorchtitanLoweredTest, OldFieldNameOnRequest) {
  const Schedule s = Make("1f1b", 2, 4);
  ASSERT_OK_AND_ASSIGN(TorchtitanExport e,
                       ExportTorchtitan(s, EvenCut(4, 2), {.fields = TorchtitanFields::kModuleFqns}));
  EXPECT_THAT(e.toml, HasSubstr("\nmodule_fqns_per_model_part = [\n"
                                "    [\"tok_embeddings\", \"layers.0\", \"layers.1\"],\n"
                                "    [\"layers.2\", \"layers.3\", \"norm\", \"lm_head\"],\n]\n"));
  EXPECT_THAT(Message(ParseTorchtitanFields("newest")), HasSubstr("expected new"));
}

TEST(ExportTorchtitanRefusalTest, SaysWhyTorchtitanCannotRunIt) {
  struct Case {
    Schedule schedule;
    bool with_cut;
    std::string error;
  };
  Schedule custom = Make("1f1b", 2, 4);
  std::swap(custom.ranks[0], custom.ranks[1]);
  custom.stage_to_rank = {1, 0};
  custom.placement = Placement::kCustom;
  // No generator places 4 stages per rank in a V; the header is what is
  // refused, before the programs are read.
  Schedule v4 = Make("interleaved-1f1b", 2, 8, 4);
  v4.name = "v4";
  v4.placement = Placement::kV;
  v4.stage_to_rank = StageToRank(Placement::kV, 2, 4);
  const std::vector<Case> cases = {
      {Make("dualpipe", 4, 8), false,
       "dualpipe (pp 4, v 2, 8 microbatches) runs 2 chains (DualPipe's two directions over the "
       "same ranks); torchtitan runs one pipeline per CSV: export dualpipev, its one-chain form"},
      {v4, true,
       "v4 (pp 2, v 4, 8 microbatches) places its stages in a V with 4 stages per rank; "
       "torchtitan places V only with exactly 2 (ZBVZeroBubble, DualPipeV)"},
      {Make("interleaved-1f1b", 4, 8, 4), false,
       "interleaved-1f1b (pp 4, v 4, 8 microbatches): without a layer cut torchtitan splits the "
       "model into 2 stages per rank; give the cut (--layout, or --model) so that the FQN list "
       "makes 16 stages"},
      {Make("1f1b", 1, 4), false,
       "1f1b (pp 1, v 1, 4 microbatches): torchtitan turns pipelining off at "
       "pipeline_parallel_degree 1"},
      {custom, false,
       "1f1b (pp 2, v 1, 4 microbatches) places stages [1, 0], neither loop nor V; torchtitan "
       "takes the placement from the schedule name, which gives only those two"},
  };
  for (const Case& c : cases) {
    std::optional<LayerCut> cut;
    if (c.with_cut) cut = EvenCut(2 * c.schedule.num_stages(), c.schedule.stages_per_chain());
    absl::StatusOr<TorchtitanExport> e = ExportTorchtitan(c.schedule, cut);
    EXPECT_EQ(e.status().code(), absl::StatusCode::kFailedPrecondition) << c.error;
    EXPECT_EQ(Message(e), c.error);
  }
  EXPECT_EQ(Message(ExportTorchtitan(Make("1f1b", 2, 4), EvenCut(4, 3))),
            "the layer cut has 3 stages; 1f1b (pp 2, v 1, 4 microbatches) has 2");
}

// ---- Megatron -----------------------------------------------------------

struct MegatronCase {
  std::string schedule;
  int pp, microbatches, stages_per_rank;
  std::string closest;
  std::string layout;
};

class ExportMegatronTest : public ::testing::TestWithParam<MegatronCase> {};

// The layout reads back (jitpipe's parser) into the same cut; Megatron's
// loop order (stage vpp*p + rank) is the schedule's placement; VPP = stages / p.
TEST_P(ExportMegatronTest, LayoutReadsBackIntoTheSameCutAndPlacement) {
  const MegatronCase& c = GetParam();
  const Schedule s = Make(c.schedule, c.pp, c.microbatches, c.stages_per_rank);
  const LayerCut cut = EvenCut(2 * s.num_stages(), s.num_stages());
  ASSERT_OK_AND_ASSIGN(MegatronExport e, ExportMegatron(s, cut));
  EXPECT_EQ(e.closest_schedule, c.closest);
  EXPECT_EQ(e.layout, c.layout);
  ASSERT_OK_AND_ASSIGN(LayerCut back, CutFromLayout(e.layout, s.num_stages()));
  EXPECT_EQ(back, cut);
  EXPECT_EQ(s.stage_to_rank, StageToRank(Placement::kLoop, s.pp, s.num_stages() / s.pp));
  EXPECT_EQ(e.virtual_stages, s.num_stages() / s.pp);
  EXPECT_THAT(e.args, ::testing::ElementsAre(
                          "--pipeline-model-parallel-size", std::to_string(c.pp), "--num-layers",
                          std::to_string(cut.NumLayers()), "--pipeline-model-parallel-layout",
                          c.layout));
  EXPECT_THAT(e.text, HasSubstr("  --pipeline-model-parallel-layout '" + c.layout + "'\n"));
  EXPECT_THAT(e.notes.front(), HasSubstr("the order is not carried"));
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, ExportMegatronTest,
    ::testing::Values(
        MegatronCase{"1f1b", 4, 8, 1, "1F1B", "Et*2|(t*2|)*2,t*2L"},
        MegatronCase{"gpipe", 2, 4, 1, "1F1B", "Et*2|t*2L"},
        MegatronCase{"interleaved-1f1b", 4, 8, 2, "interleaved 1F1B",
                     "Et*2|(t*2|)*6,t*2L"},
        MegatronCase{"interleaved-1f1b", 2, 4, 4, "interleaved 1F1B",
                     "Et*2|(t*2|)*6,t*2L"},
        MegatronCase{"looped-bfs", 4, 8, 2, "interleaved 1F1B", "Et*2|(t*2|)*6,t*2L"},
        MegatronCase{"interleaved-zb", 4, 8, 2, "interleaved 1F1B", "Et*2|(t*2|)*6,t*2L"}),
    [](const ::testing::TestParamInfo<MegatronCase>& param) {
      std::string name = param.param.schedule + "_pp" + std::to_string(param.param.pp) + "_v" +
                         std::to_string(param.param.stages_per_rank);
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

TEST(ExportMegatronNoCutTest, GivesTheVirtualStagesInsteadOfALayout) {
  ASSERT_OK_AND_ASSIGN(MegatronExport e,
                       ExportMegatron(Make("interleaved-1f1b", 4, 8, 2), std::nullopt));
  EXPECT_THAT(e.args, ::testing::ElementsAre("--pipeline-model-parallel-size", "4",
                                             "--num-virtual-stages-per-pipeline-rank", "2"));
  ASSERT_OK_AND_ASSIGN(MegatronExport one, ExportMegatron(Make("zb-h1", 4, 8), std::nullopt));
  EXPECT_THAT(one.args, ::testing::ElementsAre("--pipeline-model-parallel-size", "4"));
  EXPECT_THAT(one.notes[1], HasSubstr("splits backward into I and W"));
}

TEST(ExportMegatronNoCutTest, AddsTheHeadsACutLacks) {
  ASSERT_OK_AND_ASSIGN(LayerCut cut, CutFromLayout("tt|tt", 2));
  EXPECT_EQ(MegatronLayout(cut), "Et*2|t*2L");
}

TEST(ExportMegatronRefusalTest, SaysWhyMegatronCannotRunIt) {
  struct Case {
    Schedule schedule;
    std::string error;
  };
  const std::vector<Case> cases = {
      {Make("zbv", 4, 8),
       "zbv (pp 4, v 2, 8 microbatches) places its stages in a V (rank r holds r and 2p-1-r); "
       "Megatron places stage vpp*p + rank only (loop order): export a loop-placed schedule "
       "such as interleaved-1f1b"},
      {Make("dualpipev", 4, 8),
       "dualpipev (pp 4, v 2, 8 microbatches) places its stages in a V"},
      {Make("dualpipe", 4, 8),
       "dualpipe (pp 4, v 2, 8 microbatches) runs 2 chains (DualPipe's two directions over the "
       "same ranks); Megatron runs one pipeline"},
      {Make("interleaved-1f1b", 4, 6, 2),
       "interleaved-1f1b (pp 4, v 2, 6 microbatches): Megatron's interleaved schedule needs the "
       "microbatches to be a multiple of pp (its default microbatch group per virtual stage is "
       "pp); 6 is not"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<MegatronExport> e = ExportMegatron(c.schedule, std::nullopt);
    EXPECT_EQ(e.status().code(), absl::StatusCode::kFailedPrecondition) << c.error;
    EXPECT_THAT(Message(e), ::testing::StartsWith(c.error));
  }
}

}  // namespace
}  // namespace jitpipe::export_test
