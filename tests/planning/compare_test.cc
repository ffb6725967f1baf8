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

}  // namespace
}  // namespace jitpipe::compare_test
