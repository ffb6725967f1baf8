// The check shared by the tests of a rank driven by its caller's own loop
// (the rank runner's, the bare executor's): interleaved 1F1B over pp 2, 4
// microbatches, mlp stages, rank 1 on a thread and rank 0 on this one over
// an in-process world, two steps, then every gradient against the
// unpipelined reference trainer.
#ifndef JITPIPE_TESTS_TESTING_TWO_MLP_RANKS_H_
#define JITPIPE_TESTS_TESTING_TWO_MLP_RANKS_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "comm/inproc/inproc_world.h"
#include "gtest/gtest.h"
#include "runtime/replay_plan.h"
#include "scheduler/generators/generate.h"
#include "stages/reference/mlp_reference.h"
#include "stages/reference/mlp_stage.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::testing {

// run_rank(plan, world_rank, transport, stages, steps, flight_dir) runs one
// rank for `steps` steps.
using RunOneRank = absl::FunctionRef<absl::Status(const ReplayPlan&, int, Transport&,
                                                  StageFactory&, int, const std::string&)>;

inline void ExpectTwoMlpRanksMatchTheReference(RunOneRank run_rank) {
  ASSERT_OK_AND_ASSIGN(Schedule generated, Generate({"interleaved-1f1b", 2, 4, 0}));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, LowerForReplay(generated));
  MlpStageFactory factory(MlpOptions{MlpShape{8, 2, 1}, 3}, MlpLayout::Of(lowered, 1));
  ASSERT_OK_AND_ASSIGN(Model model, ModelWithStageSizes(Model(), lowered.num_stages(), factory));
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, PlanReplay(lowered, model, MemoryPolicy::kJit));
  std::unique_ptr<InProcessWorld> world = CreateInProcessWorld(2);
  const std::string dir = MakeTempDir("two_ranks");
  absl::Status status1;
  std::thread rank1([&] { status1 = run_rank(plan, 1, world->transport(1), factory, 2, dir); });
  EXPECT_OK(run_rank(plan, 0, world->transport(0), factory, 2, dir));
  rank1.join();
  EXPECT_OK(status1);
  ASSERT_OK_AND_ASSIGN(MlpComparison c,
                       CompareWithReference(RunMlpReference(factory.options(), factory.layout()),
                                            0, factory, ReduceKind::kAllReduce));
  EXPECT_LE(c.worst_grad_error, 1e-5) << c.ToString();
}

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_TESTING_TWO_MLP_RANKS_H_
