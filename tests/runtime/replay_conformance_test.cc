// The replay driver (runtime/replay.h) over every backend's World, one body
// per test: schedules with mlp stages replayed and checked against the
// reference trainer, the checks RunReplay makes before it starts, and the
// failure report. Worlds of 4 ranks: pp 4, or pp 2 x dp 2. In process a
// fresh world per test; over MPI the processes of `mpirun -np 4
// replay_conformance_test --gtest_filter=*/mpi*`, and a job of its own for
// each suite that ends the world (tests/mpi/CMakeLists.txt).
//
// What only one backend does stays in its own tests: the in-process grid of
// every schedule, stuck stages and the rank runner in replay_test.cc; a
// killed process, stuck jobs and the CLI's jobs in tests/mpi/.
#include <algorithm>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/cuda/cuda_world.h"
#include "comm/flight_analysis.h"
#include "comm/inproc/inproc_world.h"
#include "comm/mpi/mpi_world.h"
#include "comm/nccl/nccl_world.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stages/reference/mlp_gradients.h"
#include "runtime/replay.h"
#include "scheduler/generators/generate.h"
#include "runtime/replay_plan.h"
#include "stages/device/host_staged_stage.h"
#include "stages/reference/mlp_reference.h"
#include "stages/reference/mlp_stage.h"
#include "tests/testing/sanitizers.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"
#include "tests/testing/world_backends.h"
#include "tests/testing/wrapped_stage.h"

namespace jitpipe::replay_conformance_test {
namespace {

using ::jitpipe::testing::Launcher;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::TestWorld;
using ::jitpipe::testing::WorldBackend;
using ::jitpipe::testing::WorldOr;
using ::jitpipe::testing::WorldUse;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr double kTolerance = 1e-5;
constexpr absl::Duration kLong = absl::Seconds(30);

MlpOptions SmallMlp() {
  MlpOptions options;
  options.shape = MlpShape{8, 3, 2};
  options.seed = 7;
  return options;
}

// A schedule lowered with `recv` and planned for the small mlp, with its
// factory.
struct MlpReplay {
  std::unique_ptr<MlpStageFactory> factory;
  ReplayPlan plan;
};

// `ordering`: the world's (World::p2p_ordering): a backend that matches in
// order gets the receive placement proven for it (LowerForOrdering) unless
// `recv` asks for another than the default.
absl::StatusOr<MlpReplay> PrepareMlp(const std::string& name, int pp, int m, int dp,
                                     ReduceKind reduce = ReduceKind::kAllReduce,
                                     RecvPlacement recv = RecvPlacement::kJit,
                                     P2pOrdering ordering = P2pOrdering::kByTag) {
  absl::StatusOr<Schedule> generated = Generate({name, pp, m, 0});
  if (!generated.ok()) return generated.status();
  absl::StatusOr<Schedule> lowered = recv == RecvPlacement::kJit
                                         ? LowerForOrdering(*generated, ordering)
                                         : LowerForReplay(*generated, recv);
  if (!lowered.ok()) return lowered.status();
  MlpReplay out;
  out.factory = std::make_unique<MlpStageFactory>(SmallMlp(), MlpLayout::Of(*lowered, dp));
  Model base;
  base.dp.size = dp;
  base.dp.reduce = reduce;
  absl::StatusOr<Model> model = ModelWithStageSizes(base, lowered->num_stages(), *out.factory);
  if (!model.ok()) return model.status();
  absl::StatusOr<ReplayPlan> plan = PlanReplay(*std::move(lowered), *model, MemoryPolicy::kJit);
  if (!plan.ok()) return plan.status();
  out.plan = *std::move(plan);
  return out;
}

// The stages a world's ranks run: `inner`'s, staged through host memory
// on a device backend (stages/device/host_staged_stage.h): the reference
// mlp then checks the device backends' transfers, reductions and buffers.
class StagesOn {
 public:
  StagesOn(World& world, StageFactory* inner) : inner_(inner) {
    if (world.transport(world.local_ranks()[0]).device_streams() != nullptr) {
      staged_ = std::make_unique<HostStagedFactory>(inner);
    }
  }
  StageFactory& get() { return staged_ != nullptr ? *staged_ : *inner_; }

 private:
  StageFactory* const inner_;
  std::unique_ptr<HostStagedFactory> staged_;
};

struct ReplayCase {
  std::string schedule;
  int dp = 1;  // pp = world size / dp
  ReduceKind reduce = ReduceKind::kAllReduce;
  BufferMode buffers = BufferMode::kTracked;
  // Under a sanitizer a launched backend runs only these, one per code path
  // (reduce-scatter, arena buffers over rendezvous, the V placement with
  // replicas): each case is a replay of instrumented processes.
  bool sanitized = false;
};

void PrintTo(const ReplayCase& c, std::ostream* os) { *os << c.schedule << " dp " << c.dp; }

// Flat, interleaved (loop placement) and V placement with zero bubble (I/W
// split), each with one and two replicas; reduce-scatter; arena buffers.
std::vector<ReplayCase> Cases() {
  return {
      {"1f1b", 1},
      {"1f1b", 2},
      {"1f1b", 2, ReduceKind::kReduceScatter, BufferMode::kTracked, true},
      {"interleaved-1f1b", 1},
      {"interleaved-1f1b", 2},
      {"interleaved-1f1b", 1, ReduceKind::kAllReduce, BufferMode::kArena, true},
      {"zbv", 1},
      {"zbv", 2, ReduceKind::kAllReduce, BufferMode::kTracked, true},
  };
}

std::string CaseName(const ReplayCase& c) {
  std::string name = absl::StrCat(c.schedule, "_dp", c.dp);
  std::replace(name.begin(), name.end(), '-', '_');
  if (c.reduce == ReduceKind::kReduceScatter) name += "_reduce_scatter";
  if (c.buffers == BufferMode::kArena) name += "_arena";
  return name;
}

class ReplayConformanceTest
    : public ::testing::TestWithParam<std::tuple<WorldBackend, ReplayCase>> {
 protected:
  void SetUp() override {
    const absl::Status opened = world_.Open(std::get<0>(GetParam()), WorldUse::kKeeps);
    if (!opened.ok()) GTEST_SKIP() << opened.message();
    if (world_->size() != 4) GTEST_SKIP() << "needs a world of 4, not " << world_->size();
  }

  TestWorld world_;
};

// Two steps: the loss and every gradient the reference trainer's (at world
// rank 0, which gathered the others' gradients); a rank's measured peak
// exactly its plan's where sends complete when posted; the arena allocated
// once; every step's timeline; and, on a backend other than the in-process
// one, the in-process run's loss and gradients bit for bit (the same float
// operations in the same order: a two-member sum is commutative).
TEST_P(ReplayConformanceTest, MatchesTheReferenceTrainerAndThePlan) {
  const ReplayCase& c = std::get<1>(GetParam());
  if (testing::kSanitized && std::get<0>(GetParam()).launcher != Launcher::kNone &&
      !c.sanitized) {
    GTEST_SKIP() << "under a sanitizer this backend runs the cases marked sanitized";
  }
  // Arena buffers complete a send before reusing its bytes: where sends wait
  // for their receives, the receives must be placed for it (replay.h).
  const bool rendezvous = c.buffers == BufferMode::kArena &&
                          world_->send_completion() == SendCompletion::kRendezvous;
  const int pp = world_->size() / c.dp;
  ASSERT_OK_AND_ASSIGN(
      MlpReplay r, PrepareMlp(c.schedule, pp, 2 * pp, c.dp, c.reduce,
                              rendezvous ? RecvPlacement::kJitRendezvous : RecvPlacement::kJit,
                              world_->p2p_ordering()));
  StagesOn stages(*world_, r.factory.get());
  ReplayOptions options;
  options.dp = c.dp;
  options.steps = 2;
  options.reduce = c.reduce;
  options.buffers = c.buffers;
  options.timeout = kLong;
  options.record_timeline = true;
  ASSERT_OK_AND_ASSIGN(ReplayResult result, RunReplay(r.plan.schedule, r.plan.executable,
                                                      r.plan.plans, stages.get(), *world_, options));
  ASSERT_OK(GatherMlpGradients(r.plan.schedule, *r.factory, *world_, kLong));
  if (!world_->is_root()) {  // its own ranks only
    ASSERT_EQ(result.ranks.size(), world_->local_ranks().size());
    for (size_t i = 0; i < result.ranks.size(); ++i) {
      EXPECT_EQ(result.ranks[i].world_rank, world_->local_ranks()[i]);
    }
    return;
  }

  const MlpLayout& layout = r.factory->layout();
  const MlpReference reference = RunMlpReference(SmallMlp(), layout);
  ASSERT_EQ(result.step_loss.size(), 2u);
  EXPECT_EQ(result.step_loss[0], result.step_loss[1]);  // no optimizer step
  ASSERT_OK_AND_ASSIGN(MlpComparison check,
                       CompareWithReference(reference, result.step_loss[0], *r.factory, c.reduce));
  EXPECT_TRUE(check.Within(kTolerance)) << check.ToString();

  ASSERT_EQ(static_cast<int>(result.ranks.size()), world_->size());
  for (size_t w = 0; w < result.ranks.size(); ++w) {
    const RankReplay& rank = result.ranks[w];
    EXPECT_EQ(rank.world_rank, static_cast<int>(w));
    EXPECT_EQ(rank.rank, static_cast<int>(w) % pp);
    EXPECT_EQ(rank.replica, static_cast<int>(w) / pp);
    if (world_->send_completion() == SendCompletion::kEager) {
      EXPECT_EQ(rank.measured_peak_bytes, rank.planned_peak_bytes) << "world rank " << w;
    }
    if (c.buffers == BufferMode::kArena) {
      EXPECT_EQ(rank.buffer_heap_allocations, rank.arena_bytes > 0 ? 1 : 0);
    } else {
      EXPECT_GT(rank.buffer_heap_allocations, 1);
    }
  }

  // A span per action and step; a REDUCE_GRAD's is its collective, which
  // runs only when there is another replica to reduce with (dp > 1).
  size_t spans = 0, reduce_actions = 0;
  for (const RankExecutable& exe : r.plan.executable.ranks) {
    spans += exe.steps.size();
    for (const ExecStep& step : exe.steps) {
      reduce_actions += step.kind == ActionKind::kReduceGrad && step.buffer != kNoBuffer;
    }
  }
  const size_t collectives = c.dp > 1 ? reduce_actions : 0;
  EXPECT_EQ(result.timeline.spans.size(), 2 * c.dp * (spans - reduce_actions + collectives));
  int reductions = 0;
  for (const TimelineSpan& span : result.timeline.spans) {
    EXPECT_LE(span.start_us, span.end_us);
    reductions += span.track == TimelineTrack::kReduce;
  }
  EXPECT_EQ(reductions, c.dp > 1 ? 2 * c.dp * r.plan.schedule.num_stages() : 0);
  EXPECT_FALSE(result.timeline.memory.empty());
  ASSERT_EQ(result.step_us.size(), 2u);
  EXPECT_GT(result.step_us[0], 0);

  if (world_->name() == "in-process") return;
  MlpStageFactory threads(SmallMlp(), layout);
  ASSERT_OK_AND_ASSIGN(ReplayResult in_process, RunInProcess(r.plan.schedule, r.plan.executable,
                                                             r.plan.plans, threads, options));
  EXPECT_EQ(result.step_loss, in_process.step_loss);
  for (int k = 0; k < layout.dp; ++k) {
    for (int s = 0; s < layout.num_stages(); ++s) {
      EXPECT_EQ(r.factory->FinishedGrads(s, k), threads.FinishedGrads(s, k))
          << "stage " << s << " of replica " << k;
    }
  }
}

std::string ReplayCaseName(
    const ::testing::TestParamInfo<std::tuple<WorldBackend, ReplayCase>>& info) {
  return absl::StrCat(std::get<0>(info.param).name, "_", CaseName(std::get<1>(info.param)));
}

// The checks RunReplay makes before any rank starts, the same on every
// process.
class ReplayWorldTest : public ::testing::TestWithParam<WorldBackend> {
 protected:
  void SetUp() override {
    const absl::Status opened = world_.Open(GetParam(), WorldUse::kKeeps);
    if (!opened.ok()) GTEST_SKIP() << opened.message();
    if (world_->size() != 4) GTEST_SKIP() << "needs a world of 4, not " << world_->size();
  }

  TestWorld world_;
};

TEST_P(ReplayWorldTest, RefusesAWorldOfAnotherSize) {
  ASSERT_OK_AND_ASSIGN(MlpReplay r, PrepareMlp("1f1b", 4, 8, /*dp=*/1));
  StagesOn stages(*world_, r.factory.get());
  ReplayOptions options;
  options.dp = 2;
  absl::StatusOr<ReplayResult> result =
      RunReplay(r.plan.schedule, r.plan.executable, r.plan.plans, stages.get(), *world_, options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(result), HasSubstr(" world has 4 "));
  EXPECT_THAT(Message(result), HasSubstr(" but pp 4 x dp 2 needs 8"));
}

// Arena buffers complete each send before its bytes are reused. Where a send
// completes when posted, any valid program runs so; where it may wait for
// its receive, the program must be deadlock-free under rendezvous
// semantics, and the default just-in-time receives are not.
TEST_P(ReplayWorldTest, ArenaBuffersNeedARendezvousSafeProgramWhereSendsWaitForReceives) {
  ASSERT_OK_AND_ASSIGN(MlpReplay r, PrepareMlp("1f1b", 4, 8, /*dp=*/1));
  StagesOn stages(*world_, r.factory.get());
  ReplayOptions options;
  options.buffers = BufferMode::kArena;
  options.timeout = kLong;
  absl::StatusOr<ReplayResult> result =
      RunReplay(r.plan.schedule, r.plan.executable, r.plan.plans, stages.get(), *world_, options);
  if (world_->send_completion() == SendCompletion::kEager) {
    EXPECT_OK(result);
    return;
  }
  if (world_->p2p_ordering() != P2pOrdering::kByTag) {  // the FIFOs refuse the program first
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Message(result), StartsWith(absl::StrCat("over ", world_->name(), ": ")));
    return;
  }
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(result),
              StartsWith(absl::StrCat("arena buffers over ", world_->name(),
                                      " need a program that is deadlock-free under rendezvous "
                                      "semantics (lower it with --recv jit-rendezvous): deadlock "
                                      "under strict")));
}

// Wraps the mlp factory: one stage of one replica fails its forward of
// microbatch 1.
class FailingFactory final : public StageFactory {
 public:
  FailingFactory(StageFactory* inner, int stage, int replica)
      : inner_(inner), stage_(stage), replica_(replica) {}
  absl::StatusOr<std::unique_ptr<Stage>> Make(int stage, int replica) override {
    absl::StatusOr<std::unique_ptr<Stage>> made = inner_->Make(stage, replica);
    if (!made.ok() || stage != stage_ || replica != replica_) return made;
    return std::unique_ptr<Stage>(new Failing(*std::move(made)));
  }

 private:
  class Failing final : public testing::WrappedStage {
   public:
    using WrappedStage::WrappedStage;
    absl::Status Forward(const ExecutionContext& ctx, int m, ConstBytes in, MutableBytes out,
                         StashView stash) override {
      if (m == 1) return absl::InternalError("injected failure");
      return WrappedStage::Forward(ctx, m, in, out, stash);
    }
  };

  StageFactory* const inner_;
  const int stage_, replica_;
};

// A failed run leaves the world aborted: a launched backend runs each of
// these suites in a job of its own.
class ReplayFailureTest : public ReplayWorldTest {
 protected:
  void SetUp() override {
    const absl::Status opened = world_.Open(GetParam(), WorldUse::kEnds);
    if (!opened.ok()) GTEST_SKIP() << opened.message();
    if (world_->size() != 4) GTEST_SKIP() << "needs a world of 4, not " << world_->size();
  }
};
class ReplayStallTest : public ReplayFailureTest {};

// Pipeline rank 1 of replica 0 fails; its pipeline neighbour and the other
// replica (waiting in the gradient all-reduce) stop with Aborted at once,
// long before the timeout, and world rank 0 reports the failure first.
TEST_P(ReplayFailureTest, AFailedStageStopsEveryRankAndRankZeroReportsItFirst) {
  ASSERT_OK_AND_ASSIGN(MlpReplay r, PrepareMlp("1f1b", 2, 4, /*dp=*/2, ReduceKind::kAllReduce,
                                               RecvPlacement::kJit, world_->p2p_ordering()));
  FailingFactory failing(r.factory.get(), /*stage=*/1, /*replica=*/0);
  StagesOn factory(*world_, &failing);
  ReplayOptions options;
  options.dp = 2;
  options.timeout = kLong;
  absl::StatusOr<ReplayResult> result =
      RunReplay(r.plan.schedule, r.plan.executable, r.plan.plans, factory.get(), *world_, options);
  if (!world_->is_root()) {  // its own ranks' root failure
    EXPECT_THAT(result.status().code(),
                AnyOf(absl::StatusCode::kInternal, absl::StatusCode::kAborted));
    return;
  }
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(Message(result), "rank 1, index 5 (1F1) (pipeline rank 1, replica 0): injected "
                             "failure; other ranks: aborted (0, 2, 3)");
}

// GPipe at pp 4 x m 4 with world rank 2's last SEND_B turned into a no-op in
// the executable (the validator and the builder would refuse a program
// without it): rank 1 waits for that gradient until the 2 s timeout, rank 0 waits on
// rank 1, ranks 2 and 3 finish their steps and wait for the others. Every
// rank stops and dumps its record, rank 0's flight directory ends up with
// every record, and the analysis names the receive whose send is missing.
TEST_P(ReplayStallTest, AMissingSendTimesOutAndTheFlightRecordsNameIt) {
  ASSERT_OK_AND_ASSIGN(MlpReplay r, PrepareMlp("gpipe", 4, 4, /*dp=*/1, ReduceKind::kAllReduce,
                                               RecvPlacement::kJit, world_->p2p_ordering()));
  StagesOn stages(*world_, r.factory.get());
  const RankProgram& program = r.plan.schedule.ranks[2];
  std::vector<ExecStep>& steps = r.plan.executable.ranks[2].steps;
  auto send = std::find_if(steps.rbegin(), steps.rend(), [&](const ExecStep& step) {
    return program[step.index].kind == ActionKind::kSendB;
  });
  ASSERT_NE(send, steps.rend());
  const int microbatch = program[send->index].microbatch;
  send->kind = ActionKind::kReshard;  // the executor now runs the step as a no-op
  const std::string dir = MakeTempDir("replay_stall");
  ReplayOptions options;
  options.timeout = absl::Seconds(2);
  options.flight_dir = dir;
  absl::StatusOr<ReplayResult> result =
      RunReplay(r.plan.schedule, r.plan.executable, r.plan.plans, stages.get(), *world_, options);
  if (!world_->is_root()) {
    EXPECT_THAT(result.status().code(),
                AnyOf(absl::StatusCode::kDeadlineExceeded, absl::StatusCode::kAborted));
    return;
  }
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(Message(result), HasSubstr(absl::StrCat("; flight analysis (records in ", dir,
                                                      "): rank 1 waits at index ")));
  EXPECT_THAT(Message(result),
              HasSubstr(absl::StrCat(" (1RECV_B", microbatch, ") for rank 2; rank 2's last op")));
  ASSERT_OK_AND_ASSIGN(std::vector<FlightRecord> records, LoadFlightRecords(dir));
  EXPECT_EQ(records.size(), 4u);
  const FlightAnalysis analysis = AnalyzeFlightRecords(records);
  EXPECT_THAT(analysis.first, StartsWith("rank 1 waits at index "));
}

// The backends. Adding one is one folder under comm/ plus one line here and
// one in tests/comm/transport_conformance_test.cc (see the list there); a
// backend this build or machine lacks stays listed and skips.
const WorldBackend kBackends[] = {
    {"inproc", Launcher::kNone, [](int size) -> WorldOr { return CreateInProcessWorld(size); }},
    {"mpi", Launcher::kMpirun, [](int) -> WorldOr { return CreateMpiWorld(nullptr, nullptr, {}); }},
    {"cuda", Launcher::kNone, [](int size) -> WorldOr { return CreateCudaWorld(size, {}); },
     /*host_collectives=*/false},
    {"nccl", Launcher::kMpirun,
     [](int) -> WorldOr { return CreateNcclWorld(nullptr, nullptr, {}); }, false, false, false},
    {"nccl_lazy", Launcher::kMpirun,
     [](int) -> WorldOr {
       NcclOptions options;
       options.mode = NcclMode::kLazy;
       return CreateNcclWorld(nullptr, nullptr, options);
     },
     false, false, false},
};

std::string BackendName(const ::testing::TestParamInfo<WorldBackend>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Backends, ReplayConformanceTest,
                         ::testing::Combine(::testing::ValuesIn(kBackends),
                                            ::testing::ValuesIn(Cases())),
                         ReplayCaseName);
INSTANTIATE_TEST_SUITE_P(Backends, ReplayWorldTest, ::testing::ValuesIn(kBackends), BackendName);
INSTANTIATE_TEST_SUITE_P(Backends, ReplayFailureTest, ::testing::ValuesIn(kBackends), BackendName);
INSTANTIATE_TEST_SUITE_P(Backends, ReplayStallTest, ::testing::ValuesIn(kBackends), BackendName);

}  // namespace
}  // namespace jitpipe::replay_conformance_test

int main(int argc, char** argv) { return jitpipe::testing::RunConformanceSuites(argc, argv); }
