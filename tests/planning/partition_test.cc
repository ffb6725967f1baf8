// Partitions of a layered model: even, Megatron-style layouts, the stage
// cost model they give (the same layers for every stage count; DualPipe's
// two copies), and the balanced search.
#include "planning/partition.h"

#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "planning/balance.h"
#include "planning/model_for_schedule.h"
#include "scheduler/generators/generate.h"
#include "stages/predict/predict.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::partition_test {
namespace {

using ::jitpipe::testing::Message;

// Embedding, `body` layers, loss; layer i has forward i + 1 us so sums tell
// which layers a stage holds.
LayeredModel Model(int body, bool heads = true) {
  LayeredModel m;
  m.input_bytes = 8;
  if (heads) {
    m.layers.push_back({.kind = LayerKind::kEmbedding, .forward_us = 0.5, .output_bytes = 100,
                        .stash_bytes = 1, .param_bytes = 400});
  }
  for (int i = 0; i < body; ++i) {
    m.layers.push_back({.kind = LayerKind::kLayer, .forward_us = i + 1.0,
                        .backward_input_us = 2, .backward_weight_us = 1, .output_bytes = 100,
                        .stash_bytes = 1000, .param_bytes = 40});
  }
  if (heads) {
    m.layers.push_back({.kind = LayerKind::kLoss, .forward_us = 3, .output_bytes = 4,
                        .stash_bytes = 5000, .param_bytes = 400});
  }
  return m;
}

std::vector<int> Boundaries(const absl::StatusOr<Partition>& p) {
  EXPECT_OK(p);
  return p.ok() ? p->boundaries : std::vector<int>{};
}

// E t t | t t | t t | t t L; with a remainder the middle stages take one
// more each; with more stages than layers some stages are empty.
TEST(PartitionTest, EvenCutsBodyLayersAndKeepsHeadsOnTheEnds) {
  EXPECT_EQ(Boundaries(EvenPartition(Model(8), 4)), (std::vector<int>{0, 3, 5, 7, 10}));
  EXPECT_EQ(Boundaries(EvenPartition(Model(10), 4)), (std::vector<int>{0, 3, 6, 9, 12}));
  EXPECT_EQ(Boundaries(EvenPartition(Model(2), 4)), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(Boundaries(EvenPartition(Model(5, false), 2)), (std::vector<int>{0, 3, 5}));
  EXPECT_EQ(Boundaries(EvenPartition(Model(3), 1)), (std::vector<int>{0, 5}));
  EXPECT_EQ(Message(EvenPartition(Model(3), 0)), "a partition needs >= 1 stage, got 0");
}

TEST(PartitionTest, LayoutGrammarAndRoundTrip) {
  const LayeredModel m = Model(8);
  EXPECT_EQ(Boundaries(ParseLayout("Et*3|t*2|t*2|tL", m, 4)), (std::vector<int>{0, 4, 6, 8, 10}));
  EXPECT_EQ(Boundaries(ParseLayout("E,ttt|(tt|)*2,t,L", m, 4)),
            (std::vector<int>{0, 4, 6, 8, 10}));
  EXPECT_EQ(Boundaries(ParseLayout("E||t*8|L", m, 4)), (std::vector<int>{0, 1, 1, 9, 10}));
  ASSERT_OK_AND_ASSIGN(Partition even, EvenPartition(m, 4));
  EXPECT_EQ(even.ToLayout(m), "Et*2|t*2|t*2|t*2L");
  EXPECT_EQ(Boundaries(ParseLayout(even.ToLayout(m), m, 4)), even.boundaries);
}

// Megatron's DeepSeek-V3 example for PP16 x VPP2 with its MTP layer written
// as a body layer: 3 + 29 x 2 + 1 = 62 layers over 32 stages.
TEST(PartitionTest, MegatronDocumentationExample) {
  const LayeredModel m = Model(62);
  ASSERT_OK_AND_ASSIGN(Partition p, ParseLayout("Et*3|(tt|)*29,t|L", m, 32));
  EXPECT_EQ(p.end(0), 4);     // E + 3 layers
  EXPECT_EQ(p.end(29) - p.begin(29), 2);
  EXPECT_EQ(p.end(30) - p.begin(30), 1);
  EXPECT_EQ(p.begin(31), 63);  // the loss alone
  EXPECT_EQ(Message(ParseLayout("Et*3|(tt|)*29,m|L", m, 32)),
            "layout \"Et*3|(tt|)*29,m|L\": m (multi-token prediction) is not a layer kind of "
            "version 2 models; describe MTP layers as body layers (t)");
}

class LayoutErrorTest : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(LayoutErrorTest, SaysWhatIsWrong) {
  const auto& [layout, message] = GetParam();
  EXPECT_EQ(Message(ParseLayout(layout, Model(8), 4)), message);
}

INSTANTIATE_TEST_SUITE_P(
    Bad, LayoutErrorTest,
    ::testing::Values(
        std::tuple{"Et*3|tx|t*2|tL",
                   "layout \"Et*3|tx|t*2|tL\": unexpected \"x\" at character 7; expected E, t, L, "
                   "|, (, ) or *N"},
        std::tuple{"E|t*8|L", "layout \"E|t*8|L\" has 3 stages; the schedule has 4 per chain"},
        std::tuple{"Et*3|t|t|tL", "layout \"Et*3|t|t|tL\" places 6 body layers; the model has 8"},
        std::tuple{"t|Et*3|t*4|L", "layout \"t|Et*3|t*4|L\": the embedding must open the first "
                                   "stage"},
        std::tuple{"Et*3|t*2|tL|t*2", "layout \"Et*3|t*2|tL|t*2\": the loss must close the last "
                                      "stage"},
        std::tuple{"t*4|t*2|t*2|L", "layout \"t*4|t*2|t*2|L\" has 0 E and 1 L; the model has 1 "
                                    "embedding and 1 loss"},
        std::tuple{"Et*|t|t|tL", "layout \"Et*|t|t|tL\": \"*\" at character 3 needs a count"},
        std::tuple{"E(t*3|t*2|t*2|tL", "layout \"E(t*3|t*2|t*2|tL\": \"(\" is never closed"},
        std::tuple{"(t*1000)*1000000", "layout \"(t*1000)*1000000\": expands to more than "
                                       "1048576 symbols"}));

// Stage costs are the sums of their layers; a stage's input is the output of
// the layer before it (the data for the first).
TEST(PartitionTest, StageModelSumsItsLayers) {
  const LayeredModel m = Model(8);
  ASSERT_OK_AND_ASSIGN(Partition p, ParseLayout("Et*3|t*2|t*2|tL", m, 4));
  ASSERT_OK_AND_ASSIGN(jitpipe::Model staged, StageModel(m, p));
  const StageCost first = staged.ForStage(0);
  EXPECT_DOUBLE_EQ(first.forward_us, 0.5 + 1 + 2 + 3);
  EXPECT_DOUBLE_EQ(first.backward_input_us, 6);
  EXPECT_EQ(first.input_bytes, 8);
  EXPECT_EQ(first.output_bytes, 100);
  EXPECT_EQ(first.stash_bytes, 1 + 3000);
  // Each layer's stash is an allocation of its own: a segment.
  EXPECT_EQ(first.stash_segments, (std::vector<int64_t>{1, 1000, 1000, 1000}));
  EXPECT_EQ(first.param_bytes, 400 + 120);
  const StageCost last = staged.ForStage(3);
  EXPECT_DOUBLE_EQ(last.forward_us, 8 + 3);
  EXPECT_EQ(last.output_bytes, 4);
  EXPECT_EQ(last.stash_bytes, 1000 + 5000);
  EXPECT_EQ(last.stash_segments, (std::vector<int64_t>{1000, 5000}));
  ASSERT_OK_AND_ASSIGN(Partition empty_middle, ParseLayout("E||t*8|L", m, 4));
  ASSERT_OK_AND_ASSIGN(jitpipe::Model gap, StageModel(m, empty_middle));
  EXPECT_EQ(gap.ForStage(1).forward_us, 0);
  EXPECT_EQ(gap.ForStage(1).StashAllocations(), (std::vector<int64_t>{0}));  // no layer
  EXPECT_EQ(gap.ForStage(3).StashAllocations(), (std::vector<int64_t>{5000}));  // one
  EXPECT_EQ(gap.ForStage(1).input_bytes, 100);  // passes the embedding's output on
  EXPECT_EQ(gap.ForStage(1).output_bytes, 100);
}

double TotalForward(const jitpipe::Model& m, int stages) {
  double sum = 0;
  for (int s = 0; s < stages; ++s) sum += m.ForStage(s).forward_us;
  return sum;
}

// The same layers at every stage count; DualPipe's two chains each hold the
// whole model: twice the parameters, each chain running half the
// microbatches.
TEST(PartitionTest, EveryStageCountRunsTheSameModel) {
  const LayeredModel m = Model(12);
  double per_copy = 0;
  for (int stages : {1, 2, 3, 4, 8, 16}) {
    ASSERT_OK_AND_ASSIGN(Partition p, EvenPartition(m, stages));
    ASSERT_OK_AND_ASSIGN(jitpipe::Model staged, StageModel(m, p));
    if (stages == 1) per_copy = TotalForward(staged, 1);
    EXPECT_DOUBLE_EQ(TotalForward(staged, stages), per_copy) << stages;
  }
  ASSERT_OK_AND_ASSIGN(Partition p, EvenPartition(m, 4));
  ASSERT_OK_AND_ASSIGN(jitpipe::Model dual, StageModel(m, p, 2));
  EXPECT_DOUBLE_EQ(TotalForward(dual, 8), 2 * per_copy);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(dual.ForStage(k).param_bytes, dual.ForStage(4 + k).param_bytes);
    EXPECT_EQ(dual.ForStage(k).stash_bytes, dual.ForStage(4 + k).stash_bytes);
  }
}

TEST(PartitionTest, ValidatePartitionKeepsHeadsInPlace) {
  const LayeredModel m = Model(4);
  EXPECT_OK(ValidatePartition({.boundaries = {0, 6}}, m));
  EXPECT_EQ(Message(ValidatePartition({.boundaries = {0, 5}}, m)),
            "a partition's boundaries must run from 0 to the model's 6 layers");
  EXPECT_EQ(Message(ValidatePartition({.boundaries = {0, 0, 6}}, m)),
            "the embedding must be on the first stage");
  EXPECT_EQ(Message(ValidatePartition({.boundaries = {0, 6, 6}}, m)),
            "the loss must be on the last stage");
  EXPECT_EQ(Message(ValidatePartition({.boundaries = {0, 4, 3, 6}}, m)),
            "partition stage 1 ends before it begins");
}

// A heavy loss head: the even cut leaves the last stage slowest; the
// balanced one moves body layers off it and simulates faster.
TEST(BalanceTest, MovesLayersOffAHeavyStageAndNeverLosesToEven) {
  LayeredModel m = Model(16);
  m.layers.back().forward_us = 40;
  m.layers.back().backward_input_us = 40;
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({.schedule = "1f1b", .pp = 4, .microbatches = 8}));
  ASSERT_OK_AND_ASSIGN(BalancedPartition b, BalancePartition(m, s));
  EXPECT_LT(b.makespan_us, b.even_makespan_us);
  ASSERT_OK_AND_ASSIGN(Partition even, EvenPartition(m, 4));
  EXPECT_LT(b.partition.end(3) - b.partition.begin(3), even.end(3) - even.begin(3));
  ASSERT_OK_AND_ASSIGN(jitpipe::Model staged, StageModel(m, b.partition));
  ASSERT_OK_AND_ASSIGN(Prediction p, Predict(s, staged));
  EXPECT_DOUBLE_EQ(p.simulation.makespan_us, b.makespan_us);
  ASSERT_OK_AND_ASSIGN(BalancedPartition again, BalancePartition(m, s));
  EXPECT_EQ(again.partition, b.partition);  // deterministic
  ASSERT_OK_AND_ASSIGN(BalancedPartition one, BalancePartition(m, s, {.max_evaluations = 1}));
  EXPECT_EQ(one.evaluations, 1);
  EXPECT_EQ(one.partition, even);
  EXPECT_EQ(Message(BalancePartition(m, s, {.max_evaluations = 0})),
            "max_evaluations must be >= 1, got 0");
  EXPECT_FALSE(b.budget_ended);
  // A spent time budget stops the search after the even cut, and says so.
  ASSERT_OK_AND_ASSIGN(BalancedPartition timed,
                       BalancePartition(m, s, {.time_budget = absl::ZeroDuration()}));
  EXPECT_EQ(timed.evaluations, 1);
  EXPECT_TRUE(timed.budget_ended);
  EXPECT_EQ(timed.partition, even);
}

// A step's neighbours simulated on several threads: the same cut, step and
// number of simulations as on one, with and without a cap that ends the
// search inside a step.
TEST(BalanceTest, ThreadsChangeNothingButTheTime) {
  LayeredModel m = Model(16);
  m.layers.back().forward_us = 40;
  m.layers.back().backward_input_us = 40;
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({.schedule = "zbv", .pp = 4, .microbatches = 8}));
  for (int cap : {200, 7}) {
    ASSERT_OK_AND_ASSIGN(BalancedPartition one,
                         BalancePartition(m, s, {.max_evaluations = cap, .threads = 1}));
    ASSERT_OK_AND_ASSIGN(BalancedPartition four,
                         BalancePartition(m, s, {.max_evaluations = cap, .threads = 4}));
    EXPECT_EQ(four.partition, one.partition) << "cap " << cap;
    EXPECT_EQ(four.makespan_us, one.makespan_us) << "cap " << cap;
    EXPECT_EQ(four.evaluations, one.evaluations) << "cap " << cap;
    EXPECT_LE(one.evaluations, cap);
  }
}

TEST(ModelForScheduleTest, VersionOnePassesThroughVersionTwoIsCut) {
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({.schedule = "zbv", .pp = 2, .microbatches = 4}));
  ModelFile v1;
  v1.stages.defaults.forward_us = 7;
  ASSERT_OK_AND_ASSIGN(StagedModel plain, ModelForSchedule(v1, s));
  EXPECT_EQ(plain.model.ForStage(0).forward_us, 7);
  EXPECT_FALSE(plain.partition.has_value());
  EXPECT_EQ(Message(ModelForSchedule(v1, s, {.layout = "t|t|t|t"})),
            "--layout and --partition balanced need a version 2 model (layers); this one gives "
            "per-stage costs");
  ModelFile v2{.version = kLayeredModelVersion, .layers = Model(8)};
  ASSERT_OK_AND_ASSIGN(StagedModel even, ModelForSchedule(v2, s));
  EXPECT_EQ(even.how, "even");
  EXPECT_EQ(even.partition->ToLayout(v2.layers), "Et*2|t*2|t*2|t*2L");
  ASSERT_OK_AND_ASSIGN(StagedModel laid, ModelForSchedule(v2, s, {.layout = "Et*5|t|t|tL"}));
  EXPECT_EQ(laid.how, "layout");
  EXPECT_DOUBLE_EQ(laid.model.ForStage(0).forward_us, 0.5 + 1 + 2 + 3 + 4 + 5);
  ASSERT_OK_AND_ASSIGN(StagedModel balanced,
                       ModelForSchedule(v2, s, {.method = PartitionMethod::kBalanced}));
  EXPECT_EQ(balanced.how, "balanced");
  EXPECT_EQ(Message(ParsePartitionMethod("fast")),
            "unknown partition \"fast\"; expected even or balanced");
}

}  // namespace
}  // namespace jitpipe::partition_test
