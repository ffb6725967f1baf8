// Planner properties over every built-in schedule, lowered as `jitpipe lower`
// does by default (--recv jit: each receive right before its consumer) and
// with --recv jit-rendezvous, for pp 2, 4, 8 and several m.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "memory/memory_plan.h"
#include "scheduler/generators/generate.h"
#include "scheduler/passes/lower.h"
#include "tests/testing/skewed_model.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::memory_plan_grid_test {
namespace {

constexpr int64_t kMiB = 1 << 20;

// Non-uniform like a language model: the first stage also holds the
// embedding, the last the output head and the loss.
Model NonUniformModel(int num_stages) {
  Model m;
  m.defaults.input_bytes = kMiB;
  m.defaults.output_bytes = kMiB;
  m.defaults.stash_bytes = 4 * kMiB;
  m.defaults.param_bytes = 16 * kMiB;
  StageOverride first;
  first.index = 0;
  first.spec.param_bytes = 64 * kMiB;
  first.spec.stash_bytes = 3 * kMiB;
  StageOverride last;
  last.index = num_stages - 1;
  last.spec.param_bytes = 64 * kMiB;
  last.spec.stash_bytes = 8 * kMiB;
  m.stages = {first, last};
  return m;
}

struct Case {
  std::string name;  // "zb-h1 pp4 m8"
  Schedule lowered;
};

// Every (pp, m) the generator accepts, lowered with Lower()'s defaults but
// for the receive placement.
std::vector<Case> Cases(const GeneratorInfo& generator,
                        RecvPlacement recv = LowerOptions().recv) {
  std::vector<Case> cases;
  for (int pp : {2, 4, 8}) {
    for (int m : {pp, pp + 1, 2 * pp, 3 * pp}) {
      absl::StatusOr<Schedule> s = Generate({generator.name, pp, m, 0});
      if (!s.ok()) continue;  // parameters the schedule does not support
      absl::StatusOr<Schedule> lowered = Lower(*s, {.recv = recv});
      EXPECT_OK(lowered);
      if (!lowered.ok()) continue;
      cases.push_back({absl::StrCat(generator.name, " pp", pp, " m", m), *lowered});
    }
  }
  EXPECT_GE(cases.size(), 6u) << generator.name;
  return cases;
}

// Every buffer is allocated once and freed once, the free not before the alloc.
void ExpectOneFreePerAlloc(const RankBuffers& buffers, const std::string& where) {
  const size_t n = buffers.buffers.size();
  std::vector<int> allocs(n, 0), frees(n, 0);
  for (const MemoryEvent& e : MemoryEvents(buffers)) {
    if (e.alloc) {
      EXPECT_EQ(frees[e.buffer], 0) << where << ": buffer " << e.buffer << " freed before alloc";
      ++allocs[e.buffer];
    } else {
      ++frees[e.buffer];
    }
  }
  for (size_t id = 0; id < n; ++id) {
    EXPECT_EQ(allocs[id], 1) << where << ": buffer " << id;
    EXPECT_EQ(frees[id], 1) << where << ": buffer " << id;
  }
}

// Why the peak exceeds the lower bound: the buffers live at the peak outside
// [needed_from, needed_until], e.g. "output_grad 0/1 allocated at 7
// (0RECV_B1), first needed at 9".
std::string HeldOutsideTheirUse(const RankMemoryPlan& plan, const RankProgram& program) {
  std::string out;
  for (int id : plan.peak_buffers) {
    const Buffer& b = plan.buffers.buffers[id];
    const std::string name = absl::StrCat(BufferKindName(b.kind), " ", b.stage, "/", b.microbatch);
    if (plan.peak.index < b.needed_from) {
      absl::StrAppend(&out, "; ", name, " allocated at ", b.alloc_index, " (",
                      program[b.alloc_index].ToString(), "), first needed at ", b.needed_from);
    } else if (plan.peak.index > b.needed_until) {
      absl::StrAppend(&out, "; ", name, " needed until ", b.needed_until, ", freed after ",
                      b.free_index, " (", program[b.free_index].ToString(), ")");
    }
  }
  return out;
}

// The arena is a heuristic: within 5% of the jit peak on every rank of the
// grid but one, where the best of its orderings leaves 7.8%: interleaved-zb
// pp8 m24 rank 7 (peak 193 MiB, arena 208 MiB, by duration). Its stages'
// parameter gradients (64 and 16 MiB, live from their first W to the step's
// end) start mid-program over stashes that die at different times, and the
// squeaky-wheel refinement stops at its first round that does not improve
// (rounds that went on would reach 200 MiB, 3.6%, after seven).
int ArenaSlackPercent(const std::string& where) {
  return where == "interleaved-zb pp8 m24 rank 7" ? 108 : 105;
}

}  // namespace

// gtest prints a failing parameter with this rather than as raw bytes.
void PrintTo(const GeneratorInfo& info, std::ostream* os) { *os << info.name; }

namespace {

class MemoryPlanGridTest : public ::testing::TestWithParam<GeneratorInfo> {};

TEST_P(MemoryPlanGridTest, Properties) {
  for (const Case& c : Cases(GetParam())) {
    const Model model = NonUniformModel(c.lowered.num_stages());
    PlanOptions eager;
    eager.policy = MemoryPolicy::kEager;
    for (int rank = 0; rank < c.lowered.pp; ++rank) {
      const std::string where = absl::StrCat(c.name, " rank ", rank);
      ASSERT_OK_AND_ASSIGN(RankMemoryPlan jit, PlanRankMemory(c.lowered, model, rank, {}));
      ASSERT_OK_AND_ASSIGN(RankMemoryPlan held, PlanRankMemory(c.lowered, model, rank, eager));
      ExpectOneFreePerAlloc(jit.buffers, where);
      ExpectOneFreePerAlloc(held.buffers, where);
      EXPECT_OK(VerifyArenaLayout(ArenaIntervals(jit.buffers), jit.arena, kDefaultArenaAlignment))
          << where;
      EXPECT_OK(VerifyArenaLayout(ArenaIntervals(held.buffers), held.arena, kDefaultArenaAlignment))
          << where;
      EXPECT_LE(jit.lower_bound.bytes, jit.peak.bytes) << where;
      EXPECT_LE(jit.peak.bytes, held.peak.bytes) << where;
      EXPECT_LE(jit.arena.arena_bytes, jit.peak.bytes * ArenaSlackPercent(where) / 100)
          << where << " (" << jit.arena.algorithm << ")";
    }
  }
}

// PlanOptions::arena_slack only ever ends the search early: with a slack,
// each rank's arena is the exhaustive search's (slack 0), or the start-order
// sweep's when that is within the slack of the peak. Checked for the default
// slack and for 25%, which keeps the sweep's layout on many ranks (1/256 of
// these small peaks is below the 1 MiB the layouts differ by); the test
// prints on how many and what that cost.
TEST_P(MemoryPlanGridTest, ArenaSlackEndsTheSearchOnlyWithinTheSlack) {
  for (double slack : {kDefaultArenaSlack, 0.25}) {
    int ranks = 0, kept_sweep = 0;
    int64_t extra_bytes = 0;
    PlanOptions options, exhaustive;
    options.arena_slack = slack;
    exhaustive.arena_slack = 0;
    for (const Case& c : Cases(GetParam())) {
      for (const Model& model :
           {NonUniformModel(c.lowered.num_stages()), testing::SkewedModel(c.lowered.num_stages())}) {
        for (int rank = 0; rank < c.lowered.pp; ++rank, ++ranks) {
          const std::string where = absl::StrCat(c.name, " rank ", rank, " slack ", slack);
          ASSERT_OK_AND_ASSIGN(RankMemoryPlan fast,
                               PlanRankMemory(c.lowered, model, rank, options));
          ASSERT_OK_AND_ASSIGN(RankMemoryPlan full,
                               PlanRankMemory(c.lowered, model, rank, exhaustive));
          EXPECT_LE(full.arena.arena_bytes, fast.arena.arena_bytes) << where;
          if (fast.arena.offsets == full.arena.offsets) continue;
          ++kept_sweep;
          extra_bytes += fast.arena.arena_bytes - full.arena.arena_bytes;
          EXPECT_EQ(fast.arena.algorithm, "greedy-by-start") << where;
          EXPECT_LE(fast.arena.arena_bytes,
                    fast.peak.bytes + static_cast<int64_t>(static_cast<double>(fast.peak.bytes) *
                                                           slack))
              << where;
        }
      }
    }
    std::printf("%s, arena slack %g: the start-order layout kept on %d of %d ranks, %lld bytes "
                "more than the exhaustive search in all\n",
                GetParam().name.c_str(), slack, kept_sweep, ranks,
                static_cast<long long>(extra_bytes));
  }
}

// The jit peak equals the liveness lower bound when every RECV sits right
// before its consumer and every SEND right after its producer, as the
// default lowering (--recv jit) places them. A failure names the buffers
// held outside their use at the peak.
TEST_P(MemoryPlanGridTest, JitPeakEqualsLowerBound) {
  int ranks = 0;
  for (const Case& c : Cases(GetParam())) {
    const Model model = NonUniformModel(c.lowered.num_stages());
    PlanOptions options;
    options.arena = false;
    for (int rank = 0; rank < c.lowered.pp; ++rank, ++ranks) {
      ASSERT_OK_AND_ASSIGN(RankMemoryPlan plan, PlanRankMemory(c.lowered, model, rank, options));
      EXPECT_GT(plan.lower_bound.bytes, 0) << c.name << " rank " << rank;
      EXPECT_EQ(plan.peak.bytes, plan.lower_bound.bytes)
          << c.name << " rank " << rank << ": jit peak at index " << plan.peak.index << " ("
          << plan.peak_action << ")" << HeldOutsideTheirUse(plan, c.lowered.ranks[rank]);
    }
  }
  EXPECT_GE(ranks, 6 * 2) << GetParam().name;
}

// A jit plan's buffers, held as eager holds them, give the eager plan's live
// bytes: what `jitpipe plan` reports as the eager peak without planning the
// rank twice. With and without prefetch, under both lowerings.
TEST_P(MemoryPlanGridTest, EagerLiveBytesOfJitBuffersAreTheEagerSeries) {
  for (RecvPlacement recv : {RecvPlacement::kJit, RecvPlacement::kJitRendezvous}) {
    for (const Case& c : Cases(GetParam(), recv)) {
      const Model model = NonUniformModel(c.lowered.num_stages());
      for (int rank = 0; rank < c.lowered.pp; ++rank) {
        ASSERT_OK_AND_ASSIGN(RankMemoryPlan eager,
                             PlanRankMemory(c.lowered, model, rank,
                                            {.policy = MemoryPolicy::kEager, .arena = false}));
        for (int prefetch : {0, 2}) {
          ASSERT_OK_AND_ASSIGN(
              RankMemoryPlan jit,
              PlanRankMemory(c.lowered, model, rank, {.prefetch = prefetch, .arena = false}));
          EXPECT_EQ(EagerLiveBytes(jit.buffers), LiveBytes(eager.buffers))
              << c.name << " rank " << rank << " prefetch " << prefetch;
        }
      }
    }
  }
}

// --recv jit-rendezvous posts some RECVs early (in per-pair send order, and
// before a SEND where ordered rendezvous would otherwise deadlock): its jit
// peak is never below the lower bound and, on some ranks, above it. Over
// this grid (616 ranks) it exceeds the bound on 89: interleaved-1f1b 3 of
// 56, looped-bfs 4, interleaved-zb 9, zbv 33, zb-h1 9, zb-h2 15, v-half 12,
// v-min 4 (gpipe, 1f1b, dualpipev, dualpipe: none); by one received buffer
// (1 MiB in this model), 2 MiB on one looped-bfs rank; at most 2.1% of a
// rank's bound. The test prints that summary per generator.
TEST_P(MemoryPlanGridTest, JitRendezvousPeakIsAtLeastTheLowerBound) {
  int ranks = 0, above = 0;
  int64_t most_bytes = 0;
  double most_share = 0;
  for (const Case& c : Cases(GetParam(), RecvPlacement::kJitRendezvous)) {
    const Model model = NonUniformModel(c.lowered.num_stages());
    PlanOptions options;
    options.arena = false;
    for (int rank = 0; rank < c.lowered.pp; ++rank, ++ranks) {
      ASSERT_OK_AND_ASSIGN(RankMemoryPlan plan, PlanRankMemory(c.lowered, model, rank, options));
      const int64_t excess = plan.peak.bytes - plan.lower_bound.bytes;
      EXPECT_GE(excess, 0) << c.name << " rank " << rank;
      if (excess <= 0) continue;
      ++above;
      most_bytes = std::max(most_bytes, excess);
      most_share = std::max(most_share, static_cast<double>(excess) / plan.lower_bound.bytes);
    }
  }
  std::printf("%s --recv jit-rendezvous: %d of %d ranks above the lower bound, by at most %.2f "
              "MiB (%.1f%% of the rank's bound)\n",
              GetParam().name.c_str(), above, ranks, static_cast<double>(most_bytes) / kMiB,
              100 * most_share);
}

INSTANTIATE_TEST_SUITE_P(AllGenerators, MemoryPlanGridTest, ::testing::ValuesIn(AllGenerators()),
                         [](const ::testing::TestParamInfo<GeneratorInfo>& param) {
                           std::string name;
                           for (char ch : param.param.name) name += ch == '-' ? '_' : ch;
                           return name;
                         });

}  // namespace
}  // namespace jitpipe::memory_plan_grid_test
