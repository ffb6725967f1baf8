// The in-process driver end to end: every built-in schedule replayed with the
// reference mlp equals the unpipelined reference trainer, measured memory
// equals the plan, the arena runs without per-buffer allocations; stages
// stuck in a call; the real files; the README's rank runner. What every
// backend does (failure reports, reduce-scatter, timelines) is in
// replay_conformance_test.cc.
#include "runtime/replay.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <cctype>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "base/status_macros.h"
#include "comm/flight_analysis.h"
#include "comm/inproc/inproc_world.h"
#include "runtime/rank_runner.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"
#include "scheduler/ir/schedule_io.h"
#include "stages/reference/mlp_reference.h"
#include "stages/reference/cost_stage.h"
#include "stages/reference/mlp_stage.h"
#include "runtime/replay_plan.h"
#include "tests/testing/sanitizers.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"
#include "tests/testing/two_mlp_ranks.h"
#include "tests/testing/wrapped_stage.h"

namespace jitpipe::replay_test {
namespace {

using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::TestdataPath;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr double kTolerance = 1e-5;

struct GridCase {
  std::string schedule;
  int pp;
  int microbatches;
  int dp;
};

std::string CaseName(const ::testing::TestParamInfo<std::tuple<GridCase, int>>& info) {
  const GridCase& c = std::get<0>(info.param);
  std::string name = c.schedule + "_pp" + std::to_string(c.pp) + "_m" +
                     std::to_string(c.microbatches) + "_dp" + std::to_string(c.dp) + "_" +
                     std::vector<std::string>{"jit_tracked", "eager_tracked", "jit_arena"}
                         [std::get<1>(info.param)];
  for (char& ch : name) {
    if (ch == '-') ch = '_';
  }
  return name;
}

// Every generator x pp {2, 4} x m {2pp, 3pp} x dp {1, 2}; combinations a
// generator refuses are skipped in the test (GTEST_SKIP names the reason).
// Under a sanitizer (the release stage of tools/test.sh runs the whole grid)
// the diagonal of pp x m, pp 2 at m 3pp and pp 4 at m 2pp: every generator,
// pp, microbatch ratio, dp and buffer mode still runs, in 144 cases of 288
// (the grid was 142 s of the TSan stage; under ASan 27.8 -> 15.2 CPU-s).
std::vector<GridCase> Grid() {
  std::vector<GridCase> cases;
  for (const GeneratorInfo& g : AllGenerators()) {
    for (int pp : {2, 4}) {
      for (int m : {2 * pp, 3 * pp}) {
        if (testing::kSanitized && (pp == 2) == (m == 2 * pp)) continue;
        for (int dp : {1, 2}) cases.push_back({g.name, pp, m, dp});
      }
    }
  }
  return cases;
}

MlpOptions SmallMlp() {
  MlpOptions options;
  options.shape = MlpShape{8, 3, 2};
  options.seed = 7;
  return options;
}

class ReplayGridTest : public ::testing::TestWithParam<std::tuple<GridCase, int>> {};

// One replayed step: loss and every gradient as the reference's; each
// rank's measured peak exactly the plan's; the arena allocates once.
TEST_P(ReplayGridTest, MatchesTheReferenceAndThePlan) {
  const GridCase& c = std::get<0>(GetParam());
  const int mode = std::get<1>(GetParam());
  absl::StatusOr<Schedule> generated = Generate({c.schedule, c.pp, c.microbatches, 0});
  if (!generated.ok()) GTEST_SKIP() << generated.status();
  ASSERT_OK_AND_ASSIGN(Schedule lowered, LowerForReplay(*generated));
  MlpStageFactory factory(SmallMlp(), MlpLayout::Of(lowered, c.dp));
  Model base;
  base.dp.size = c.dp;
  ASSERT_OK_AND_ASSIGN(Model model, ModelWithStageSizes(base, lowered.num_stages(), factory));
  const MemoryPolicy policy = mode == 1 ? MemoryPolicy::kEager : MemoryPolicy::kJit;
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, PlanReplay(lowered, model, policy));
  ReplayOptions options;
  options.dp = c.dp;
  options.buffers = mode == 2 ? BufferMode::kArena : BufferMode::kTracked;
  ASSERT_OK_AND_ASSIGN(ReplayResult result,
                       RunInProcess(plan.schedule, plan.executable, plan.plans, factory, options));

  MlpReference reference = RunMlpReference(factory.options(), factory.layout());
  ASSERT_EQ(result.step_loss.size(), 1u);
  ASSERT_OK_AND_ASSIGN(MlpComparison comparison,
                       CompareWithReference(reference, result.step_loss[0], factory,
                                            ReduceKind::kAllReduce));
  EXPECT_TRUE(comparison.Within(kTolerance)) << comparison.ToString();
  ASSERT_EQ(result.ranks.size(), static_cast<size_t>(c.pp * c.dp));
  for (const RankReplay& rank : result.ranks) {
    EXPECT_EQ(rank.measured_peak_bytes, rank.planned_peak_bytes) << "world rank " << rank.world_rank;
    if (options.buffers == BufferMode::kArena) {
      EXPECT_EQ(rank.buffer_heap_allocations, rank.arena_bytes > 0 ? 1 : 0);
    } else {
      EXPECT_GT(rank.buffer_heap_allocations, 1);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllSchedules, ReplayGridTest,
                         ::testing::Combine(::testing::ValuesIn(Grid()), ::testing::Values(0, 1, 2)),
                         CaseName);

// A schedule lowered and planned for the small mlp, with its factory.
struct MlpReplay {
  std::unique_ptr<MlpStageFactory> factory;
  ReplayPlan plan;
};

absl::StatusOr<MlpReplay> PrepareMlp(const Schedule& schedule, int dp,
                                     ReduceKind reduce = ReduceKind::kAllReduce) {
  absl::StatusOr<Schedule> lowered = LowerForReplay(schedule);
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

absl::StatusOr<MlpReplay> PrepareMlp(const std::string& name, int pp, int m, int dp,
                                     ReduceKind reduce = ReduceKind::kAllReduce) {
  absl::StatusOr<Schedule> generated = Generate({name, pp, m, 0});
  if (!generated.ok()) return generated.status();
  return PrepareMlp(*generated, dp, reduce);
}

// Wraps the mlp factory: one stage blocks until Release() (a kernel that
// never returns, for as long as the test wants), in its forward of
// microbatch 0 or in FinishStep at the end of the step.
class StuckFactory final : public StageFactory {
 public:
  enum class Where { kForward, kFinishStep };
  StuckFactory(StageFactory* inner, int stage, Where where)
      : inner_(inner), stage_(stage), where_(where) {}
  absl::StatusOr<std::unique_ptr<Stage>> Make(int stage, int replica) override {
    absl::StatusOr<std::unique_ptr<Stage>> made = inner_->Make(stage, replica);
    if (!made.ok() || stage != stage_) return made;
    return std::unique_ptr<Stage>(new Stuck(*std::move(made), where_, &release_));
  }
  void Release() { release_.Notify(); }

 private:
  class Stuck final : public testing::WrappedStage {
   public:
    Stuck(std::unique_ptr<Stage> inner, Where where, absl::Notification* release)
        : WrappedStage(std::move(inner)), where_(where), release_(release) {}
    absl::Status Forward(const ExecutionContext& ctx, int m, ConstBytes in, MutableBytes out,
                         StashView stash) override {
      if (where_ == Where::kForward && m == 0) release_->WaitForNotification();
      return WrappedStage::Forward(ctx, m, in, out, stash);
    }
    absl::Status FinishStep(const ExecutionContext& ctx, ConstBytes param_grad) override {
      if (where_ == Where::kFinishStep) release_->WaitForNotification();
      return WrappedStage::FinishStep(ctx, param_grad);
    }

   private:
    const Where where_;
    absl::Notification* const release_;
  };

  StageFactory* const inner_;
  const int stage_;
  const Where where_;
  absl::Notification release_;
};

// Runs `r` with `factory` and an on_stuck that records each report and
// releases the stuck stage (the CLI ends the process there instead), so
// that the run joins its threads and returns.
struct StuckRun {
  absl::StatusOr<ReplayResult> result;
  std::vector<std::string> reports;
};
StuckRun RunUntilStuck(const MlpReplay& r, StuckFactory& factory, ReplayOptions options) {
  StuckRun run;
  options.on_stuck = [&](const absl::Status& report, World&) {
    run.reports.push_back(std::string(report.message()));
    factory.Release();
  };
  run.result = RunInProcess(r.plan.schedule, r.plan.executable, r.plan.plans, factory, options);
  return run;
}

// Rank 1's forward never returns: rank 0 times out waiting for its
// gradient and dumps every flight record, and once the grace has passed
// with rank 1 still inside the stage, on_stuck gets the report naming it;
// the run returns the same report.
TEST(InProcessRuntimeTest, ARankStuckInAStageCallIsReportedAfterTheGrace) {
  ASSERT_OK_AND_ASSIGN(MlpReplay r, PrepareMlp("1f1b", 2, 2, 1));
  StuckFactory factory(r.factory.get(), /*stage=*/1, StuckFactory::Where::kForward);
  const std::string dir = MakeTempDir("stuck_stage");
  ReplayOptions options;
  options.timeout = absl::Milliseconds(500);
  options.stuck_grace = absl::Milliseconds(200);
  options.flight_dir = dir;
  StuckRun run = RunUntilStuck(r, factory, options);
  ASSERT_EQ(run.reports.size(), 1u);
  EXPECT_EQ(Message(run.result), run.reports[0]);
  EXPECT_EQ(run.result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(run.reports[0], StartsWith("rank 0, index "));
  EXPECT_THAT(run.reports[0], HasSubstr("timed out after 500ms waiting for receive 0RECV_B0"));
  EXPECT_THAT(run.reports[0], HasSubstr("flight analysis (records in " + dir + "): "));
  EXPECT_THAT(run.reports[0], HasSubstr("; other ranks: stuck in a stage call (1); "));
  EXPECT_THAT(run.reports[0], EndsWith("rank 1's last op was index 0 (1RECV_F0), and it is at "
                                       "index 1 (1F0)"));
  ASSERT_OK_AND_ASSIGN(std::vector<FlightRecord> records, LoadFlightRecords(dir));
  EXPECT_EQ(records.size(), 2u);
}

// A world that stands for a device backend's watchdog: StartWatchdog keeps
// the driver's handler, and Fire does what a backend's watchdog thread does
// on a timeout (the handler, then the abort). Everything else is the
// in-process world's.
class WatchdogWorld final : public World {
 public:
  explicit WatchdogWorld(int size) : inner_(CreateInProcessWorld(size)) {}
  std::string name() const override { return inner_->name(); }
  int size() const override { return inner_->size(); }
  const std::vector<int>& local_ranks() const override { return inner_->local_ranks(); }
  absl::Status CreateGroups(absl::Span<const Group> groups, absl::Duration timeout) override {
    return inner_->CreateGroups(groups, timeout);
  }
  Transport& transport(int world_rank) override { return inner_->transport(world_rank); }
  SendCompletion send_completion() const override { return inner_->send_completion(); }
  void StartWatchdog(absl::Duration, TimeoutHandler handler) override {
    std::lock_guard<std::mutex> lock(mu_);
    handler_ = std::move(handler);
    started_.notify_all();
  }
  absl::Status Barrier(int world_rank, absl::Duration timeout) override {
    return inner_->Barrier(world_rank, timeout);
  }
  absl::StatusOr<std::vector<std::string>> Gather(absl::Span<const std::string> local,
                                                  absl::Duration timeout) override {
    return inner_->Gather(local, timeout);
  }
  std::vector<std::optional<std::string>> CollectAfterFailure(absl::Span<const std::string> local,
                                                              absl::Duration grace) override {
    return inner_->CollectAfterFailure(local, grace);
  }
  void Abort(int world_rank, const std::string& reason) override {
    inner_->Abort(world_rank, reason);
  }
  bool aborted() override { return inner_->aborted(); }
  void RetainUntilEnd(std::shared_ptr<const void> object) override {
    inner_->RetainUntilEnd(std::move(object));
  }
  void LeaveBeforeExit() override { inner_->LeaveBeforeExit(); }
  int64_t PeakInFlightBytes() const override { return inner_->PeakInFlightBytes(); }

  // Waits until the driver started the watchdog, then times rank w out.
  void Fire(int world_rank, const absl::Status& status) {
    TimeoutHandler handler;
    {
      std::unique_lock<std::mutex> lock(mu_);
      started_.wait(lock, [this] { return handler_ != nullptr; });
      handler = handler_;
    }
    handler(world_rank, status);
    inner_->Abort(world_rank, std::string(status.message()));
  }

 private:
  std::unique_ptr<InProcessWorld> inner_;
  // std's, not absl's: ThreadSanitizer sees these (this suite runs under it).
  std::mutex mu_;
  std::condition_variable started_;
  TimeoutHandler handler_;
};

// A device backend's watchdog times out rank 1, stuck behind its device in
// a forward: the driver takes every rank's flight record with that reason
// before the backend's abort, and the run fails instead of hanging (the
// ranks' own waits would only time out after a minute).
TEST(InProcessRuntimeTest, AWatchdogTimeoutTakesTheFlightRecordsBeforeTheAbort) {
  ASSERT_OK_AND_ASSIGN(MlpReplay r, PrepareMlp("1f1b", 2, 2, 1));
  StuckFactory factory(r.factory.get(), /*stage=*/1, StuckFactory::Where::kForward);
  WatchdogWorld world(2);
  const std::string dir = MakeTempDir("watchdog");
  ReplayOptions options;
  options.timeout = absl::Seconds(60);
  options.flight_dir = dir;
  std::thread watchdog([&] {
    world.Fire(1, absl::DeadlineExceededError("timed out after 100ms waiting for 1F0 (device)"));
    factory.Release();
  });
  absl::StatusOr<ReplayResult> result = RunReplay(r.plan.schedule, r.plan.executable,
                                                  r.plan.plans, factory, world, options);
  watchdog.join();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kAborted) << result.status();
  ASSERT_OK_AND_ASSIGN(std::vector<FlightRecord> records, LoadFlightRecords(dir));
  EXPECT_EQ(records.size(), 2u);
  for (int rank : {0, 1}) {
    std::ifstream in(dir + "/rank_" + std::to_string(rank) + ".json");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_THAT(text, HasSubstr("rank 1 failed: timed out after 100ms waiting for 1F0 (device)"))
        << "rank " << rank;
  }
}

// Rank 0 never returns from FinishStep at the end of the last step, when
// nothing waits for it any more: rank 1, done, waits at the closing
// barrier, bounded by the timeout like every wait, so the run fails there
// and reports rank 0 stuck (without that barrier the run would wait for
// rank 0 without limit).
TEST(InProcessRuntimeTest, TheLastStepEndsAtABarrierBoundedByTheTimeout) {
  ASSERT_OK_AND_ASSIGN(MlpReplay r, PrepareMlp("1f1b", 2, 2, 1));
  StuckFactory factory(r.factory.get(), /*stage=*/0, StuckFactory::Where::kFinishStep);
  ReplayOptions options;
  options.timeout = absl::Milliseconds(300);
  options.stuck_grace = absl::Milliseconds(100);
  StuckRun run = RunUntilStuck(r, factory, options);
  ASSERT_EQ(run.reports.size(), 1u);
  EXPECT_EQ(run.result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(Message(run.result),
              StartsWith("rank 1, after the last step: timed out after 300ms waiting at the "
                         "step barrier for the other ranks; other ranks: stuck in a stage "
                         "call (0); "));
}

// Without a stuck rank on_stuck is never called, even with a grace of 0.
TEST(InProcessRuntimeTest, OnStuckIsNotCalledWhenEveryRankEnds) {
  ASSERT_OK_AND_ASSIGN(MlpReplay r, PrepareMlp("1f1b", 2, 4, 1));
  ReplayOptions options;
  options.steps = 2;
  options.stuck_grace = absl::ZeroDuration();
  int calls = 0;
  options.on_stuck = [&calls](const absl::Status&, World&) { ++calls; };
  ASSERT_OK(RunInProcess(r.plan.schedule, r.plan.executable, r.plan.plans, *r.factory, options)
                .status());
  EXPECT_EQ(calls, 0);
}

TEST(InProcessRuntimeTest, RefusesOptionsOutOfRange) {
  ASSERT_OK_AND_ASSIGN(MlpReplay r, PrepareMlp("gpipe", 2, 2, 1));
  ReplayOptions options;
  options.dp = 0;
  EXPECT_EQ(Message(RunInProcess(r.plan.schedule, r.plan.executable, r.plan.plans, *r.factory,
                                 options)),
            "--dp must be >= 1, got 0");
  options.dp = 1;
  options.steps = 0;
  EXPECT_EQ(Message(RunInProcess(r.plan.schedule, r.plan.executable, r.plan.plans, *r.factory,
                                 options)),
            "--steps must be >= 1, got 0");
  options.steps = 1;
  options.buffers = BufferMode::kArena;
  std::vector<RankMemoryPlan> no_arena = r.plan.plans;
  no_arena[1].arena = ArenaLayout();
  EXPECT_EQ(Message(RunInProcess(r.plan.schedule, r.plan.executable, no_arena, *r.factory,
                                 options)),
            "rank 1: arena buffers need a plan with an arena");
}

// A stash in segments (a layered model's layers) is planned as one buffer per
// segment, placed apart by the arena, and handed to the stage as such: the
// cost stage stamps each segment in F and checks it in I, W and B, so a
// plan that let anything overwrite one fails the step.
TEST(InProcessRuntimeTest, ReplaysAStashInSegmentsThroughTheArena) {
  for (const std::string name : {"1f1b", "interleaved-zb", "zbv", "dualpipev"}) {
    SCOPED_TRACE(name);
    ASSERT_OK_AND_ASSIGN(Schedule generated, Generate({name, 2, 8, 0}));
    ASSERT_OK_AND_ASSIGN(Schedule lowered, LowerForReplay(generated));
    Model model;
    model.defaults.input_bytes = 2048;
    model.defaults.output_bytes = 2048;
    model.defaults.stash_segments = std::vector<int64_t>{4096, 1024, 12288};
    model.defaults.param_bytes = 256;
    ASSERT_OK_AND_ASSIGN(ReplayPlan plan, PlanReplay(lowered, model, MemoryPolicy::kJit));
    int segments = 0;
    for (const Buffer& b : plan.plans[0].buffers.buffers) {
      if (b.kind == BufferKind::kStash && b.stage == 0 && b.microbatch == 0) ++segments;
    }
    EXPECT_EQ(segments, 3);
    CostStageFactory factory(plan.schedule, plan.model);
    ReplayOptions options;
    options.buffers = BufferMode::kArena;
    ASSERT_OK_AND_ASSIGN(ReplayResult result,
                         RunInProcess(plan.schedule, plan.executable, plan.plans, factory, options));
    for (const RankReplay& rank : result.ranks) {
      EXPECT_EQ(rank.measured_peak_bytes, rank.planned_peak_bytes) << "rank " << rank.world_rank;
    }
  }
}

// A plan whose stash is cut otherwise than the stage's is refused before
// the step, naming both.
TEST(InProcessRuntimeTest, RefusesAPlanWhoseStashSegmentsAreNotTheStages) {
  ASSERT_OK_AND_ASSIGN(Schedule generated, Generate({"1f1b", 2, 2, 0}));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, LowerForReplay(generated));
  MlpStageFactory factory(SmallMlp(), MlpLayout::Of(lowered, 1));
  ASSERT_OK_AND_ASSIGN(Model model, ModelWithStageSizes(Model{}, lowered.num_stages(), factory));
  const int64_t stash = model.ForStage(0).stash_bytes;  // the mlp's one buffer
  // Stage 0 only: its rank alone fails, so the report names it whatever the
  // threads' order.
  for (StageOverride& o : model.stages) {
    if (o.index != 0) continue;
    o.spec.stash_bytes.reset();
    o.spec.stash_segments = std::vector<int64_t>{stash / 2, stash - stash / 2};
  }
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, PlanReplay(lowered, model, MemoryPolicy::kJit));
  EXPECT_THAT(Message(RunInProcess(plan.schedule, plan.executable, plan.plans, factory, {})),
              HasSubstr(absl::StrCat("stage 0 needs its stash as buffers of ", stash,
                                     " bytes but the plan has buffers of ", stash / 2, ", ",
                                     stash - stash / 2, " bytes")));
}

// The in-process wording of the size check (replay_conformance_test.cc
// checks its shape on every backend).
TEST(InProcessRuntimeTest, RefusesAWorldOfAnotherSize) {
  ASSERT_OK_AND_ASSIGN(MlpReplay r, PrepareMlp("1f1b", 4, 8, 1));
  std::unique_ptr<InProcessWorld> world = CreateInProcessWorld(6);
  ReplayOptions options;
  options.dp = 2;
  EXPECT_EQ(Message(RunReplay(r.plan.schedule, r.plan.executable, r.plan.plans, *r.factory,
                              *world, options)),
            "the world has 6 ranks but pp 4 x dp 2 needs 8");
}

// The driver requests its groups before any rank starts; a world that
// refuses (here: already aborted) fails the run there.
TEST(InProcessRuntimeTest, ReportsAWorldThatRefusesTheGroups) {
  ASSERT_OK_AND_ASSIGN(MlpReplay r, PrepareMlp("1f1b", 2, 4, 2));
  std::unique_ptr<InProcessWorld> world = CreateInProcessWorld(4);
  world->Abort(3, "gone");
  ReplayOptions options;
  options.dp = 2;
  absl::StatusOr<ReplayResult> result =
      RunReplay(r.plan.schedule, r.plan.executable, r.plan.plans, *r.factory, *world, options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(Message(result), "requesting the data-parallel groups: rank 3 failed: gone");
}

// The real files (conformance/real) replay exactly: the compute-only ones
// lowered with REDUCE_GRAD, with 1 and 2 replicas; the lowered torchtitan
// example (FSDP UNSHARD/RESHARD, PyTorch's early receives, no REDUCE_GRAD,
// so nothing to reduce across replicas) as it is, with one replica; the
// zero-bubble file under its legacy names (B = input backward).
struct RealFile {
  std::string file;
  bool legacy_names;
  std::vector<int> dps;
};

class RealFileTest : public ::testing::TestWithParam<RealFile> {};

TEST_P(RealFileTest, ReplaysExactly) {
  const RealFile& real = GetParam();
  CsvReadOptions csv;
  csv.legacy_backward_names = real.legacy_names;
  ASSERT_OK_AND_ASSIGN(Schedule s, LoadSchedule(TestdataPath("conformance/real/" + real.file), csv));
  for (int dp : real.dps) {
    ASSERT_OK_AND_ASSIGN(MlpReplay r, PrepareMlp(s, dp));
    ReplayOptions options;
    options.dp = dp;
    ASSERT_OK_AND_ASSIGN(ReplayResult result, RunInProcess(r.plan.schedule, r.plan.executable,
                                                           r.plan.plans, *r.factory, options));
    MlpReference reference = RunMlpReference(r.factory->options(), r.factory->layout());
    ASSERT_OK_AND_ASSIGN(MlpComparison c, CompareWithReference(reference, result.step_loss[0],
                                                               *r.factory, ReduceKind::kAllReduce));
    EXPECT_TRUE(c.Within(kTolerance)) << "dp " << dp << ": " << c.ToString();
    for (const RankReplay& rank : result.ranks) {
      EXPECT_EQ(rank.measured_peak_bytes, rank.planned_peak_bytes);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Real, RealFileTest,
    ::testing::Values(RealFile{"torchtitan_4-rank.csv", false, {1, 2}},
                      RealFile{"torchtitan_example.csv", false, {1}},
                      RealFile{"dualpipev_4rank_10mb.csv", false, {1, 2}},
                      RealFile{"zb1p_2rank_2stagep_compute.csv", true, {1, 2}}),
    [](const ::testing::TestParamInfo<RealFile>& file) {
      std::string name = file.param.file.substr(0, file.param.file.find('.'));
      for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

// The README's rank runner: one rank of a schedule on the caller's thread
// over any Transport, its stages the caller's, its buffers the plan's arena,
// every transport op in a flight recorder. (Here two ranks on two threads,
// mlp stages, checked against the reference trainer.)
absl::Status RunMyRank(const ReplayPlan& plan, int world_rank, Transport& transport,
                       StageFactory& my_stages, int steps, const std::string& flight_dir) {
  ReplayOptions options;
  options.buffers = BufferMode::kArena;
  options.timeout = absl::Seconds(30);
  ASSIGN_OR_RETURN(std::unique_ptr<RankRunner> me,
                   RankRunner::Create(plan.schedule, plan.executable, plan.plans, world_rank,
                                      transport, my_stages, options));
  RETURN_IF_ERROR(me->Start(std::chrono::steady_clock::now()));
  for (int step = 0; step < steps; ++step) {
    absl::StatusOr<StepResult> result = me->RunStep();
    if (!result.ok()) return me->Fail(result.status(), flight_dir);  // dump + abort
  }
  return absl::OkStatus();
}

TEST(RankRunnerTest, ReadmeExample) {
  testing::ExpectTwoMlpRanksMatchTheReference(RunMyRank);
}

}  // namespace
}  // namespace jitpipe::replay_test
