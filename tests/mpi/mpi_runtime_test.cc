// The replay driver (runtime/replay.h) over the MPI world as a real MPI job: every process of
// `mpirun -np N mpi_runtime_test --dp=D` runs these tests in the same order.
// tests/mpi/CMakeLists.txt runs it as 4 processes (pp 4) and 8 (pp 4 x dp 2).
//
// Replays: each schedule runs over MPI; world rank 0 then runs the same
// plan in process (threads) and checks that loss and every gradient are
// the in-process run's bit for bit (the same float operations in the same
// order: a two-member sum is commutative) and the reference trainer's.
//
// Two suites run in jobs of their own, started by mpi_jobs_test.cc, which
// checks what they leave behind: MpiStallTest (a SEND turned into a no-op in
// the executable: every process times out or aborts and dumps its flight
// record into --flight-dir=DIR) and MpiKillTest (world rank 2 kills itself
// with SIGKILL mid-run; the others must fail with a clear error, never
// hang). Run alone, they skip.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "comm/flight_analysis.h"
#include "comm/mpi/mpi_transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"
#include "stages/reference/mlp_reference.h"
#include "stages/reference/mlp_stage.h"
#include "runtime/mlp_gradients.h"
#include "runtime/replay.h"
#include "runtime/replay_plan.h"
#include "tests/testing/sanitizers.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/wrapped_stage.h"

namespace jitpipe {
namespace {

using ::testing::HasSubstr;

MpiContext* g_context = nullptr;
std::string g_flight_dir;  // --flight-dir=DIR (MpiStallTest)

MpiContext& Ctx() { return *g_context; }
int Rank() { return g_context->rank(); }

constexpr double kTolerance = 1e-5;
constexpr absl::Duration kLong = absl::Seconds(30);

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

// `name` at pp = world / dp, m = 2 pp, lowered with `recv` and planned for
// the small mlp.
absl::StatusOr<MlpReplay> PrepareMlp(const std::string& name, ReduceKind reduce,
                                     RecvPlacement recv = RecvPlacement::kJit) {
  const int dp = Ctx().dp();
  absl::StatusOr<Schedule> generated = Generate({name, Ctx().pp(), 2 * Ctx().pp(), 0});
  if (!generated.ok()) return generated.status();
  absl::StatusOr<Schedule> lowered = LowerForReplay(*generated, recv);
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

ReplayOptions RunOptions(ReduceKind reduce, BufferMode buffers) {
  ReplayOptions options;
  options.dp = Ctx().dp();
  options.steps = 2;
  options.reduce = reduce;
  options.buffers = buffers;
  options.timeout = kLong;
  options.record_timeline = true;
  return options;
}

struct ReplayCase {
  std::string schedule;
  ReduceKind reduce = ReduceKind::kAllReduce;
  BufferMode buffers = BufferMode::kTracked;
};

void PrintTo(const ReplayCase& c, std::ostream* os) { *os << c.schedule; }

std::string CaseName(const ::testing::TestParamInfo<ReplayCase>& info) {
  std::string name = info.param.schedule;
  std::replace(name.begin(), name.end(), '-', '_');
  if (info.param.reduce == ReduceKind::kReduceScatter) name += "_reduce_scatter";
  if (info.param.buffers == BufferMode::kArena) name += "_arena";
  return name;
}

class MpiReplayTest : public ::testing::TestWithParam<ReplayCase> {};

TEST_P(MpiReplayTest, EqualsTheInProcessRunAndTheReference) {
  const ReplayCase& c = GetParam();
  // Arena buffers over MPI need rendezvous-safe receives (runtime/replay.h).
  absl::StatusOr<MlpReplay> r =
      PrepareMlp(c.schedule, c.reduce,
                 c.buffers == BufferMode::kArena ? RecvPlacement::kJitRendezvous
                                                 : RecvPlacement::kJit);
  if (!r.ok()) GTEST_SKIP() << r.status();  // the same on every process
  const ReplayOptions options = RunOptions(c.reduce, c.buffers);
  ASSERT_OK_AND_ASSIGN(ReplayResult mpi, RunReplay(r->plan.schedule, r->plan.executable,
                                                      r->plan.plans, *r->factory, Ctx(), options));
  ASSERT_OK(GatherMlpGradients(r->plan.schedule, *r->factory, Ctx(), kLong));
  if (Rank() != 0) {
    ASSERT_EQ(mpi.ranks.size(), 1u);
    EXPECT_EQ(mpi.ranks[0].world_rank, Rank());
    return;
  }
  MlpStageFactory threads_factory(SmallMlp(), r->factory->layout());
  ASSERT_OK_AND_ASSIGN(ReplayResult threads,
                       RunInProcess(r->plan.schedule, r->plan.executable, r->plan.plans,
                                    threads_factory, options));
  EXPECT_EQ(mpi.step_loss, threads.step_loss);
  const MlpLayout& layout = r->factory->layout();
  for (int k = 0; k < layout.dp; ++k) {
    for (int s = 0; s < layout.num_stages(); ++s) {
      EXPECT_EQ(r->factory->FinishedGrads(s, k), threads_factory.FinishedGrads(s, k))
          << "stage " << s << " of replica " << k;
    }
  }
  const MlpReference reference = RunMlpReference(SmallMlp(), layout);
  ASSERT_OK_AND_ASSIGN(MlpComparison check,
                       CompareWithReference(reference, mpi.step_loss[0], *r->factory, c.reduce));
  EXPECT_TRUE(check.Within(kTolerance)) << check.ToString();

  // Every world rank reported, with the same program as in process.
  ASSERT_EQ(mpi.ranks.size(), threads.ranks.size());
  for (size_t w = 0; w < mpi.ranks.size(); ++w) {
    EXPECT_EQ(mpi.ranks[w].world_rank, static_cast<int>(w));
    EXPECT_EQ(mpi.ranks[w].planned_peak_bytes, threads.ranks[w].planned_peak_bytes);
    if (c.buffers == BufferMode::kArena) {
      EXPECT_EQ(mpi.ranks[w].buffer_heap_allocations, mpi.ranks[w].arena_bytes > 0 ? 1 : 0);
    }
  }
  ASSERT_EQ(mpi.timeline.spans.size(), threads.timeline.spans.size());
  for (size_t i = 0; i < mpi.timeline.spans.size(); ++i) {
    const TimelineSpan& a = mpi.timeline.spans[i];
    const TimelineSpan& b = threads.timeline.spans[i];
    ASSERT_TRUE(a.rank == b.rank && a.track == b.track && a.index == b.index) << "span " << i;
    EXPECT_LE(a.start_us, a.end_us);
  }
  ASSERT_EQ(mpi.step_us.size(), 2u);
  EXPECT_GT(mpi.step_us[0], 0);
}

// Point-to-point patterns of every kind: flat, interleaved (loop placement),
// V placement, zero bubble (I/W split), DualPipe's two chains. Under a
// sanitizer one case per code path: reduce-scatter, arena buffers over
// rendezvous, two chains; the release build runs them all.
std::vector<ReplayCase> ReplayCases() {
  const ReplayCase reduce_scatter{"1f1b", ReduceKind::kReduceScatter, BufferMode::kTracked};
  const ReplayCase arena{"interleaved-1f1b", ReduceKind::kAllReduce, BufferMode::kArena};
  if (testing::kSanitized) return {reduce_scatter, arena, ReplayCase{"dualpipev"}};
  return {ReplayCase{"gpipe"}, ReplayCase{"1f1b"},      ReplayCase{"interleaved-1f1b"},
          ReplayCase{"interleaved-zb"}, ReplayCase{"zbv"}, ReplayCase{"dualpipev"},
          ReplayCase{"dualpipe"}, reduce_scatter, arena};
}

INSTANTIATE_TEST_SUITE_P(Schedules, MpiReplayTest, ::testing::ValuesIn(ReplayCases()), CaseName);

TEST(MpiRuntimeTest, RefusesAWorldOfTheWrongSize) {
  absl::StatusOr<MlpReplay> r = PrepareMlp("1f1b", ReduceKind::kAllReduce);
  ASSERT_OK(r);
  ReplayOptions options = RunOptions(ReduceKind::kAllReduce, BufferMode::kTracked);
  options.dp = Ctx().dp() + 1;
  absl::StatusOr<ReplayResult> result = RunReplay(
      r->plan.schedule, r->plan.executable, r->plan.plans, *r->factory, Ctx(), options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  const int needed = Ctx().pp() * (Ctx().dp() + 1);
  EXPECT_EQ(testing::Message(result),
            absl::StrCat("the MPI world has ", Ctx().size(), " processes but pp ", Ctx().pp(),
                         " x dp ", Ctx().dp() + 1, " needs ", needed, " (mpirun -np ", needed,
                         ")"));
}

TEST(MpiRuntimeTest, RefusesArenaBuffersWithAProgramThatDeadlocksUnderRendezvous) {
  absl::StatusOr<MlpReplay> r = PrepareMlp("1f1b", ReduceKind::kAllReduce, RecvPlacement::kJit);
  ASSERT_OK(r);
  const ReplayOptions options = RunOptions(ReduceKind::kAllReduce, BufferMode::kArena);
  absl::StatusOr<ReplayResult> result = RunReplay(
      r->plan.schedule, r->plan.executable, r->plan.plans, *r->factory, Ctx(), options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(testing::Message(result),
              ::testing::StartsWith("arena buffers over MPI need a program that is deadlock-free "
                                    "under rendezvous semantics (lower it with --recv "
                                    "jit-rendezvous): deadlock under strict"));
}

bool RunningAlone(absl::string_view suite) {
  return !absl::StrContains(::testing::GTEST_FLAG(filter), suite);
}

// GPipe at pp 4 x m 4 with world rank 2's last SEND_B dropped from the
// executable (the validator and the builder would refuse a program without
// it): rank 1 waits for that gradient until the 2 s timeout, rank 0 waits
// on rank 1, rank 2 and 3 finish their steps and wait for the others; every
// process stops and dumps its record, and the analysis names the receive
// whose send is missing.
TEST(MpiStallTest, AMissingSendTimesOutOnEveryProcessAndEveryRecordIsDumped) {
  if (RunningAlone("MpiStallTest")) GTEST_SKIP() << "runs in its own job (mpi_jobs_test)";
  ASSERT_FALSE(g_flight_dir.empty()) << "needs --flight-dir=DIR";
  ASSERT_EQ(Ctx().size(), 4);
  absl::StatusOr<Schedule> generated = Generate({"gpipe", 4, 4, 0});
  ASSERT_OK(generated);
  absl::StatusOr<Schedule> lowered = LowerForReplay(*generated);
  ASSERT_OK(lowered);
  MlpStageFactory factory(SmallMlp(), MlpLayout::Of(*lowered, 1));
  ASSERT_OK_AND_ASSIGN(Model model, ModelWithStageSizes(Model(), lowered->num_stages(), factory));
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, PlanReplay(*lowered, model, MemoryPolicy::kJit));
  const RankProgram& program = plan.schedule.ranks[2];
  std::vector<ExecStep>& steps = plan.executable.ranks[2].steps;
  auto send = std::find_if(steps.rbegin(), steps.rend(), [&](const ExecStep& step) {
    return program[step.index].kind == ActionKind::kSendB;
  });
  ASSERT_NE(send, steps.rend());
  const int microbatch = program[send->index].microbatch;
  send->kind = ActionKind::kReshard;  // the executor now runs the step as a no-op
  ReplayOptions options;
  options.timeout = absl::Seconds(2);
  options.flight_dir = g_flight_dir;
  absl::StatusOr<ReplayResult> result =
      RunReplay(plan.schedule, plan.executable, plan.plans, factory, Ctx(), options);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().code(),
              ::testing::AnyOf(absl::StatusCode::kDeadlineExceeded, absl::StatusCode::kAborted));
  std::fprintf(stderr, "rank %d stopped: %s\n", Rank(),
               std::string(result.status().message()).c_str());
  if (Rank() != 0) return;
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(testing::Message(result),
              HasSubstr(absl::StrCat("; flight analysis (records in ", g_flight_dir,
                                     "): rank 1 waits at index ")));
  EXPECT_THAT(testing::Message(result),
              HasSubstr(absl::StrCat(" (1RECV_B", microbatch, ") for rank 2; rank 2's last op")));
  ASSERT_OK_AND_ASSIGN(std::vector<FlightRecord> records, LoadFlightRecords(g_flight_dir));
  EXPECT_EQ(records.size(), 4u);
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
                         MutableBytes stash) override {
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
  absl::StatusOr<MlpReplay> r = PrepareMlp("1f1b", ReduceKind::kAllReduce);
  ASSERT_OK(r);
  KillingFactory factory(r->factory.get());
  ReplayOptions options = RunOptions(ReduceKind::kAllReduce, BufferMode::kTracked);
  options.steps = 1000000;  // only the kill ends it
  options.record_timeline = false;
  absl::StatusOr<ReplayResult> result = RunReplay(r->plan.schedule, r->plan.executable,
                                                     r->plan.plans, factory, Ctx(), options);
  EXPECT_FALSE(result.ok());
  std::fprintf(stderr, "rank %d stopped: %s\n", Rank(),
               std::string(result.status().message()).c_str());
}

// Other processes print only their failures, each line naming the rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "rank %d: %s:%d: %s\n", rank_,
                 result.file_name() == nullptr ? "?" : result.file_name(), result.line_number(),
                 result.summary());
  }

 private:
  const int rank_;
};

}  // namespace
}  // namespace jitpipe

// Usage: mpirun -np N mpi_runtime_test [--dp=D] [--flight-dir=DIR] [gtest flags]
int main(int argc, char** argv) {
  jitpipe::MpiOptions options;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (absl::ConsumePrefix(&arg, "--dp=") && !absl::SimpleAtoi(arg, &options.dp)) {
      std::fprintf(stderr, "bad %s\n", argv[i]);
      return 2;
    }
    if (absl::ConsumePrefix(&arg, "--flight-dir=")) jitpipe::g_flight_dir = std::string(arg);
  }
  absl::StatusOr<std::unique_ptr<jitpipe::MpiContext>> context =
      jitpipe::InitMpi(&argc, &argv, options);
  if (!context.ok()) {
    std::fprintf(stderr, "InitMpi: %s\n", std::string(context.status().message()).c_str());
    return 1;
  }
  jitpipe::g_context = context->get();
  ::testing::InitGoogleTest(&argc, argv);
  if ((*context)->rank() != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new jitpipe::RankFailurePrinter((*context)->rank()));
  }
  const int result = RUN_ALL_TESTS();
  context->reset();  // MPI_Finalize (MPI_Abort after an incomplete failure exchange)
  return result;
}
