// Which schedule for my model: every schedule and v on one layered model,
// the same work on every row, memory all of it, sorted among those that fit.
#include "planning/compare.h"

#include <algorithm>
#include <string>

#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::compare_test {
namespace {

using ::jitpipe::testing::Message;

// 8 layers of F = I = W = 1 us, 1 MiB of stash and 4096 parameter bytes
// each; no heads; Adam over fp32 parameters.
LayeredModel Uniform(int64_t device_bytes = 0) {
  LayeredModel m;
  for (int i = 0; i < 8; ++i) {
    m.layers.push_back({.kind = LayerKind::kLayer, .forward_us = 1, .backward_input_us = 1,
                        .backward_weight_us = 1, .output_bytes = 1024, .stash_bytes = 1 << 20,
                        .param_bytes = 4096});
  }
  m.device.memory_bytes = device_bytes;
  return m;
}

const CompareRow* Find(const Comparison& c, const std::string& name, int v) {
  for (const CompareRow& r : c.rows) {
    if (r.schedule == name && r.stages_per_rank == v) return &r;
  }
  return nullptr;
}

TEST(CompareTest, EveryRowDoesTheSameWorkAndTheFastestIsFirst) {
  ASSERT_OK_AND_ASSIGN(Comparison c, CompareSchedules(Uniform(), {.pp = 4, .microbatches = 8}));
  ASSERT_GE(c.rows.size(), 10u);
  EXPECT_EQ(c.best, 0);
  for (const CompareRow& r : c.rows) {
    // 8 microbatches x 8 layers x 3 us over 4 ranks.
    EXPECT_DOUBLE_EQ(r.work_us, 48) << r.schedule << " v " << r.stages_per_rank;
    EXPECT_TRUE(r.fits());  // no device limit
  }
  for (size_t i = 1; i < c.rows.size(); ++i) {
    EXPECT_LE(c.rows[i - 1].simulation.makespan_us, c.rows[i].simulation.makespan_us);
  }
  // 1F1B v 1 and ZB-V v 2 both ran; GPipe refused v 2 with its reason.
  ASSERT_NE(Find(c, "1f1b", 1), nullptr);
  ASSERT_NE(Find(c, "zbv", 2), nullptr);
  EXPECT_EQ(Find(c, "gpipe", 2), nullptr);
  const auto refused = std::find_if(c.skipped.begin(), c.skipped.end(), [](const auto& s) {
    return s.schedule == "gpipe" && s.stages_per_rank == 2;
  });
  ASSERT_NE(refused, c.skipped.end());
  EXPECT_EQ(refused->reason, "gpipe: needs exactly 1 stage per rank, got 2");
  EXPECT_EQ(Find(c, "1f1b", 1)->layout, "t*2|t*2|t*2|t*2");
}

// DualPipe's two chains each hold the model: twice 1F1B's parameters per
// rank, the same compute.
TEST(CompareTest, DualPipeHoldsTwoCopies) {
  ASSERT_OK_AND_ASSIGN(Comparison c, CompareSchedules(Uniform(), {.pp = 4, .microbatches = 8}));
  const CompareRow* dual = Find(c, "dualpipe", 2);
  const CompareRow* plain = Find(c, "1f1b", 1);
  ASSERT_NE(dual, nullptr);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(dual->memory.ranks[1].parameters, 2 * plain->memory.ranks[1].parameters);
  EXPECT_DOUBLE_EQ(dual->work_us, plain->work_us);
}

// A device between the lightest and heaviest rows: those over it sort after
// every row that fits, and the best is the fastest that fits.
TEST(CompareTest, RowsThatDoNotFitSortLast) {
  ASSERT_OK_AND_ASSIGN(Comparison free, CompareSchedules(Uniform(), {.pp = 4, .microbatches = 8}));
  int64_t lightest = INT64_MAX, heaviest = 0;
  for (const CompareRow& r : free.rows) {
    lightest = std::min(lightest, r.memory.Heaviest().total());
    heaviest = std::max(heaviest, r.memory.Heaviest().total());
  }
  ASSERT_LT(lightest, heaviest);
  const int64_t limit = (lightest + heaviest) / 2;
  ASSERT_OK_AND_ASSIGN(Comparison c,
                       CompareSchedules(Uniform(limit), {.pp = 4, .microbatches = 8}));
  ASSERT_EQ(c.best, 0);
  bool seen_oom = false;
  double fastest_fitting = 1e300;
  for (const CompareRow& r : c.rows) {
    EXPECT_EQ(r.fits(), r.memory.Heaviest().total() <= limit);
    if (!r.fits()) seen_oom = true;
    EXPECT_FALSE(seen_oom && r.fits()) << r.schedule;  // no fitting row after an OOM one
    if (r.fits()) fastest_fitting = std::min(fastest_fitting, r.simulation.makespan_us);
  }
  EXPECT_TRUE(seen_oom);
  EXPECT_EQ(c.rows[0].simulation.makespan_us, fastest_fitting);
  // Nothing fits a device smaller than every row.
  ASSERT_OK_AND_ASSIGN(Comparison none,
                       CompareSchedules(Uniform(lightest - 1), {.pp = 4, .microbatches = 8}));
  EXPECT_EQ(none.best, -1);
  EXPECT_FALSE(none.rows.empty());
}

TEST(CompareTest, StagesPerRankAndLayoutRestrictTheRows) {
  ASSERT_OK_AND_ASSIGN(Comparison c, CompareSchedules(Uniform(), {.pp = 4, .microbatches = 8,
                                                                  .stages_per_rank = {2}}));
  for (const CompareRow& r : c.rows) EXPECT_EQ(r.stages_per_rank, 2);
  // A layout of 4 stages fits the single-stage schedules and DualPipe (two
  // chains of 4 stages) only.
  CompareOptions laid{.pp = 4, .microbatches = 8};
  laid.partition.layout = "t*5|t|t|t";
  ASSERT_OK_AND_ASSIGN(Comparison l, CompareSchedules(Uniform(), laid));
  for (const CompareRow& r : l.rows) {
    EXPECT_TRUE(r.stages_per_rank == 1 || r.schedule == "dualpipe") << r.schedule;
    EXPECT_EQ(r.layout, "t*5|t|t|t");
  }
  EXPECT_EQ(Message(CompareSchedules(Uniform(), {.pp = 0, .microbatches = 8})),
            "pp and microbatches must be >= 1, got 0 and 8");
  EXPECT_EQ(Message(CompareSchedules(Uniform(), {.pp = 4, .microbatches = 8,
                                                  .stages_per_rank = {0}})),
            "stages per rank must be >= 1, got 0");
}

// interleaved-zb at one stage per rank generates ZB-H1's very program: the
// later of the two rows says so; rows whose orders differ (looped-bfs v 1
// runs its backwards in reverse, GPipe in order) are not marked.
TEST(CompareTest, ARowRunningAnEarlierRowsProgramSaysSo) {
  ASSERT_OK_AND_ASSIGN(Comparison c, CompareSchedules(Uniform(), {.pp = 4, .microbatches = 8}));
  const CompareRow* zb = Find(c, "zb-h1", 1);
  const CompareRow* izb = Find(c, "interleaved-zb", 1);
  ASSERT_NE(zb, nullptr);
  ASSERT_NE(izb, nullptr);
  EXPECT_EQ(zb->program_hash, izb->program_hash);
  const bool zb_first = zb < izb;  // rows is one vector, sorted
  EXPECT_EQ((zb_first ? izb : zb)->same_as, zb_first ? "zb-h1 v1" : "interleaved-zb v1");
  EXPECT_EQ((zb_first ? zb : izb)->same_as, "");
  ASSERT_NE(Find(c, "looped-bfs", 1), nullptr);
  EXPECT_EQ(Find(c, "looped-bfs", 1)->same_as, "");
  EXPECT_EQ(Find(c, "gpipe", 1)->same_as, "");
  int marked = 0;
  for (const CompareRow& r : c.rows) marked += !r.same_as.empty();
  EXPECT_EQ(marked, 1);
}

TEST(CompareTest, DoesNotDependOnThreads) {
  ASSERT_OK_AND_ASSIGN(Comparison one, CompareSchedules(Uniform(), {.pp = 4, .microbatches = 8,
                                                                    .threads = 1}));
  ASSERT_OK_AND_ASSIGN(Comparison two, CompareSchedules(Uniform(), {.pp = 4, .microbatches = 8,
                                                                    .threads = 2}));
  ASSERT_EQ(one.rows.size(), two.rows.size());
  for (size_t i = 0; i < one.rows.size(); ++i) {
    EXPECT_EQ(one.rows[i].schedule, two.rows[i].schedule);
    EXPECT_EQ(one.rows[i].simulation.makespan_us, two.rows[i].simulation.makespan_us);
  }
}

// Two layers cut one per rank, the second twice as heavy (F = I = W = 1,
// then 2), one microbatch of GPipe: rank 0's F (0-1), rank 1's F (1-3) and
// backward (3-7), rank 0's backward (7-9). Makespan 9 us; rank 0 busy 3,
// rank 1 busy 6. Bubble 1 - 3/9 = 2/3: the busiest rank idles 1 - 6/9 =
// 1/3 (pipeline), and 6 - 3 = 3 us of extra work on rank 1 is the other
// 1/3 (imbalance). The workload (b 2, s 4: 8 tokens; 10^6 FLOPs per
// microbatch; peak 1 TFLOP/s) gives 8 tokens / 9 us / 2 GPUs per second and
// 10^6 / (9 us x 2 GPUs x 10^12) = 1/18 MFU.
TEST(CompareTest, EachRowSplitsItsBubbleAndDerivesTokensAndMfu) {
  LayeredModel m;
  m.layers.push_back({.kind = LayerKind::kLayer, .forward_us = 1, .backward_input_us = 1,
                      .backward_weight_us = 1});
  m.layers.push_back({.kind = LayerKind::kLayer, .forward_us = 2, .backward_input_us = 2,
                      .backward_weight_us = 2});
  m.workload = {.microbatch_size = 2, .seq_len = 4, .tp = 1, .model_flops_per_microbatch = 1e6};
  m.device.peak_tflops = 1;
  ASSERT_OK_AND_ASSIGN(Comparison c, CompareSchedules(m, {.pp = 2, .microbatches = 1,
                                                          .stages_per_rank = {1}}));
  const CompareRow* gpipe = Find(c, "gpipe", 1);
  ASSERT_NE(gpipe, nullptr);
  EXPECT_DOUBLE_EQ(gpipe->simulation.makespan_us, 9);
  EXPECT_DOUBLE_EQ(gpipe->simulation.bubble_fraction, 2.0 / 3);
  EXPECT_DOUBLE_EQ(gpipe->bubble.pipeline, 1.0 / 3);
  EXPECT_DOUBLE_EQ(gpipe->bubble.imbalance, 1.0 / 3);
  EXPECT_DOUBLE_EQ(gpipe->figures.step_s, 9e-6);
  EXPECT_EQ(gpipe->figures.tokens_per_step, 8);
  EXPECT_DOUBLE_EQ(gpipe->figures.tokens_per_s_per_gpu, 8 / 9e-6 / 2);
  ASSERT_TRUE(gpipe->figures.mfu.has_value());
  EXPECT_DOUBLE_EQ(*gpipe->figures.mfu, 1.0 / 18);
  // On every row the two parts add up to the bubble column.
  for (const CompareRow& r : c.rows) {
    EXPECT_NEAR(r.bubble.pipeline + r.bubble.imbalance, r.simulation.bubble_fraction, 1e-12)
        << r.schedule;
  }
}

// A budget already spent judges nothing: every candidate that would have
// made a row is skipped as out of time, one its schedule refuses keeps the
// refusal, and progress still counts each one, once.
TEST(CompareTest, ATimeBudgetSpentSkipsTheRowsNotYetJudged) {
  int calls = 0, last_done = 0, last_total = 0;
  ASSERT_OK_AND_ASSIGN(
      Comparison c,
      CompareSchedules(Uniform(), {.pp = 4, .microbatches = 8, .threads = 2,
                                   .time_budget = absl::ZeroDuration(),
                                   .progress = [&](int done, int total) {
                                     ++calls;
                                     EXPECT_EQ(done, last_done + 1);
                                     last_done = done;
                                     last_total = total;
                                   }}));
  EXPECT_TRUE(c.rows.empty());
  EXPECT_EQ(c.best, -1);
  ASSERT_FALSE(c.skipped.empty());
  // What the schedule itself refuses still says why; the rest are not judged.
  int not_judged = 0;
  for (const CompareSkipped& s : c.skipped) {
    if (s.schedule == "gpipe" && s.stages_per_rank == 2) {
      EXPECT_FALSE(s.out_of_time);
      EXPECT_EQ(s.reason, "gpipe: needs exactly 1 stage per rank, got 2");
    }
    if (s.schedule == "1f1b" && s.stages_per_rank == 1) {
      EXPECT_TRUE(s.out_of_time);
    }
    if (s.out_of_time) {
      ++not_judged;
      EXPECT_EQ(s.reason, "not judged: the time budget of 0 had passed");
    }
  }
  ASSERT_OK_AND_ASSIGN(Comparison all_rows, CompareSchedules(Uniform(), {.pp = 4,
                                                                         .microbatches = 8}));
  EXPECT_EQ(not_judged, static_cast<int>(all_rows.rows.size()));
  EXPECT_EQ(calls, static_cast<int>(c.skipped.size()));
  EXPECT_EQ(last_total, calls);
  // An ample budget judges them all, and calls progress as often.
  int judged = 0;
  ASSERT_OK_AND_ASSIGN(Comparison all,
                       CompareSchedules(Uniform(), {.pp = 4, .microbatches = 8,
                                                    .time_budget = absl::Hours(1),
                                                    .progress = [&](int, int) { ++judged; }}));
  EXPECT_EQ(judged, static_cast<int>(all.rows.size() + all.skipped.size()));
  for (const CompareSkipped& s : all.skipped) EXPECT_FALSE(s.out_of_time) << s.schedule;
}

}  // namespace
}  // namespace jitpipe::compare_test
