// A killed process in a replay over the MPI world, as a job started by
// mpi_jobs_test.cc (MpiKillJobTest), which checks what mpirun and the other
// processes say: world rank 2 kills itself with SIGKILL mid-run; the others
// must fail with a clear error, never hang. Run alone, it skips. With
// JITPIPE_TEST_FLIGHT_DIR set (mpi_netns_test.cc, on two hosts) the replay
// keeps its flight records there. What every
// backend does in a replay is in tests/runtime/replay_conformance_test.cc.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "comm/mpi/mpi_world.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"
#include "stages/reference/mlp_stage.h"
#include "runtime/replay.h"
#include "runtime/replay_plan.h"
#include "tests/mpi/mpi_test_main.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/wrapped_stage.h"

namespace jitpipe {
namespace {

MpiWorld& Ctx() { return testing::TheMpiWorld(); }
int Rank() { return Ctx().rank(); }

MlpOptions SmallMlp() {
  MlpOptions options;
  options.shape = MlpShape{8, 3, 2};
  options.seed = 7;
  return options;
}

struct MlpReplay {
  std::unique_ptr<MlpStageFactory> factory;
  ReplayPlan plan;
};

// `name` at pp = world size, m = 2 pp, planned for the small mlp.
absl::StatusOr<MlpReplay> PrepareMlp(const std::string& name) {
  const int dp = 1;
  absl::StatusOr<Schedule> generated = Generate({name, Ctx().size(), 2 * Ctx().size(), 0});
  if (!generated.ok()) return generated.status();
  absl::StatusOr<Schedule> lowered = LowerForReplay(*generated);
  if (!lowered.ok()) return lowered.status();
  MlpReplay out;
  out.factory = std::make_unique<MlpStageFactory>(SmallMlp(), MlpLayout::Of(*lowered, dp));
  Model base;
  base.dp.size = dp;
  absl::StatusOr<Model> model = ModelWithStageSizes(base, lowered->num_stages(), *out.factory);
  if (!model.ok()) return model.status();
  absl::StatusOr<ReplayPlan> plan = PlanReplay(*std::move(lowered), *model, MemoryPolicy::kJit);
  if (!plan.ok()) return plan.status();
  out.plan = *std::move(plan);
  return out;
}

bool RunningAlone(absl::string_view suite) {
  return !absl::StrContains(::testing::GTEST_FLAG(filter), suite);
}

// Wraps the mlp factory: on world rank 2, the stage kills its own process
// (SIGKILL, as `kill -9` would) at its forward of microbatch 1 in the
// second step, so the job is mid-run on every process.
class KillingFactory final : public StageFactory {
 public:
  explicit KillingFactory(StageFactory* inner) : inner_(inner) {}
  absl::StatusOr<std::unique_ptr<Stage>> Make(int stage, int replica) override {
    absl::StatusOr<std::unique_ptr<Stage>> made = inner_->Make(stage, replica);
    if (!made.ok() || Rank() != 2) return made;
    return std::unique_ptr<Stage>(new Killing(*std::move(made)));
  }

 private:
  // Kills the process in its second forward of microbatch 1.
  class Killing final : public testing::WrappedStage {
   public:
    using WrappedStage::WrappedStage;
    absl::Status Forward(const ExecutionContext& ctx, int mb, ConstBytes input, MutableBytes output,
                         StashView stash) override {
      if (mb == 1 && ++ones_ == 2) raise(SIGKILL);
      return WrappedStage::Forward(ctx, mb, input, output, stash);
    }

   private:
    int ones_ = 0;
  };

  StageFactory* const inner_;
};

TEST(MpiKillTest, OthersFailWithAClearErrorWhenARankIsKilled) {
  if (RunningAlone("MpiKillTest")) GTEST_SKIP() << "runs in its own job (mpi_jobs_test)";
  absl::StatusOr<MlpReplay> r = PrepareMlp("1f1b");
  ASSERT_OK(r);
  KillingFactory factory(r->factory.get());
  ReplayOptions options;
  options.steps = 1000000;  // only the kill ends it
  options.timeout = absl::Seconds(30);
  if (const char* dir = std::getenv("JITPIPE_TEST_FLIGHT_DIR"); dir != nullptr) {
    options.flight_dir = dir;
  }
  absl::StatusOr<ReplayResult> result = RunReplay(r->plan.schedule, r->plan.executable,
                                                     r->plan.plans, factory, Ctx(), options);
  EXPECT_FALSE(result.ok());
  std::fprintf(stderr, "rank %d stopped: %s\n", Rank(),
               std::string(result.status().message()).c_str());
}

}  // namespace
}  // namespace jitpipe
