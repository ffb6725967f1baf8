// The rank executor driven directly, one thread per rank over an in-process
// world: what it calls on the Stages, in which order and with which buffers,
// when it releases sent buffers, and how it reports failures.
#include "stages/exec/rank_executor.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "comm/flight_recorder.h"
#include "comm/inproc/inproc_world.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/memory_plan.h"
#include "scheduler/generators/generate.h"
#include "stages/reference/mlp_reference.h"
#include "stages/reference/mlp_stage.h"
#include "runtime/replay_plan.h"
#include "tests/testing/noop_stage.h"
#include "tests/testing/rank_executor_harness.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"
#include "tests/testing/two_mlp_ranks.h"

namespace jitpipe::rank_executor_test {
namespace {

using ::jitpipe::testing::Message;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The harness (tests/testing/rank_executor_harness.h).
using ::jitpipe::testing::DeviceLikeTransport;
using ::jitpipe::testing::kActivation;
using ::jitpipe::testing::ProbePlan;
using ::jitpipe::testing::ProbeStage;
using ::jitpipe::testing::RankRun;
using ::jitpipe::testing::RunRanks;
using ::jitpipe::testing::RunSpec;
using ::jitpipe::testing::StreamOrderedBuffers;

// GPipe's order as the stages see it: all forwards, then all backwards; the
// first stage loads each input right before its forward.
TEST(RankExecutorTest, CallsTheStagesInProgramOrder) {
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, ProbePlan("gpipe", 2, 2, MemoryPolicy::kJit));
  std::vector<RankRun> runs = RunRanks(plan, {});
  ASSERT_OK(runs[0].status);
  ASSERT_OK(runs[1].status);
  EXPECT_THAT(runs[0].log, ElementsAre("0L0", "0F0", "0L1", "0F1", "0I0", "0W0", "0I1", "0W1"));
  EXPECT_THAT(runs[1].log, ElementsAre("1F0", "1F1", "1I0", "1W0", "1I1", "1W1"));
  // The last stage's losses: 0.5 + 1.5.
  EXPECT_EQ(runs[1].steps[0].loss, 2.0);
  EXPECT_EQ(runs[0].steps[0].loss, 0.0);
}

// param_grad is zeroed when it is allocated, each step: every FinishStep
// sees one W per microbatch.
TEST(RankExecutorTest, ZeroesParameterGradientsEveryStep) {
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, ProbePlan("1f1b", 2, 4, MemoryPolicy::kJit));
  std::vector<RankRun> runs = RunRanks(plan, {.steps = 3});
  for (const RankRun& run : runs) {
    ASSERT_OK(run.status);
    EXPECT_THAT(run.stages[0]->finished(), ElementsAre(4, 4, 4));
  }
}

TEST(RankExecutorTest, RecordsATimelineOfEveryStep) {
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, ProbePlan("gpipe", 2, 2, MemoryPolicy::kJit));
  std::vector<RankRun> runs = RunRanks(plan, {.steps = 2});
  ASSERT_OK(runs[0].status);
  const RankExecutable& exe = plan.executable.ranks[0];
  size_t reduce_actions = 0;
  for (const ExecStep& step : exe.steps) {
    reduce_actions += step.kind == ActionKind::kReduceGrad && step.buffer != kNoBuffer;
  }
  ASSERT_GT(reduce_actions, 0u);
  for (const StepResult& step : runs[0].steps) {
    // One span per step but REDUCE_GRAD: with one replica there is no
    // collective to run and none to draw.
    EXPECT_EQ(step.timeline.spans.size(), exe.steps.size() - reduce_actions);
    EXPECT_LE(step.start_us, step.compute_end_us);
    EXPECT_LE(step.compute_end_us, step.end_us);
    for (const TimelineSpan& span : step.timeline.spans) {
      EXPECT_EQ(span.rank, 0);
      EXPECT_LE(span.start_us, span.end_us);
    }
    ASSERT_FALSE(step.timeline.memory.empty());
    int64_t last = 0;
    for (int64_t b : step.timeline.memory.back().bytes) last += b;
    EXPECT_EQ(last, 0);  // everything released at the end
  }
  EXPECT_LT(runs[0].steps[0].end_us, runs[0].steps[1].start_us + 1e-9);
}

// One thread drives every rank (RunStepsTogether, each executor polled with
// Advance): the stages see the same calls in the same order, the losses and
// the measured peaks are the threads', step after step.
TEST(RankExecutorTest, OneThreadDrivesEveryRankAsThreadsDo) {
  for (const char* schedule : {"1f1b", "interleaved-1f1b", "zbv"}) {
    ASSERT_OK_AND_ASSIGN(ReplayPlan plan, ProbePlan(schedule, 4, 8, MemoryPolicy::kJit));
    std::vector<RankRun> threads = RunRanks(plan, {.steps = 2});
    std::vector<RankRun> together = RunRanks(plan, {.steps = 2, .together = true});
    for (int r = 0; r < 4; ++r) {
      ASSERT_OK(threads[r].status) << schedule;
      ASSERT_OK(together[r].status) << schedule;
      EXPECT_EQ(together[r].log, threads[r].log) << schedule << " rank " << r;
      ASSERT_EQ(together[r].steps.size(), 2u);
      for (int step = 0; step < 2; ++step) {
        EXPECT_EQ(together[r].steps[step].loss, threads[r].steps[step].loss);
        EXPECT_EQ(together[r].steps[step].peak_bytes, plan.plans[r].peak.bytes)
            << schedule << " rank " << r;
      }
    }
  }
}

// A rank whose peer never runs: driven by Advance, its wait ends after the
// timeout with the message a blocking wait in the transport gives.
TEST(RankExecutorTest, APolledWaitTimesOutLikeABlockingOne) {
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, ProbePlan("gpipe", 2, 2, MemoryPolicy::kJit));
  const Schedule& s = plan.schedule;
  std::unique_ptr<InProcessWorld> world = CreateInProcessWorld(2);
  std::vector<std::string> log;
  ProbeStage stage1(1, false, true, &log);
  std::vector<Stage*> stages = {nullptr, &stage1};
  TrackedBuffers polled_buffers(plan.executable.ranks[1].buffer_bytes);
  TrackedBuffers blocking_buffers(plan.executable.ranks[1].buffer_bytes);
  RankExecutorOptions options;
  options.timeout = absl::Milliseconds(50);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RankExecutor> polled,
                       RankExecutor::Create(s, plan.executable, 1, &world->transport(1), stages,
                                            &polled_buffers, nullptr, options));
  RankExecutor* const one[] = {polled.get()};
  std::vector<StepResult> results;
  absl::Status timed_out = RunStepsTogether(one, results);
  EXPECT_EQ(timed_out.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(timed_out.message(),
            "rank 1, index 1 (1F0): timed out after 50ms waiting for receive 1RECV_F0 from rank "
            "0 (index 0)");
  // The same wait, blocking in the transport (a second world: the first
  // one's receive is still posted).
  std::unique_ptr<InProcessWorld> second = CreateInProcessWorld(2);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RankExecutor> blocking,
                       RankExecutor::Create(s, plan.executable, 1, &second->transport(1), stages,
                                            &blocking_buffers, nullptr, options));
  EXPECT_EQ(blocking->RunStep().status(), timed_out);
  world->Abort(1, "the test ends");
  second->Abort(1, "the test ends");
}

// Eager completion: every sent buffer goes right after its SEND, so the
// measured peak is the plan's.
TEST(RankExecutorTest, MeasuredPeakIsThePlansWhenSendsCompleteWhenPosted) {
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, ProbePlan("gpipe", 2, 2, MemoryPolicy::kJit));
  std::vector<RankRun> runs = RunRanks(plan, {});
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK(runs[r].status);
    EXPECT_EQ(runs[r].steps[0].peak_bytes, plan.plans[r].peak.bytes) << "rank " << r;
  }
}

// A send that completes later keeps its buffer. Rank 0 (GPipe pp2 m2):
// 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 ...; the plan's peak is at 0B0
// (in0, in1, the received output gradient and the 4-byte param_grad). With
// every send complete one step boundary late, out0 is still live during 0F1
// (in0, out0, in1, out1): one activation more than the plan's 0F1.
TEST(RankExecutorTest, ReleasesASentBufferOnlyOnceTheSendCompletes) {
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, ProbePlan("gpipe", 2, 2, MemoryPolicy::kJit));
  std::vector<RankRun> runs = RunRanks(plan, {.slow_send_polls = 1});
  ASSERT_OK(runs[0].status);
  EXPECT_EQ(plan.plans[0].peak.bytes, 3 * kActivation + 4);
  EXPECT_EQ(runs[0].steps[0].peak_bytes, 4 * kActivation);
}

// PyTorch main's WAIT_SEND after every SEND: the rank waits there until the
// send has completed and releases the buffer then, so even with late sends
// the measured peak is the plan's (which frees each sent buffer after its
// WAIT).
TEST(RankExecutorTest, AWaitSendReleasesTheSentBufferWhereThePlanSays) {
  ASSERT_OK_AND_ASSIGN(ReplayPlan base, ProbePlan("gpipe", 2, 2, MemoryPolicy::kJit));
  Schedule waits = base.schedule;
  for (RankProgram& program : waits.ranks) {
    RankProgram out;
    for (const Action& a : program) {
      out.push_back(a);
      if (a.kind == ActionKind::kSendF) out.push_back(Action::Make(ActionKind::kWaitSendF, a.stage, a.microbatch));
      if (a.kind == ActionKind::kSendB) out.push_back(Action::Make(ActionKind::kWaitSendB, a.stage, a.microbatch));
    }
    program = out;
  }
  Model model;
  model.defaults.input_bytes = kActivation;
  model.defaults.output_bytes = kActivation;
  model.defaults.param_bytes = 4;
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, PlanReplay(waits, model, MemoryPolicy::kJit));
  std::vector<RankRun> runs = RunRanks(plan, {.slow_send_polls = 1});
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK(runs[r].status);
    EXPECT_EQ(runs[r].steps[0].peak_bytes, plan.plans[r].peak.bytes) << "rank " << r;
  }
  // Without the waits the same late sends kept one activation more.
  EXPECT_EQ(plan.plans[0].peak.bytes, 3 * kActivation + 4);
}

// A WAIT_REDUCE_GRAD waits for the stage's reduction (the replay lowering
// puts each stage's REDUCE_GRAD after its last backward); the gradients
// reach FinishStep as without it.
TEST(RankExecutorTest, AWaitReduceGradWaitsForTheReduction) {
  ASSERT_OK_AND_ASSIGN(ReplayPlan base, ProbePlan("gpipe", 2, 2, MemoryPolicy::kJit));
  Schedule waits = base.schedule;
  for (int r = 0; r < 2; ++r) {
    RankProgram& program = waits.ranks[r];
    const auto reduce = std::find(program.begin(), program.end(),
                                  Action::StageWide(ActionKind::kReduceGrad, r));
    ASSERT_NE(reduce, program.end());
    program.insert(reduce + 1, Action::StageWide(ActionKind::kWaitReduceGrad, r));
  }
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, PlanReplay(waits, base.model, MemoryPolicy::kJit));
  std::vector<RankRun> runs = RunRanks(plan, {.steps = 2});
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK(runs[r].status);
    // Two microbatches' W each add 1 to the gradient, every step.
    EXPECT_EQ(runs[r].stages[0]->finished(), (std::vector<float>{2, 2})) << "rank " << r;
  }
}

// With an arena the bytes of a released buffer are reused, so the executor
// completes pending sends before it allocates: the plan holds again.
TEST(RankExecutorTest, ArenaCompletesPendingSendsBeforeReusingBytes) {
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, ProbePlan("gpipe", 2, 2, MemoryPolicy::kJit));
  std::vector<RankRun> runs = RunRanks(plan, {.arena = true, .slow_send_polls = 1});
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK(runs[r].status);
    EXPECT_EQ(runs[r].steps[0].peak_bytes, plan.plans[r].peak.bytes);
    EXPECT_EQ(runs[r].buffers->heap_allocations(), 1);
  }
}

// A stream-ordered provider takes each sent buffer with its send's request
// when the send is posted, and the executor does not wait for the send
// before reusing memory (as it does for the arena above): the bytes stay
// held until the provider hears the send completed, so with late sends the
// measured peak is the tracked provider's, not the plan's.
TEST(RankExecutorTest, AStreamOrderedProviderTakesSentBuffersWithTheirRequests) {
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, ProbePlan("gpipe", 2, 2, MemoryPolicy::kJit));
  std::vector<RankRun> runs = RunRanks(plan, {.slow_send_polls = 1, .stream_ordered = true});
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK(runs[r].status);
    const RankExecutable& exe = plan.executable.ranks[r];
    std::vector<int32_t> sent;
    for (const ExecStep& step : exe.steps) {
      for (int32_t id : exe.memory.ReleasedOnCompletion(step.index)) sent.push_back(id);
    }
    ASSERT_FALSE(sent.empty());
    const auto& buffers = static_cast<const StreamOrderedBuffers&>(*runs[r].buffers);
    EXPECT_EQ(buffers.handed(), sent) << "rank " << r;
    for (int32_t id : sent) {
      EXPECT_THAT(buffers.released(), ::testing::Not(::testing::Contains(id))) << "buffer " << id;
    }
    EXPECT_EQ(buffers.retiring(), 0u);  // every send reported complete by the step's end
    EXPECT_EQ(buffers.live_bytes(), 0);
  }
  EXPECT_EQ(plan.plans[0].peak.bytes, 3 * kActivation + 4);
  EXPECT_EQ(runs[0].steps[0].peak_bytes, 4 * kActivation);
}

// Every Stage call gets the executor's context: the provider's memory space
// and the options' device and stream.
TEST(RankExecutorTest, HandsEveryStageCallTheRanksContext) {
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, ProbePlan("1f1b", 2, 2, MemoryPolicy::kJit));
  int stream = 0;
  std::vector<RankRun> runs = RunRanks(plan, {.stream = &stream});
  for (const RankRun& run : runs) {
    ASSERT_OK(run.status);
    // L/F/I/W per microbatch as logged, plus one FinishStep per stage.
    EXPECT_EQ(run.stages[0]->contexts().size(), run.log.size() + 1);
    for (const ExecutionContext& ctx : run.stages[0]->contexts()) {
      EXPECT_EQ(ctx.memory_space, MemorySpace::kHost);
      EXPECT_EQ(ctx.device, -1);
      EXPECT_EQ(ctx.stream, &stream);
    }
  }
}

// Over a device transport the waits are stream dependencies: every receive
// a compute consumes becomes one StreamWait on the rank's compute stream,
// nothing is tested mid-step (a step captured into a CUDA graph could not
// be), each REDUCE_GRAD is posted from the rank's own thread (no reduction
// thread), two markers per step (one ends the compute, after which a
// device stage's losses are read; one that the step's end waits for, behind
// what FinishStep enqueued), the stage calls get the transport's device
// and stream, and the data still arrives in order
// (ProbeStage checks every input) -- a thread per rank, or one for all.
TEST(RankExecutorTest, OverADeviceTransportWaitsBecomeStreamDependencies) {
  for (const char* schedule : {"1f1b", "interleaved-1f1b", "zbv"}) {
    ASSERT_OK_AND_ASSIGN(ReplayPlan plan, ProbePlan(schedule, 4, 8, MemoryPolicy::kJit));
    const std::vector<RankRun> host = RunRanks(plan, {.steps = 2});
    for (bool together : {false, true}) {
      SCOPED_TRACE(absl::StrCat(schedule, together ? ", one thread" : ", a thread per rank"));
      std::vector<RankRun> runs = RunRanks(
          plan, {.steps = 2, .stream_ordered = true, .together = together, .device = true});
      for (int r = 0; r < 4; ++r) {
        ASSERT_OK(runs[r].status) << "rank " << r;
        EXPECT_EQ(runs[r].log, host[r].log) << "rank " << r;
        size_t recvs = 0, reductions = 0;
        for (const ExecStep& step : plan.executable.ranks[r].steps) {
          recvs += IsRecv(step.kind) ? 1 : 0;
          reductions += step.kind == ActionKind::kReduceGrad && step.buffer != kNoBuffer ? 1 : 0;
        }
        DeviceLikeTransport& device = *runs[r].device;
        EXPECT_EQ(device.stream_waits().size(), 2 * recvs) << "rank " << r;
        EXPECT_EQ(device.tests_mid_step(), 0) << "rank " << r;
        EXPECT_EQ(device.markers(), 4) << "rank " << r;
        // One replica: REDUCE_GRAD posts no collective (nothing to reduce
        // with); the replay conformance suite's dp 2 cases post them.
        ASSERT_GT(reductions, 0u);
        EXPECT_THAT(device.reduction_threads(), ::testing::IsEmpty()) << "rank " << r;
        for (int step = 0; step < 2; ++step) {
          EXPECT_EQ(runs[r].steps[step].loss, host[r].steps[step].loss);
          EXPECT_LE(runs[r].steps[step].start_us, runs[r].steps[step].compute_end_us);
          EXPECT_LE(runs[r].steps[step].compute_end_us, runs[r].steps[step].end_us);
        }
        for (const ExecutionContext& ctx : runs[r].stages[0]->contexts()) {
          EXPECT_EQ(ctx.device, 0);
          EXPECT_EQ(ctx.stream, device.device_streams()->compute);
        }
        EXPECT_EQ(runs[r].buffers->live_bytes(), 0) << "rank " << r;
      }
    }
  }
}

// A step captured into a CUDA graph only enqueues: after an ordinary step,
// the captured one posts no marker and tests nothing (a query of captured
// work would fail the capture), its stage calls are the same and see the
// same data, its loss is left to the caller (0), and its buffers are all
// released. Capture needs a device transport and a stream-ordered provider.
TEST(RankExecutorTest, ACapturedStepOnlyEnqueues) {
  for (const char* schedule : {"1f1b", "zbv"}) {
    SCOPED_TRACE(schedule);
    ASSERT_OK_AND_ASSIGN(ReplayPlan plan, ProbePlan(schedule, 4, 8, MemoryPolicy::kJit));
    std::vector<RankRun> runs = RunRanks(plan, {.steps = 2, .stream_ordered = true,
                                                .together = true, .device = true,
                                                .capture_from = 1});
    for (int r = 0; r < 4; ++r) {
      ASSERT_OK(runs[r].status) << "rank " << r;
      ASSERT_EQ(runs[r].steps.size(), 2u);
      const size_t half = runs[r].log.size() / 2;
      EXPECT_EQ(std::vector<std::string>(runs[r].log.begin(), runs[r].log.begin() + half),
                std::vector<std::string>(runs[r].log.begin() + half, runs[r].log.end()))
          << "rank " << r;
      EXPECT_EQ(runs[r].device->markers(), 2) << "rank " << r;  // the first step's only
      EXPECT_EQ(runs[r].device->tests_mid_step(), 0) << "rank " << r;
      EXPECT_EQ(runs[r].steps[1].loss, 0);
      EXPECT_EQ(runs[r].buffers->live_bytes(), 0) << "rank " << r;
    }
  }
  // Over a host transport there is nothing to capture.
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, ProbePlan("1f1b", 2, 2, MemoryPolicy::kJit));
  std::vector<RankRun> host = RunRanks(plan, {.steps = 1, .together = true, .capture_from = 0});
  EXPECT_EQ(host[0].status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(host[0].status.message()),
              ::testing::HasSubstr("only a step over a device transport"));
}

// A receive whose sender never posts is never issued to the device: the
// host waits for the post, and the wait ends after the timeout with the
// message of a host transport's wait, polled or blocking.
TEST(RankExecutorTest, AReceiveNeverIssuedTimesOutLikeAHostWait) {
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, ProbePlan("gpipe", 2, 2, MemoryPolicy::kJit));
  const Schedule& s = plan.schedule;
  std::vector<std::string> log;
  ProbeStage stage1(1, false, true, &log);
  std::vector<Stage*> stages = {nullptr, &stage1};
  RankExecutorOptions options;
  options.timeout = absl::Milliseconds(50);
  for (bool polled : {true, false}) {
    std::unique_ptr<InProcessWorld> world = CreateInProcessWorld(2);
    DeviceLikeTransport device(&world->transport(1));
    StreamOrderedBuffers buffers(plan.executable.ranks[1].buffer_bytes);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<RankExecutor> executor,
                         RankExecutor::Create(s, plan.executable, 1, &device, stages, &buffers,
                                              nullptr, options));
    absl::Status timed_out;
    if (polled) {
      RankExecutor* const one[] = {executor.get()};
      std::vector<StepResult> results;
      timed_out = RunStepsTogether(one, results);
    } else {
      timed_out = executor->RunStep().status();
    }
    EXPECT_EQ(timed_out.code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(timed_out.message(),
              "rank 1, index 1 (1F0): timed out after 50ms waiting for receive 1RECV_F0 from "
              "rank 0 (index 0)");
    EXPECT_TRUE(device.stream_waits().empty());
    world->Abort(1, "the test ends");
  }
}

TEST(RankExecutorTest, AStageErrorNamesTheRankIndexAndAction) {
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, ProbePlan("gpipe", 2, 2, MemoryPolicy::kJit));
  std::vector<RankRun> runs = RunRanks(plan, {.fail_rank = 0});
  EXPECT_EQ(runs[0].status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(runs[0].status), "rank 0, index 2 (0F1): the stage broke");
  // Rank 1 was waiting for that forward: the abort ends its wait.
  EXPECT_EQ(runs[1].status.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(Message(runs[1].status),
              HasSubstr("rank 0 failed: rank 0, index 2 (0F1): the stage broke"));
}

TEST(RankExecutorTest, CreateRefusesMissingStagesAndMismatchedSizes) {
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, ProbePlan("gpipe", 2, 2, MemoryPolicy::kJit));
  std::unique_ptr<InProcessWorld> world = CreateInProcessWorld(2);
  TrackedBuffers buffers(plan.executable.ranks[0].buffer_bytes);
  std::vector<Stage*> none(2, nullptr);
  absl::StatusOr<std::unique_ptr<RankExecutor>> e = RankExecutor::Create(
      plan.schedule, plan.executable, 0, &world->transport(0), none, &buffers, nullptr, {});
  EXPECT_EQ(Message(e), "rank 0 holds stage 0 but no Stage was given for it");

  testing::NoopStage wide(StageSizes{16, kActivation, 0, 4});
  std::vector<Stage*> stages = {&wide, nullptr};
  e = RankExecutor::Create(plan.schedule, plan.executable, 0, &world->transport(0), stages,
                           &buffers, nullptr, {});
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(e), "rank 0, index 0 (0F0): stage 0 needs 16-byte input buffers but the plan "
                        "has 8 (plan with the Model built from the stages' Sizes())");

  RankExecutorOptions replica1;
  replica1.replica = 1;
  replica1.dp = 2;
  e = RankExecutor::Create(plan.schedule, plan.executable, 0, &world->transport(0), stages,
                           &buffers, nullptr, replica1);
  EXPECT_EQ(Message(e), "the transport is rank 0 of 2 but pipeline rank 0 of replica 1 is world "
                        "rank 2 of pp 2 x dp 2");

  StreamOrderedBuffers device(plan.executable.ranks[0].buffer_bytes, MemorySpace::kDevice);
  e = RankExecutor::Create(plan.schedule, plan.executable, 0, &world->transport(0), stages, &device,
                           nullptr, {});
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(e),
            "rank 0: the buffer provider hands out device memory but no device was "
            "given");
}

// The executor without the rank runner (runtime/rank_runner.h, the README's
// library example): one rank of a schedule on the caller's thread, its
// stages the caller's, its buffers the plan's arena, every transport op in a
// flight recorder. (Here two ranks on two threads, mlp stages.)
absl::Status RunMyRank(const ReplayPlan& plan, int rank, Transport& transport,
                       StageFactory& my_stages, int steps, const std::string& flight_dir) {
  const Schedule& s = plan.schedule;
  std::vector<std::unique_ptr<Stage>> owned;
  std::vector<Stage*> stages(s.num_stages(), nullptr);
  for (int stage = 0; stage < s.num_stages(); ++stage) {
    if (s.RankOf(stage) != rank) continue;
    ASSIGN_OR_RETURN(std::unique_ptr<Stage> made, my_stages.Make(stage, /*replica=*/0));
    stages[stage] = made.get();
    owned.push_back(std::move(made));
  }
  const RankMemoryPlan& memory = plan.plans[rank];
  ArenaBuffers buffers(plan.executable.ranks[rank].buffer_bytes, memory.arena.offsets,
                       memory.arena.arena_bytes, memory.options.alignment);
  FlightRecorder recorder(transport.rank(), transport.size());
  RecordingTransport recorded(&transport, &recorder);
  RankExecutorOptions options;
  options.timeout = absl::Seconds(30);
  ASSIGN_OR_RETURN(std::unique_ptr<RankExecutor> executor,
                   RankExecutor::Create(s, plan.executable, rank, &recorded, stages, &buffers,
                                        &recorder, options));
  for (int step = 0; step < steps; ++step) {
    absl::StatusOr<StepResult> result = executor->RunStep();
    if (!result.ok()) {
      (void)recorder.Dump(flight_dir, result.status().message());  // for jitpipe fr-analyze
      recorded.Abort(std::string(result.status().message()));
      return result.status();
    }
  }
  return absl::OkStatus();
}

TEST(RankExecutorTest, ADriverOfItsOwnRunsARankOverARecordedTransport) {
  testing::ExpectTwoMlpRanksMatchTheReference(RunMyRank);
}

}  // namespace
}  // namespace jitpipe::rank_executor_test
