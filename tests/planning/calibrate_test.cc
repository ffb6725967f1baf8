// CalibrateLayeredModel: layer times fitted to measured stage call times,
// each case computed by hand from the premise measured(s) = sum of c(s, k)
// x(k) (planning/calibrate.h).
#include "planning/calibrate.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::calibrate_test {
namespace {

using ::jitpipe::testing::Message;
using ::testing::HasSubstr;

// Embedding (no FLOPs: all 0), `body` decoder layers (F 10, I 10, W 20), loss
// (F 4, I 4, W 4), as `jitpipe model` writes them: the base of every fit.
LayeredModel Base(int body) {
  LayeredModel m;
  m.input_bytes = 8;
  m.layers.push_back({.kind = LayerKind::kEmbedding, .output_bytes = 100, .stash_bytes = 1,
                      .param_bytes = 400});
  for (int i = 0; i < body; ++i) {
    m.layers.push_back({.kind = LayerKind::kLayer, .forward_us = 10, .backward_input_us = 10,
                        .backward_weight_us = 20, .output_bytes = 100, .stash_bytes = 700,
                        .param_bytes = 900});
  }
  m.layers.push_back({.kind = LayerKind::kLoss, .forward_us = 4, .backward_input_us = 4,
                      .backward_weight_us = 4, .output_bytes = 4, .stash_bytes = 300,
                      .param_bytes = 400});
  return m;
}

MeasuredStage Split(int first, int end, double f, double i, double w) {
  return {.first_layer = first, .end_layer = end, .forward_us = f, .backward_input_us = i,
          .backward_weight_us = w, .split_backward = true};
}
MeasuredStage Full(int first, int end, double f, double b) {
  return {.first_layer = first, .end_layer = end, .forward_us = f, .backward_us = b};
}

struct Times {
  double f, i, w;
};
void ExpectTimes(const LayerCost& layer, Times t, const char* what) {
  EXPECT_NEAR(layer.forward_us, t.f, 1e-9) << what;
  EXPECT_NEAR(layer.backward_input_us, t.i, 1e-9) << what;
  EXPECT_NEAR(layer.backward_weight_us, t.w, 1e-9) << what;
}

// Interleaved pp 2 v 2 over 4 layers: E t | t | t | t L. Rows [1 1 0]
// [0 1 0] [0 1 0] [0 1 1]: every kind has its own time. F: the layer is
// the mean of the middle stages' 29 and 31 (30); the embedding and the loss
// take the rest of their one stage each: 35 - 30 = 5, 42 - 30 = 12.
TEST(CalibrateTest, FitsEachKindWhenTheStagesTellThemApart) {
  const std::vector<MeasuredStage> stages = {
      Split(0, 2, 35, 20, 40), Split(2, 3, 29, 20, 40), Split(3, 4, 31, 20, 40),
      Split(4, 6, 42, 26, 43)};
  ASSERT_OK_AND_ASSIGN(Calibration c, CalibrateLayeredModel(Base(4), stages));
  EXPECT_EQ(c.grouping, CalibrationGrouping::kPerKind);
  EXPECT_FALSE(c.backward_split_by_base);
  ExpectTimes(c.model.layers[0], {5, 0, 0}, "embedding");
  for (int l = 1; l <= 4; ++l) ExpectTimes(c.model.layers[l], {30, 20, 40}, "layer");
  ExpectTimes(c.model.layers[5], {12, 6, 3}, "loss");
  EXPECT_NEAR(c.worst_relative_residual, 1.0 / 29, 1e-12);  // stage 1 F: 30 against 29
  EXPECT_EQ(c.worst_at, "stage 1 F");
  // The bytes are the base's.
  for (size_t l = 0; l < c.model.layers.size(); ++l) {
    EXPECT_EQ(c.model.layers[l].stash_bytes, Base(4).layers[l].stash_bytes);
    EXPECT_EQ(c.model.layers[l].param_bytes, Base(4).layers[l].param_bytes);
    EXPECT_EQ(c.model.layers[l].output_bytes, Base(4).layers[l].output_bytes);
  }
}

// pp 2, 1F1B (B): E t t | t t L. Two rows, three kinds: the layer's time is
// free and the heads share a scale y of their base times (loss 4 F, 8 B;
// the embedding's 0). F: 2d = 50, 2d + 4y = 70 -> d 25, loss 20. B: 2d =
// 120, 2d + 8y = 136 -> d 60, loss 16; split by the base's I:W, 1:2 for
// the layer (20, 40) and 1:1 for the loss (8, 8).
TEST(CalibrateTest, ScalesTheHeadsTogetherOnTwoStages) {
  const std::vector<MeasuredStage> stages = {Full(0, 3, 50, 120), Full(3, 6, 70, 136)};
  ASSERT_OK_AND_ASSIGN(Calibration c, CalibrateLayeredModel(Base(4), stages));
  EXPECT_EQ(c.grouping, CalibrationGrouping::kHeadsScaled);
  EXPECT_TRUE(c.backward_split_by_base);
  ExpectTimes(c.model.layers[0], {0, 0, 0}, "embedding");
  ExpectTimes(c.model.layers[2], {25, 20, 40}, "layer");
  ExpectTimes(c.model.layers[5], {20, 8, 8}, "loss");
  EXPECT_NEAR(c.worst_relative_residual, 0, 1e-12);
}

// One stage holds everything: one scale of the base. F: base 4 x 10 + 4 =
// 44, measured 88 -> every layer's F doubled; I: base 44, measured 22 ->
// halved; W: base 84, measured 252 -> tripled.
TEST(CalibrateTest, OneStageScalesTheWholeBase) {
  const std::vector<MeasuredStage> stages = {Split(0, 6, 88, 22, 252)};
  ASSERT_OK_AND_ASSIGN(Calibration c, CalibrateLayeredModel(Base(4), stages));
  EXPECT_EQ(c.grouping, CalibrationGrouping::kOneScale);
  ExpectTimes(c.model.layers[1], {20, 5, 60}, "layer");
  ExpectTimes(c.model.layers[5], {8, 2, 12}, "loss");
}

// A kind whose least-squares time is negative is held at 0 and the rest
// refitted. F as in the first case but stage 0 at 28: the free fit gives
// the embedding 28 - 30 = -2; held at 0, the layer is the mean of 28, 29,
// 31 (29.333...) and the loss 42 - 29.333...
TEST(CalibrateTest, HoldsANegativeFitAtZero) {
  const std::vector<MeasuredStage> stages = {
      Split(0, 2, 28, 20, 40), Split(2, 3, 29, 20, 40), Split(3, 4, 31, 20, 40),
      Split(4, 6, 42, 26, 43)};
  ASSERT_OK_AND_ASSIGN(Calibration c, CalibrateLayeredModel(Base(4), stages));
  EXPECT_NEAR(c.model.layers[0].forward_us, 0, 1e-12);
  EXPECT_NEAR(c.model.layers[1].forward_us, 88.0 / 3, 1e-9);
  EXPECT_NEAR(c.model.layers[5].forward_us, 42 - 88.0 / 3, 1e-9);
}

TEST(CalibrateTest, RefusesStagesThatDoNotFitTheModel) {
  EXPECT_THAT(Message(CalibrateLayeredModel(Base(4), {Full(0, 7, 1, 1)})),
              HasSubstr("stage 0 holds layers [0, 7); the model has 6"));
  EXPECT_THAT(Message(CalibrateLayeredModel(Base(4), {Full(0, 6, -1, 1)})),
              HasSubstr("stage 0 has a call time of -1 us"));
  EXPECT_THAT(Message(CalibrateLayeredModel(Base(4), {Full(2, 2, 1, 1)})),
              HasSubstr("no measured stage holds a layer"));
}

}  // namespace
}  // namespace jitpipe::calibrate_test
