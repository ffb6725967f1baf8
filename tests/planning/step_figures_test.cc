// The figures compare shows per row, against hand computations: a global
// batch in microbatches, the bubble split, tokens per second and MFU.
#include "planning/step_figures.h"

#include <cstdint>
#include <string>
#include <tuple>

#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::step_figures_test {
namespace {

using ::jitpipe::testing::Message;

LayeredModel WithWorkload(int dp, int64_t b, int64_t s, int tp, double flops, double peak) {
  LayeredModel m;
  m.layers.push_back({.kind = LayerKind::kLayer, .forward_us = 1});
  m.dp.size = dp;
  m.workload = {.microbatch_size = b, .seq_len = s, .tp = tp,
                .model_flops_per_microbatch = flops};
  m.device.peak_tflops = peak;
  return m;
}

class GlobalBatchTest
    : public ::testing::TestWithParam<std::tuple<int, int64_t, int64_t, std::string>> {};

// (dp, b, global batch, microbatches or the error).
TEST_P(GlobalBatchTest, DividesByDpTimesMicrobatchSize) {
  const auto& [dp, b, global, expected] = GetParam();
  absl::StatusOr<int> m = MicrobatchesForGlobalBatch(WithWorkload(dp, b, 8, 1, 0, 0), global);
  if (m.ok()) {
    EXPECT_EQ(std::to_string(*m), expected);
  } else {
    EXPECT_EQ(Message(m), expected);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, GlobalBatchTest,
    ::testing::Values(
        std::tuple{1, int64_t{1}, int64_t{16}, "16"},
        std::tuple{4, int64_t{2}, int64_t{64}, "8"},  // 64 / (4 x 2)
        std::tuple{8, int64_t{1}, int64_t{8}, "1"},
        std::tuple{4, int64_t{8}, int64_t{100},
                   "global batch 100 is not a multiple of dp 4 x microbatch size 8 = 32 "
                   "sequences (96 or 128 is)"},
        std::tuple{4, int64_t{8}, int64_t{20},
                   "global batch 20 is not a multiple of dp 4 x microbatch size 8 = 32 "
                   "sequences (32 is)"},
        std::tuple{1, int64_t{1}, int64_t{0}, "the global batch must be >= 1 sequence, got 0"},
        std::tuple{2, int64_t{0}, int64_t{16},
                   "the model does not give its microbatch size (\"workload\": "
                   "{\"microbatch_size\": B}; jitpipe model writes it), so a global batch "
                   "cannot be turned into microbatches"}));

SimulationResult Busy(double makespan, std::initializer_list<double> busy) {
  SimulationResult s;
  s.makespan_us = makespan;
  for (double b : busy) s.ranks.push_back({.busy_us = b});
  return s;
}

// Ranks busy 6, 4 and 3 of 10 us: the least busy idles 70% (the bubble
// column); the busiest idles 40% (pipeline); 6 - 3 = 3 us more work on the
// busiest is the other 30% (imbalance).
TEST(SplitBubbleTest, PipelinePlusImbalanceIsTheWorstRanksIdle) {
  const BubbleSplit split = SplitBubble(Busy(10, {6, 4, 3}));
  EXPECT_DOUBLE_EQ(split.pipeline, 0.4);
  EXPECT_DOUBLE_EQ(split.imbalance, 0.3);
  // Equal work: no imbalance, whatever the schedule leaves idle.
  const BubbleSplit even = SplitBubble(Busy(8, {6, 6}));
  EXPECT_DOUBLE_EQ(even.pipeline, 0.25);
  EXPECT_DOUBLE_EQ(even.imbalance, 0);
  // Nothing simulated: zeros rather than a division by zero.
  const BubbleSplit none = SplitBubble(Busy(0, {}));
  EXPECT_EQ(none.pipeline, 0);
  EXPECT_EQ(none.imbalance, 0);
}

// pp 2 x dp 4 x tp 2 = 16 GPUs; 8 microbatches of b 2 x s 1024 tokens per
// replica: 8 x 2048 x 4 = 65536 tokens in a 1 s step, 4096 per GPU;
// 10^12 FLOPs per microbatch x 8 x 4 / (1 s x 16 x 100 TFLOP/s) = 2%.
TEST(StepFiguresTest, TokensAndMfuByHand) {
  const StepFigures f = StepFiguresOf(WithWorkload(4, 2, 1024, 2, 1e12, 100), 2, 8, 1e6);
  EXPECT_DOUBLE_EQ(f.step_s, 1);
  EXPECT_EQ(f.gpus, 16);
  EXPECT_EQ(f.tokens_per_step, 65536);
  EXPECT_DOUBLE_EQ(f.tokens_per_s, 65536);
  EXPECT_DOUBLE_EQ(f.tokens_per_s_per_gpu, 4096);
  ASSERT_TRUE(f.mfu.has_value());
  EXPECT_DOUBLE_EQ(*f.mfu, 0.02);
  // Half the step time: twice the throughput and the MFU.
  const StepFigures fast = StepFiguresOf(WithWorkload(4, 2, 1024, 2, 1e12, 100), 2, 8, 5e5);
  EXPECT_DOUBLE_EQ(fast.tokens_per_s_per_gpu, 8192);
  EXPECT_DOUBLE_EQ(*fast.mfu, 0.04);
}

TEST(StepFiguresTest, UnknownWorkloadOrPeakLeavesThemOut) {
  const StepFigures no_peak = StepFiguresOf(WithWorkload(1, 1, 8, 1, 1e12, 0), 1, 1, 1e6);
  EXPECT_EQ(no_peak.tokens_per_step, 8);
  EXPECT_FALSE(no_peak.mfu.has_value());
  const StepFigures nothing = StepFiguresOf(WithWorkload(1, 0, 0, 1, 0, 989), 1, 1, 1e6);
  EXPECT_EQ(nothing.tokens_per_step, 0);
  EXPECT_EQ(nothing.tokens_per_s_per_gpu, 0);
  EXPECT_FALSE(nothing.mfu.has_value());
}

}  // namespace
}  // namespace jitpipe::step_figures_test
