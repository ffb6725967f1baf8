// The least exposed reduction an order of Ws can reach, by hand; and the
// overlap pass's time-aware search reaching it where the completion-order
// reordering alone does not.
#include "planning/reduction_floor.h"

#include <string>

#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"
#include "scheduler/passes/lower.h"
#include "scheduler/analysis/validate.h"
#include "stages/predict/predict.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::reduction_floor_test {
namespace {

// F = I = W = 1 us per stage; each stage's reduction takes `reduce_us`:
// fp32 gradients of `reduce_us` x 500 elements over dp 2 (a ring all-reduce
// moves them once) at 2 GB/s, in `buckets` buckets without latency.
Model Unit(double reduce_us, int buckets) {
  Model m;
  m.defaults.forward_us = 1;
  m.defaults.backward_input_us = 1;
  m.defaults.backward_weight_us = 1;
  m.defaults.param_bytes = static_cast<int64_t>(reduce_us * 2000);
  m.dp.size = 2;
  m.dp.link.gb_per_s = 2;
  m.dp.buckets = buckets;
  return m;
}

double Floor(const std::string& name, int pp, int mbs, const Model& model, bool overlap) {
  absl::StatusOr<Schedule> s = Generate({.schedule = name, .pp = pp, .microbatches = mbs,
                                         .stages_per_rank = 2});
  EXPECT_OK(s);
  absl::StatusOr<Prediction> p = Predict(*s, model, {.overlap = overlap});
  EXPECT_OK(p);
  return MinimumExposedReduceUs(p->lowered, model, p->simulation);
}

// R = 2 us in 8 buckets of 0.25: a last W of 1 us streams 7/8 us of them
// during it, so 2 - 7/8 = 1.125 us follow it (ZB-V, interleaved ZB); a last
// B of 2 us streams all but the last bucket: 0.25 us (interleaved 1F1B).
TEST(ReductionFloorTest, ByHand) {
  const Model model = Unit(2, 8);
  EXPECT_DOUBLE_EQ(Floor("zbv", 4, 16, model, true), 1.125);
  EXPECT_DOUBLE_EQ(Floor("interleaved-zb", 4, 16, model, true), 1.125);
  EXPECT_DOUBLE_EQ(Floor("interleaved-1f1b", 4, 16, model, true), 0.25);
  // One bucket: the whole reduction follows the last action.
  EXPECT_DOUBLE_EQ(Floor("zbv", 4, 16, Unit(2, 1), true), 2);
  // R = 1 us: max(1/8, 1 - 7/8) = 0.125.
  EXPECT_DOUBLE_EQ(Floor("zbv", 4, 16, Unit(1, 8), true), 0.125);
  Model single = model;
  single.dp.size = 1;
  EXPECT_EQ(Floor("zbv", 4, 16, single, true), 0);
}

// The pass reaches the floor on the case and where completion
// order alone leaves more: DualPipeV pp 4 with a 3 us reduction per stage
// (52.1% exposed before the time-aware search, 35.4% = the floor after).
TEST(ReductionFloorTest, TheOverlapPassReachesIt) {
  for (const auto& [name, reduce_us] : {std::pair{"zbv", 2.0}, std::pair{"interleaved-zb", 2.0},
                                        std::pair{"interleaved-1f1b", 2.0},
                                        std::pair{"dualpipev", 3.0}}) {
    const Model model = Unit(reduce_us, 8);
    ASSERT_OK_AND_ASSIGN(Schedule s, Generate({.schedule = name, .pp = 4, .microbatches = 8,
                                               .stages_per_rank = 2}));
    ASSERT_OK_AND_ASSIGN(Prediction p, Predict(s, model, {.overlap = true}));
    EXPECT_NEAR(p.simulation.exposed_reduce_us,
                MinimumExposedReduceUs(p.lowered, model, p.simulation), 1e-9)
        << name;
    // The moved Ws keep the program valid.
    EXPECT_OK(Validate(p.lowered)) << name;
  }
  // Without the step time (the pass alone, as before), DualPipeV stays above.
  const Model model = Unit(3, 8);
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({.schedule = "dualpipev", .pp = 4,
                                             .microbatches = 8}));
  ASSERT_OK_AND_ASSIGN(Schedule plain,
                       Lower(s, {.reduce_grad = true, .overlap = true,
                                 .overlap_peak = PlannedPeak(model)}));
  ASSERT_OK_AND_ASSIGN(Prediction before, Predict(plain, model));
  EXPECT_DOUBLE_EQ(before.simulation.exposed_reduce_us, 3.125);
  ASSERT_OK_AND_ASSIGN(Prediction after, Predict(s, model, {.overlap = true}));
  EXPECT_DOUBLE_EQ(after.simulation.exposed_reduce_us, 2.125);
  EXPECT_LT(after.simulation.makespan_us, before.simulation.makespan_us);
}

}  // namespace
}  // namespace jitpipe::reduction_floor_test
