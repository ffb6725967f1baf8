#include "runtime/replay_plan.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "comm/backend_traits.h"
#include "comm/inproc/inproc_world.h"
#include "scheduler/generators/generate.h"
#include "scheduler/ir/schedule_csv.h"
#include "stages/reference/mlp_stage.h"
#include "tests/testing/noop_stage.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::replay_plan_test {
namespace {

using ::jitpipe::testing::Message;
using ::testing::HasSubstr;

// A compute-only schedule gets sends, receives and one REDUCE_GRAD per
// stage; a lowered one is taken as it is.
TEST(ReplayPlanTest, LowersWithGradientReductions) {
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({"interleaved-1f1b", 2, 4, 0}));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, LowerForReplay(s));
  EXPECT_TRUE(lowered.lowered);
  int reductions = 0;
  for (const RankProgram& program : lowered.ranks) {
    for (const Action& a : program) reductions += a.kind == ActionKind::kReduceGrad;
  }
  EXPECT_EQ(reductions, s.num_stages());
  ASSERT_OK_AND_ASSIGN(Schedule again, LowerForReplay(lowered));
  EXPECT_EQ(again, lowered);
}

TEST(ReplayPlanTest, TakesTheByteSizesFromTheStages) {
  MlpOptions options;
  options.shape = MlpShape{8, 2, 3};
  MlpStageFactory factory(options, MlpLayout{4, 1, 4, 1});
  Model model;
  model.defaults.forward_us = 7;
  model.defaults.input_bytes = 1;
  StageOverride third{2, {}};
  third.spec.backward_input_us = 9;
  model.stages.push_back(third);
  model.dp.param_dtype = Dtype::kBf16;
  ASSERT_OK_AND_ASSIGN(Model sized, ModelWithStageSizes(model, 4, factory));
  for (int s = 0; s < 4; ++s) {
    const StageCost c = sized.ForStage(s);
    EXPECT_EQ(c.input_bytes, 2 * 8 * 4);
    EXPECT_EQ(c.output_bytes, 2 * 8 * 4);
    EXPECT_EQ(c.stash_bytes, 2 * 3 * 2 * 8 * 4);
    EXPECT_EQ(sized.GradBytes(s), 3 * (64 + 8) * 4);  // fp32 gradients
    EXPECT_EQ(c.param_bytes, 3 * (64 + 8) * 2);       // bf16 parameters
    EXPECT_EQ(c.forward_us, 7);
  }
  EXPECT_EQ(sized.ForStage(2).backward_input_us, 9);  // the override's time is kept

}


TEST(ReplayPlanTest, RefusesGradientsThatAreNotWholeElements) {
  // Gradients of 6 bytes: not a whole number of fp32 values.
  testing::NoopStageFactory factory(StageSizes{4, 4, 0, 6});
  Model model;
  absl::StatusOr<Model> sized = ModelWithStageSizes(model, 2, factory);
  EXPECT_EQ(sized.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(sized), "stage 0's 6 gradient bytes are not a whole number of fp32 elements "
                            "(the model's dp.grad_dtype)");
  model.dp.grad_dtype = Dtype::kBf16;
  EXPECT_OK(ModelWithStageSizes(model, 2, factory));
}

TEST(ReplayPlanTest, PlansValidatesAndBuilds) {
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({"1f1b", 2, 4, 0}));
  Model model;
  model.defaults.output_bytes = 10;
  model.defaults.input_bytes = 10;
  EXPECT_EQ(PlanReplay(s, model, MemoryPolicy::kJit).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_OK_AND_ASSIGN(Schedule lowered, LowerForReplay(s));
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, PlanReplay(lowered, model, MemoryPolicy::kEager));
  ASSERT_EQ(plan.plans.size(), 2u);
  EXPECT_EQ(plan.plans[0].options.policy, MemoryPolicy::kEager);
  EXPECT_FALSE(plan.plans[0].arena.offsets.empty());
  EXPECT_EQ(plan.executable.ranks.size(), 2u);
  EXPECT_EQ(plan.executable.transfers.size(), 2u * 4);
}

// Rank 0 waits in 0B0 for a gradient that needs its own later 0SEND_F0.
TEST(ReplayPlanTest, RefusesAProgramThatDeadlocks) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv("0F0,0RECV_B0,0B0,0SEND_F0\n"
                                                    "1RECV_F0,1F0,1B0,1SEND_B0\n"));
  absl::StatusOr<ReplayPlan> plan = PlanReplay(s, Model(), MemoryPolicy::kJit);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(plan), HasSubstr("deadlock"));
}

// The receive placement follows the backend's FIFOs: whatever the
// schedule, LowerForOrdering's program passes CheckProgramOrder for the
// ordering it was lowered for; the default (jit) lowering is refused where
// one FIFO per rank needs strict semantics, naming what is needed.
TEST(ReplayPlanTest, LowersForTheBackendsOrderingAndChecksIt) {
  for (const char* name : {"1f1b", "interleaved-1f1b", "zbv", "dualpipev"}) {
    ASSERT_OK_AND_ASSIGN(Schedule s, Generate({name, 4, 8, 0}));
    for (P2pOrdering ordering :
         {P2pOrdering::kByTag, P2pOrdering::kFifoPerEdge, P2pOrdering::kFifoPerRank}) {
      ASSERT_OK_AND_ASSIGN(Schedule lowered, LowerForOrdering(s, ordering));
      EXPECT_OK(CheckProgramOrder(lowered, ordering))
          << name << " ordering " << static_cast<int>(ordering);
    }
  }
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({"1f1b", 4, 8, 0}));
  ASSERT_OK_AND_ASSIGN(Schedule jit, LowerForReplay(s, RecvPlacement::kJit));
  const absl::Status refused = CheckProgramOrder(jit, P2pOrdering::kFifoPerRank);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(refused),
              ::testing::StartsWith("one FIFO per rank (nccl) needs a program that is "
                                    "deadlock-free under strict semantics (lower it with --recv "
                                    "jit-rendezvous): deadlock under strict rendezvous"));
  ASSERT_OK_AND_ASSIGN(Schedule rendezvous, LowerForOrdering(s, P2pOrdering::kFifoPerRank));
  ASSERT_OK_AND_ASSIGN(Schedule again, LowerForReplay(s, RecvPlacement::kJitRendezvous));
  EXPECT_EQ(rendezvous, again);
}

// Lowering for a backend follows from its traits alone: the in-process
// world reports the traits its row gives; MPI with arena buffers gets the
// rendezvous placement, with tracked buffers the jit one; nccl the
// placement for one FIFO per rank. An unknown name lists the backends.
TEST(ReplayPlanTest, LowersForABackendFromItsTraits) {
  std::unique_ptr<InProcessWorld> world = CreateInProcessWorld(2);
  ASSERT_OK_AND_ASSIGN(BackendTraits inproc, BackendTraitsOf("inproc"));
  EXPECT_EQ(inproc.send_completion, world->send_completion());
  EXPECT_EQ(inproc.ordering, world->p2p_ordering());
  EXPECT_FALSE(inproc.device);
  EXPECT_EQ(Message(BackendTraitsOf("tcp").status()),
            "--backend must be inproc, mpi, cuda, nccl or nccl-lazy, not \"tcp\"");
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({"interleaved-1f1b", 4, 8, 0}));
  ASSERT_OK_AND_ASSIGN(BackendTraits mpi, BackendTraitsOf("mpi"));
  ASSERT_OK_AND_ASSIGN(BackendTraits nccl, BackendTraitsOf("nccl"));
  ASSERT_OK_AND_ASSIGN(Schedule jit, LowerForReplay(s, RecvPlacement::kJit));
  ASSERT_OK_AND_ASSIGN(Schedule rendezvous, LowerForReplay(s, RecvPlacement::kJitRendezvous));
  ASSERT_NE(jit, rendezvous);
  ASSERT_OK_AND_ASSIGN(Schedule mpi_tracked, LowerForBackend(s, mpi, BufferMode::kTracked));
  ASSERT_OK_AND_ASSIGN(Schedule mpi_arena, LowerForBackend(s, mpi, BufferMode::kArena));
  ASSERT_OK_AND_ASSIGN(Schedule inproc_arena, LowerForBackend(s, inproc, BufferMode::kArena));
  ASSERT_OK_AND_ASSIGN(Schedule on_nccl, LowerForBackend(s, nccl, BufferMode::kTracked));
  EXPECT_EQ(mpi_tracked, jit);
  EXPECT_EQ(mpi_arena, rendezvous);
  EXPECT_EQ(inproc_arena, jit);
  EXPECT_OK(CheckProgramOrder(on_nccl, P2pOrdering::kFifoPerRank));
}

// A FIFO per directed pair needs only each pair's order: the jit placement
// where it keeps it (1F1B), the rendezvous placement where it does not.
TEST(ReplayPlanTest, AFifoPerEdgeKeepsTheJitPlacementWhereThePairOrderHolds) {
  ASSERT_OK_AND_ASSIGN(Schedule flat, Generate({"1f1b", 4, 8, 0}));
  ASSERT_OK_AND_ASSIGN(Schedule per_edge, LowerForOrdering(flat, P2pOrdering::kFifoPerEdge));
  ASSERT_OK_AND_ASSIGN(Schedule jit, LowerForReplay(flat, RecvPlacement::kJit));
  EXPECT_EQ(per_edge, jit);
  // A hand-made pair-order violation is named.
  ASSERT_OK_AND_ASSIGN(Schedule swapped,
                       ParseScheduleCsv("0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
                                            "1RECV_F1,1RECV_F0,1F0,1F1,1B0,1SEND_B0,1B1,1SEND_B1\n"));
  const absl::Status refused = CheckProgramOrder(swapped, P2pOrdering::kFifoPerEdge);
  EXPECT_THAT(Message(refused),
              ::testing::StartsWith("a FIFO per directed pair of ranks (nccl-lazy) needs every "
                                    "pair's receives in the order of its sends"));
  EXPECT_OK(CheckProgramOrder(swapped, P2pOrdering::kByTag));
}

TEST(ReplayPlanTest, TheEdgesOfAReplayAreEveryReplicasTransfers) {
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({"1f1b", 2, 4, 0}));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, LowerForReplay(s));
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, PlanReplay(lowered, Model(), MemoryPolicy::kJit));
  EXPECT_THAT(P2pEdges(plan.executable, 2, 2),
              ::testing::ElementsAre(Edge{0, 1}, Edge{1, 0}, Edge{2, 3}, Edge{3, 2}));
}

}  // namespace
}  // namespace jitpipe::replay_plan_test
