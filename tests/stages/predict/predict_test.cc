#include "stages/predict/predict.h"

#include <algorithm>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "scheduler/generators/generate.h"
#include "scheduler/ir/schedule_csv.h"
#include "scheduler/passes/lower.h"
#include "tests/testing/status_matchers.h"
#include "traces/chrome_trace_writer.h"
#include "traces/timeline_trace.h"
#include "traces/trace_checker.h"

namespace jitpipe::predict_test {
namespace {

using ::jitpipe::testing::Message;

// The anchors' model: F = I = W = 1 per stage (B = 2), free communication,
// no data parallelism; one byte of stash per microbatch.
Model UnitModel() {
  Model m = UnitCostModel();
  m.defaults.stash_bytes = 1;
  return m;
}

// UnitModel with data parallelism: each stage's gradients take `reduce_us`
// to all-reduce over two replicas (in `buckets` buckets).
Model ReducingModel(double reduce_us, int buckets = 1) {
  Model m = UnitModel();
  m.dp.size = 2;  // a ring all-reduce over 2 moves the gradient bytes once
  m.dp.link.gb_per_s = 1;  // 1000 bytes per us
  m.defaults.param_bytes = static_cast<int64_t>(reduce_us * 1000);
  m.dp.buckets = buckets;
  return m;
}

absl::StatusOr<SimulationResult> Simulated(const std::string& name, int pp, int mbs, int v,
                                           const Model& model, bool overlap = false) {
  absl::StatusOr<Schedule> s =
      Generate({.schedule = name, .pp = pp, .microbatches = mbs, .stages_per_rank = v});
  if (!s.ok()) return s.status();
  absl::StatusOr<Prediction> p = Predict(*s, model, {.overlap = overlap});
  if (!p.ok()) return p.status();
  return p->simulation;
}

double LongestSpan(const SimulationResult& r) {
  double span = 0;
  for (const RankSimulation& rank : r.ranks) span = std::max(span, rank.span_us);
  return span;
}

// The anchors (tests/testdata/conformance/anchors, other_schedulers.md §3
// and §4) at pp 4 m 8 and pp 8 m 16: our generators, lowered just in time,
// simulated under unit costs with free communication.
struct Anchor {
  std::string schedule;
  int v, pp, mbs;
  double makespan, span;
  double busy;  // per rank: its stage-microbatches x (F + I + W)
};

void PrintTo(const Anchor& a, std::ostream* os) {
  *os << a.schedule << " pp" << a.pp << " v" << a.v << " m" << a.mbs;
}

class AnchorTest : public ::testing::TestWithParam<Anchor> {};

TEST_P(AnchorTest, MakespanAndSpanMatchUpstream) {
  const Anchor& a = GetParam();
  ASSERT_OK_AND_ASSIGN(SimulationResult r, Simulated(a.schedule, a.pp, a.mbs, a.v, UnitModel()));
  EXPECT_DOUBLE_EQ(r.makespan_us, a.makespan);
  EXPECT_DOUBLE_EQ(LongestSpan(r), a.span);
  for (const RankSimulation& rank : r.ranks) EXPECT_DOUBLE_EQ(rank.busy_us, a.busy);
  EXPECT_DOUBLE_EQ(r.bubble_fraction, 1 - a.busy / a.makespan);
  EXPECT_DOUBLE_EQ(r.span_bubble_fraction, 1 - a.busy / a.span);
  EXPECT_EQ(r.exposed_reduce_us, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Anchors, AnchorTest,
    ::testing::Values(
        Anchor{"1f1b", 1, 4, 8, 33, 33, 24}, Anchor{"zb-h1", 1, 4, 8, 27, 27, 24},
        Anchor{"zb-h2", 1, 4, 8, 27, 24, 24}, Anchor{"zbv", 2, 4, 8, 51, 48, 48},
        Anchor{"v-half", 2, 4, 8, 53, 53, 48}, Anchor{"v-min", 2, 4, 8, 59, 59, 48},
        Anchor{"dualpipev", 2, 4, 8, 54, 54, 48},
        // DualPipe: two stages per rank, one per direction, m/2 microbatches each.
        Anchor{"dualpipe", 2, 4, 8, 26, 26, 24},
        Anchor{"interleaved-1f1b", 2, 4, 8, 57, 57, 48},  // Megatron's table
        Anchor{"1f1b", 1, 8, 16, 69, 69, 48}, Anchor{"zb-h1", 1, 8, 16, 55, 55, 48},
        Anchor{"zb-h2", 1, 8, 16, 55, 48, 48}, Anchor{"zbv", 2, 8, 16, 103, 96, 96},
        Anchor{"v-half", 2, 8, 16, 113, 113, 96}, Anchor{"v-min", 2, 8, 16, 123, 123, 96},
        Anchor{"dualpipev", 2, 8, 16, 110, 110, 96}, Anchor{"dualpipe", 2, 8, 16, 54, 54, 48}),
    [](const ::testing::TestParamInfo<Anchor>& param) {
      std::string name = absl::StrCat(param.param.schedule, "_pp", param.param.pp, "_m",
                                      param.param.mbs);
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// Theory over a grid of pp and m (unit costs: F = 1, B = I + W = 2).
class TheoryTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(TheoryTest, GPipeAndOneFOneBTake_MPlusPMinusOne_TimesFPlusB) {
  const auto [pp, k] = GetParam();
  const int mbs = k * pp;
  for (const char* name : {"gpipe", "1f1b"}) {
    ASSERT_OK_AND_ASSIGN(SimulationResult r, Simulated(name, pp, mbs, 1, UnitModel()));
    EXPECT_DOUBLE_EQ(r.makespan_us, (mbs + pp - 1) * 3.0) << name;
  }
}

TEST_P(TheoryTest, InterleavedBubbleIsPMinusOneTimesFPlusBOverV) {
  const auto [pp, k] = GetParam();
  const int mbs = k * pp;
  for (int v : {2, 4}) {
    ASSERT_OK_AND_ASSIGN(SimulationResult r,
                         Simulated("interleaved-1f1b", pp, mbs, v, UnitModel()));
    // A rank's F + B is v stages x 3 us; the bubble is (p-1)(F+B)/v.
    const double busy = 3.0 * v * mbs;
    const double rank_f_plus_b = 3.0 * v;
    EXPECT_DOUBLE_EQ(r.makespan_us - busy, (pp - 1) * rank_f_plus_b / v) << "v " << v;
  }
}

TEST_P(TheoryTest, ZeroBubbleH1BubbleIsPMinusOneTimesFPlusBMinusW) {
  const auto [pp, k] = GetParam();
  const int mbs = k * pp;
  ASSERT_OK_AND_ASSIGN(SimulationResult r, Simulated("zb-h1", pp, mbs, 1, UnitModel()));
  EXPECT_DOUBLE_EQ(r.makespan_us - 3.0 * mbs, (pp - 1) * (1.0 + 1.0 - 1.0));
}

INSTANTIATE_TEST_SUITE_P(Grid, TheoryTest,
                         ::testing::Combine(::testing::Values(2, 4, 8), ::testing::Values(1, 2, 4)),
                         [](const auto& param) {
                           return absl::StrCat("pp", std::get<0>(param.param), "_m",
                                               std::get<0>(param.param) * std::get<1>(param.param));
                         });

// One stage, one microbatch: F [0, 1], B [1, 3]; the stage's reduction takes
// 4 us. One bucket runs after B: [3, 7]. Four buckets of 1 us: three ready
// at 1.5, 2 and 2.5 us, serialised from 1.5 to 4.5; the last at 3, run [4.5, 5.5].
TEST(PredictTest, BucketsReduceDuringTheLastBackward) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv("0F0,0B0\n"));
  ASSERT_OK_AND_ASSIGN(Prediction one, Predict(s, ReducingModel(4)));
  EXPECT_DOUBLE_EQ(one.simulation.makespan_us, 7);
  EXPECT_DOUBLE_EQ(one.simulation.exposed_reduce_us, 4);
  EXPECT_DOUBLE_EQ(one.simulation.max_rank_reduce_us, 4);
  ASSERT_OK_AND_ASSIGN(Prediction four, Predict(s, ReducingModel(4, 4), {.record_timeline = true}));
  EXPECT_DOUBLE_EQ(four.simulation.makespan_us, 5.5);
  EXPECT_DOUBLE_EQ(four.simulation.exposed_reduce_us, 2.5);
  std::vector<std::tuple<int, double, double>> buckets;
  for (const TimelineSpan& span : four.simulation.timeline.spans) {
    if (span.track == TimelineTrack::kReduce) {
      buckets.emplace_back(span.bucket, span.start_us, span.end_us);
    }
  }
  EXPECT_EQ(buckets, (std::vector<std::tuple<int, double, double>>{
                         {0, 1.5, 2.5}, {1, 2.5, 3.5}, {2, 3.5, 4.5}, {3, 4.5, 5.5}}));
}

// Each bucket pays the latency: with 0.5 us latency, 4 buckets of 1.5 us
// cost as much at the end as one bucket of 4.5 us.
TEST(PredictTest, EveryBucketPaysTheLatency) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv("0F0,0B0\n"));
  Model m = ReducingModel(4, 4);
  m.dp.link.latency_us = 0.5;
  ASSERT_OK_AND_ASSIGN(Prediction p, Predict(s, m));
  EXPECT_DOUBLE_EQ(p.simulation.makespan_us, 7.5);
  EXPECT_DOUBLE_EQ(p.simulation.max_rank_reduce_us, 6);
}

// Buckets and the overlap pass against the target: exposed reduction
// at most 10% of one rank's reduction time for interleaved and V schedules
// when a stage's reduction costs no more than its backward. Here it costs
// 1 us, as much as the stage's I and its W (half a full B): bucket i of the
// last stage to finish is ready at (i + 1)/8 of its last W or B, so only the
// last bucket, 1/8 us, follows the compute.
class OverlapTargetTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(OverlapTargetTest, BucketsHideAllButTheLastBucket) {
  const auto& [name, v] = GetParam();
  ASSERT_OK_AND_ASSIGN(SimulationResult one, Simulated(name, 4, 16, v, ReducingModel(1)));
  ASSERT_OK_AND_ASSIGN(SimulationResult eight,
                       Simulated(name, 4, 16, v, ReducingModel(1, 8), /*overlap=*/true));
  EXPECT_DOUBLE_EQ(one.max_rank_reduce_us, 1.0 * v);
  EXPECT_DOUBLE_EQ(one.exposed_reduce_us, 1);  // one bucket follows the compute
  EXPECT_DOUBLE_EQ(eight.exposed_reduce_us, 0.125);
  EXPECT_LE(eight.exposed_reduce_us, 0.1 * eight.max_rank_reduce_us);
}

INSTANTIATE_TEST_SUITE_P(Schedules, OverlapTargetTest,
                         ::testing::Values(std::make_tuple("interleaved-1f1b", 2),
                                           std::make_tuple("interleaved-1f1b", 4),
                                           std::make_tuple("interleaved-zb", 2),
                                           std::make_tuple("zbv", 2), std::make_tuple("v-half", 2),
                                           std::make_tuple("v-min", 2),
                                           std::make_tuple("dualpipev", 2)),
                         [](const auto& param) {
                           std::string name = std::get<0>(param.param);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return absl::StrCat(name, "_v", std::get<1>(param.param));
                         });

// The time from a rank's last compute to the end of its reductions.
std::vector<double> ReductionTails(const SimulationResult& r) {
  std::vector<double> tails;
  for (const RankSimulation& rank : r.ranks) {
    tails.push_back(rank.end_us - rank.first_start_us - rank.span_us);
  }
  return tails;
}

// When a stage's reduction (2 us) outlasts a W (1 us), a stage that finishes
// one W before the end delays the last stage's buckets. DualPipeV's last
// rank and ZB-V's rank 1 do that; the pass finishes those stages earlier
// (the compute is unchanged: only Ws move).
TEST(PredictTest, OverlapPassShortensReductionTails) {
  ASSERT_OK_AND_ASSIGN(SimulationResult plain, Simulated("dualpipev", 4, 8, 2, ReducingModel(2, 8)));
  ASSERT_OK_AND_ASSIGN(SimulationResult overlapped,
                       Simulated("dualpipev", 4, 8, 2, ReducingModel(2, 8), /*overlap=*/true));
  EXPECT_EQ(ReductionTails(plain), (std::vector<double>{1.125, 1.125, 1.125, 2.125}));
  EXPECT_EQ(ReductionTails(overlapped), (std::vector<double>{1.125, 1.125, 1.125, 1.125}));
  EXPECT_DOUBLE_EQ(plain.exposed_reduce_us, 2.125);
  EXPECT_DOUBLE_EQ(overlapped.exposed_reduce_us, 1.125);
  EXPECT_DOUBLE_EQ(plain.makespan_us - plain.exposed_reduce_us,
                   overlapped.makespan_us - overlapped.exposed_reduce_us);
  ASSERT_OK_AND_ASSIGN(SimulationResult zbv, Simulated("zbv", 4, 8, 2, ReducingModel(2, 8)));
  ASSERT_OK_AND_ASSIGN(SimulationResult zbv_overlapped,
                       Simulated("zbv", 4, 8, 2, ReducingModel(2, 8), /*overlap=*/true));
  EXPECT_EQ(ReductionTails(zbv), (std::vector<double>{1.125, 2.125, 1.125, 1.125}));
  EXPECT_EQ(ReductionTails(zbv_overlapped), (std::vector<double>{1.125, 1.125, 1.125, 1.125}));
}

TEST(PredictTest, SaysWhenReductionsAreNotModelled) {
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({.schedule = "1f1b", .pp = 2, .microbatches = 2}));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(s));  // no REDUCE_GRAD
  ASSERT_OK_AND_ASSIGN(Prediction without, Predict(lowered, ReducingModel(2)));
  EXPECT_FALSE(without.reductions_modelled);
  ASSERT_OK_AND_ASSIGN(Prediction with, Predict(s, ReducingModel(2)));
  EXPECT_TRUE(with.reductions_modelled);
  EXPECT_DOUBLE_EQ(with.simulation.exposed_reduce_us, 2);
  ASSERT_OK_AND_ASSIGN(Prediction no_dp, Predict(lowered, UnitModel()));
  EXPECT_TRUE(no_dp.reductions_modelled);
  EXPECT_EQ(Message(Predict(lowered, UnitModel(), {.overlap = true})),
            "overlap_reduce needs REDUCE_GRAD actions; lower with reduce_grad first");
}

TEST(PredictTest, PlannedPeakUsesTheJitPlanOrActivationUnits) {
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({.schedule = "1f1b", .pp = 2, .microbatches = 4}));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(s, {.reduce_grad = true}));
  Model bytes = UnitModel();
  bytes.defaults.stash_bytes = 100;
  ASSERT_OK_AND_ASSIGN(int64_t planned, PlannedPeak(bytes)(lowered, 0));
  EXPECT_EQ(planned, 200);  // rank 0 of 1F1B pp2 holds two stashes
  Model times_only = UnitModel();
  times_only.defaults.stash_bytes = 0;
  ASSERT_OK_AND_ASSIGN(int64_t units, PlannedPeak(times_only)(lowered, 0));
  EXPECT_EQ(units, 2);
}

// Simulated timelines as Chrome traces pass the Perfetto/DevTools rules,
// with free and with costly communication (arrows need time to pass).
class TraceTest : public ::testing::TestWithParam<std::tuple<std::string, int, double>> {};

TEST_P(TraceTest, SimulatedTracePassesTheChecker) {
  const auto& [name, v, latency] = GetParam();
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({.schedule = name, .pp = 4, .microbatches = 8,
                                             .stages_per_rank = v}));
  Model m = ReducingModel(2, 2);
  m.p2p.latency_us = latency;
  m.defaults.input_bytes = m.defaults.output_bytes = 1000;
  ASSERT_OK_AND_ASSIGN(Prediction p, Predict(s, m, {.overlap = true, .record_timeline = true}));
  std::string text;
  ASSERT_OK_AND_ASSIGN(ChromeTraceWriter writer, ChromeTraceWriter::ToString(&text));
  AddTimelineToTrace(p.lowered, p.simulation.timeline, writer);
  ASSERT_OK(writer.Finish());
  ASSERT_OK_AND_ASSIGN(ChromeTraceSummary summary,
                       CheckChromeTrace(nlohmann::json::parse(text)));
  EXPECT_GT(summary.slices, 0);
  EXPECT_GT(summary.counters, 0);
  if (latency > 0) {
    EXPECT_GT(summary.flows, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, TraceTest,
                         ::testing::Combine(::testing::Values("1f1b", "interleaved-1f1b", "zbv",
                                                              "dualpipev"),
                                            ::testing::Values(0), ::testing::Values(0.0, 0.5)),
                         [](const auto& param) {
                           std::string name = std::get<0>(param.param);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return absl::StrCat(name, std::get<2>(param.param) > 0 ? "_latency"
                                                                                  : "_free");
                         });

}  // namespace
}  // namespace jitpipe::predict_test
