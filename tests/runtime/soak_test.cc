// Soak: a long in-process replay keeps its memory flat. The steps `jitpipe
// replay --stage mlp` runs (LowerForReplay, ModelWithStageSizes,
// PlanReplay, RunInProcess with a heap allocation per buffer) on
// interleaved-1f1b pp 4, v 2, m 32 with dp 2 (16 threads), for
// JITPIPE_SOAK_STEPS steps: 200 by default (what CI runs); the full soak is
//   JITPIPE_SOAK_STEPS=1000 build/default/tests/runtime/soak_test
// After every step the test samples the live heap bytes and the process's
// resident set; once warmed up (the first tenth of the steps, at least 50:
// every rank's flight-recorder ring fills in the first 16) neither may grow
// by 1% or more. Every step computes the same loss, and each rank's measured
// peak stays the plan's.
//
// The allocator runs with one arena (glibc M_ARENA_MAX = 1) so that the
// live heap is one number (mallinfo2) and the resident set measures our
// memory, not the allocator's: with glibc's default arena per thread the
// resident set creeps up by a few hundred bytes per step from fragmentation
// while the live heap stays flat. Under a sanitizer (its own allocator, with
// a quarantine) only the losses and peaks are checked.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"
#include "runtime/replay.h"
#include "stages/reference/mlp_stage.h"
#include "runtime/replay_plan.h"
#include "tests/testing/sanitizers.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::soak_test {
namespace {

// Under a sanitizer its allocator replaces glibc's, so only the replay's
// own checks run (the flatness check is skipped below): fewer steps do.
constexpr int kDefaultSteps = testing::kSanitized ? 60 : 200;
constexpr double kMaxGrowth = 0.01;

int SoakSteps() {
  const char* env = std::getenv("JITPIPE_SOAK_STEPS");
  const int steps = env != nullptr ? std::atoi(env) : kDefaultSteps;
  return steps > 0 ? steps : kDefaultSteps;
}

// Resident bytes of this process (/proc/self/statm, second field).
int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size_pages = 0, resident_pages = 0;
  statm >> size_pages >> resident_pages;
  return resident_pages * sysconf(_SC_PAGESIZE);
}

// Growth of samples[from..] over samples[from], as a fraction.
double GrowthAfter(const std::vector<int64_t>& samples, int from) {
  const int64_t highest = *std::max_element(samples.begin() + from, samples.end());
  return static_cast<double>(highest - samples[from]) / samples[from];
}

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

TEST(SoakTest, ReplayKeepsMemoryFlat) {
  // A sanitizer's allocator replaces glibc's and ignores mallopt (returns 0).
  if (!testing::kSanitized) {
    ASSERT_EQ(mallopt(M_ARENA_MAX, 1), 1);
  }
  const int steps = SoakSteps();
  const int warmup = std::max(50, steps / 10);
  ASSERT_GT(steps, warmup) << "JITPIPE_SOAK_STEPS must exceed the warm-up";
  constexpr int kDp = 2;
  ASSERT_OK_AND_ASSIGN(Schedule generated,
                       Generate({.schedule = "interleaved-1f1b", .pp = 4, .microbatches = 32}));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, LowerForReplay(generated));
  MlpStageFactory factory(MlpOptions{}, MlpLayout::Of(lowered, kDp));
  Model base;
  base.dp.size = kDp;
  ASSERT_OK_AND_ASSIGN(Model model, ModelWithStageSizes(base, lowered.num_stages(), factory));
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, PlanReplay(lowered, model, MemoryPolicy::kJit));

  // Sampled by world rank 0's thread after each step (index = steps done),
  // into room reserved up front so that sampling allocates nothing.
  std::vector<int64_t> live(steps + 1, 0), resident(steps + 1, 0);
  ReplayOptions options;
  options.dp = kDp;
  options.steps = steps;
  options.buffers = BufferMode::kTracked;
  options.on_step = [&live, &resident](int done) {
    live[done] = static_cast<int64_t>(mallinfo2().uordblks);
    resident[done] = ResidentBytes();
  };
  ASSERT_OK_AND_ASSIGN(ReplayResult result, RunInProcess(plan.schedule, plan.executable,
                                                         plan.plans, factory, options));

  ASSERT_EQ(result.step_loss.size(), static_cast<size_t>(steps));
  for (int step = 1; step < steps; ++step) {
    ASSERT_DOUBLE_EQ(result.step_loss[step], result.step_loss[0]) << "step " << step;
  }
  for (const RankReplay& rank : result.ranks) {
    EXPECT_EQ(rank.measured_peak_bytes, rank.planned_peak_bytes) << "world rank " << rank.world_rank;
  }
  if (testing::kSanitized) return;
  const double live_growth = GrowthAfter(live, warmup);
  const double resident_growth = GrowthAfter(resident, warmup);
  std::printf("soak: %d steps (median %.0f us); after %d warm-up steps: live heap %.2f MiB, "
              "resident %.2f MiB; growth after: live heap %+.3f%%, resident %+.3f%%; "
              "at the end: live %.2f MiB, resident %.2f MiB\n",
              steps, result.median_step_us(), warmup, MiB(live[warmup]), MiB(resident[warmup]),
              100 * live_growth, 100 * resident_growth, MiB(live[steps]), MiB(resident[steps]));
  RecordProperty("live_growth_percent", std::to_string(100 * live_growth));
  RecordProperty("resident_growth_percent", std::to_string(100 * resident_growth));
  EXPECT_LT(live_growth, kMaxGrowth) << "live heap " << live[warmup] << " -> " << live[steps];
  EXPECT_LT(resident_growth, kMaxGrowth)
      << "resident set " << resident[warmup] << " -> " << resident[steps];
}

}  // namespace
}  // namespace jitpipe::soak_test
