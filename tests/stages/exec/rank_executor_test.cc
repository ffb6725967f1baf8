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
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::rank_executor_test {
namespace {

using ::jitpipe::testing::Message;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kActivation = 8;  // two floats

// A stage that logs its calls and passes a tag through the pipeline: its
// output holds stage * 1000 + microbatch, and it checks that its input holds
// what the previous stage wrote (LoadInput writes -1000 + microbatch).
class ProbeStage final : public Stage {
 public:
  ProbeStage(int stage, bool first, bool last, std::vector<std::string>* log)
      : stage_(stage), first_(first), last_(last), log_(log) {}

  StageSizes Sizes() const override { return {kActivation, kActivation, 0, 4}; }
  absl::Status LoadInput(const ExecutionContext& ctx, int mb, MutableBytes input) override {
    Log(ctx, "L", mb);
    return Put(input, -1000 + mb);
  }
  absl::Status Forward(const ExecutionContext& ctx, int mb, ConstBytes input, MutableBytes output,
                       MutableBytes) override {
    Log(ctx, "F", mb);
    if (mb == fail_forward_) return absl::InvalidArgumentError("the stage broke");
    if (Get(input) != (stage_ - 1) * 1000 + mb) return absl::DataLossError("wrong input");
    return Put(output, stage_ * 1000 + mb);
  }
  absl::Status BackwardInput(const ExecutionContext& ctx, int mb, ConstBytes output_grad,
                             MutableBytes, MutableBytes input_grad) override {
    Log(ctx, "I", mb);
    if (last_ != output_grad.empty() || first_ != input_grad.empty()) {
      return absl::InternalError("a gradient buffer where none belongs, or none where one does");
    }
    return absl::OkStatus();
  }
  absl::Status BackwardWeight(const ExecutionContext& ctx, int mb, ConstBytes, ConstBytes,
                              ConstBytes, MutableBytes param_grad) override {
    Log(ctx, "W", mb);
    float g;
    std::memcpy(&g, param_grad.data(), sizeof(float));
    g += 1;
    std::memcpy(param_grad.data(), &g, sizeof(float));
    return absl::OkStatus();
  }
  double Loss(int mb) const override { return last_ ? 0.5 + mb : 0; }
  absl::Status FinishStep(const ExecutionContext& ctx, ConstBytes param_grad) override {
    contexts_.push_back(ctx);
    finished_.push_back(Get(param_grad));
    return absl::OkStatus();
  }

  void FailForwardOf(int mb) { fail_forward_ = mb; }
  const std::vector<float>& finished() const { return finished_; }
  // The context of every call, in order.
  const std::vector<ExecutionContext>& contexts() const { return contexts_; }

 private:
  void Log(const ExecutionContext& ctx, const char* what, int mb) {
    log_->push_back(absl::StrCat(stage_, what, mb));
    contexts_.push_back(ctx);
  }
  static absl::Status Put(MutableBytes bytes, float value) {
    if (bytes.size() < sizeof(float)) return absl::InternalError("buffer too small");
    std::memcpy(bytes.data(), &value, sizeof(float));
    return absl::OkStatus();
  }
  static float Get(ConstBytes bytes) {
    float v = -1e9f;
    if (bytes.size() >= sizeof(float)) std::memcpy(&v, bytes.data(), sizeof(float));
    return v;
  }

  const int stage_;
  const bool first_, last_;
  std::vector<std::string>* const log_;
  int fail_forward_ = -1;
  std::vector<float> finished_;
  std::vector<ExecutionContext> contexts_;
};

// Completes every send only after `polls` Tests said "not yet" (a
// rendezvous-like backend, as MPI for large messages).
class SlowSendTransport final : public Transport {
 public:
  SlowSendTransport(Transport* inner, int polls) : inner_(inner), polls_(polls) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  absl::StatusOr<RequestId> PostSend(int peer, uint64_t tag, absl::Span<const std::byte> bytes,
                                     const OpInfo& info) override {
    absl::StatusOr<RequestId> id = inner_->PostSend(peer, tag, bytes, info);
    if (id.ok()) pending_[*id] = polls_;
    return id;
  }
  absl::StatusOr<RequestId> PostRecv(int peer, uint64_t tag, absl::Span<std::byte> bytes,
                                     const OpInfo& info) override {
    return inner_->PostRecv(peer, tag, bytes, info);
  }
  absl::StatusOr<RequestId> PostAllReduce(const Group& g, absl::Span<float> d, ReduceOp op,
                                          const OpInfo& info) override {
    return inner_->PostAllReduce(g, d, op, info);
  }
  absl::StatusOr<RequestId> PostReduceScatter(const Group& g, absl::Span<const float> in,
                                              absl::Span<float> out, ReduceOp op,
                                              const OpInfo& info) override {
    return inner_->PostReduceScatter(g, in, out, op, info);
  }
  absl::StatusOr<bool> Test(RequestId id) override {
    absl::MutexLock lock(&mu_);  // the reduction thread never tests sends, but be safe
    auto it = pending_.find(id);
    if (it != pending_.end() && it->second-- > 0) return false;
    return inner_->Test(id);
  }
  absl::Status Wait(RequestId id, absl::Duration timeout) override {
    return inner_->Wait(id, timeout);
  }
  void Abort(const std::string& reason) override { inner_->Abort(reason); }

 private:
  Transport* const inner_;
  const int polls_;
  absl::Mutex mu_;
  absl::flat_hash_map<RequestId, int> pending_;
};

// A provider that takes sent buffers' releases with their requests, as a
// device's stream-ordered free does, and reclaims the bytes only when the
// executor reports the request complete. It logs what it was handed.
class StreamOrderedBuffers final : public BufferProvider {
 public:
  explicit StreamOrderedBuffers(std::vector<int64_t> buffer_bytes,
                                MemorySpace space = MemorySpace::kHost)
      : BufferProvider(buffer_bytes), space_(space), memory_(buffer_bytes.size()) {
    for (size_t id = 0; id < buffer_bytes.size(); ++id) {
      memory_[id].resize(static_cast<size_t>(buffer_bytes[id]));
    }
  }

  absl::StatusOr<MutableBytes> Allocate(int32_t id) override {
    RETURN_IF_ERROR(CheckAllocate(id));
    CountAllocate(id);
    return absl::MakeSpan(memory_[id]);
  }
  void Release(int32_t id) override {
    if (CountRelease(id)) released_.push_back(id);
  }
  bool ReusesReleasedBytes() const override { return true; }
  // Host memory posing as the given space: the executor never touches it.
  MemorySpace memory_space() const override { return space_; }
  bool ReleasesAfterRequests() const override { return true; }
  void ReleaseAfter(int32_t id, RequestId request) override {
    handed_.push_back(id);
    retiring_[request].push_back(id);
  }
  void RequestCompleted(RequestId request) override {
    auto it = retiring_.find(request);
    if (it == retiring_.end()) return;
    for (int32_t id : it->second) CountRelease(id);
    retiring_.erase(it);
  }

  const std::vector<int32_t>& handed() const { return handed_; }      // to ReleaseAfter
  const std::vector<int32_t>& released() const { return released_; }  // by Release
  size_t retiring() const { return retiring_.size(); }

 private:
  const MemorySpace space_;
  std::vector<std::vector<std::byte>> memory_;
  std::vector<int32_t> handed_, released_;
  absl::flat_hash_map<RequestId, std::vector<int32_t>> retiring_;
};

// A host emulation of a device transport (comm/cuda, comm/nccl): it has a
// device and a compute stream, and StreamWait stands for the device's
// cudaStreamWaitEvent -- true once the inner (in-process) operation has
// completed, which is when the one-GPU backend would have issued the copy,
// false before (not issued: the sender has not posted). It logs the stream
// waits, the Tests made before the step-end marker was posted, the threads
// that post reductions and the markers.
class DeviceLikeTransport final : public Transport {
 public:
  explicit DeviceLikeTransport(Transport* inner) : inner_(inner) {
    streams_.device = 0;
    streams_.compute = &compute_stream_;
  }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const DeviceStreams* device_streams() const override { return &streams_; }
  absl::StatusOr<RequestId> PostSend(int peer, uint64_t tag, absl::Span<const std::byte> bytes,
                                     const OpInfo& info) override {
    return inner_->PostSend(peer, tag, bytes, info);
  }
  absl::StatusOr<RequestId> PostRecv(int peer, uint64_t tag, absl::Span<std::byte> bytes,
                                     const OpInfo& info) override {
    return inner_->PostRecv(peer, tag, bytes, info);
  }
  absl::StatusOr<RequestId> PostAllReduce(const Group& g, absl::Span<float> d, ReduceOp op,
                                          const OpInfo& info) override {
    absl::MutexLock lock(&mu_);
    reduction_threads_.push_back(std::this_thread::get_id());
    return inner_->PostAllReduce(g, d, op, info);
  }
  absl::StatusOr<RequestId> PostReduceScatter(const Group& g, absl::Span<const float> in,
                                              absl::Span<float> out, ReduceOp op,
                                              const OpInfo& info) override {
    return inner_->PostReduceScatter(g, in, out, op, info);
  }
  absl::StatusOr<bool> StreamWait(RequestId id, void* stream) override {
    absl::MutexLock lock(&mu_);
    if (stream != &compute_stream_) return absl::InternalError("a wait on another stream");
    if (!completed_.contains(id)) {
      absl::StatusOr<bool> done = inner_->Test(id);
      if (!done.ok()) return done.status();
      if (!*done) return false;  // not issued yet
      completed_.insert(id);
    }
    stream_waits_.push_back(id);
    return true;
  }
  absl::StatusOr<RequestId> PostMarker(const OpInfo&) override {
    absl::MutexLock lock(&mu_);
    ++markers_;
    marker_posted_ = true;
    return kMarkerBase + markers_;
  }
  absl::StatusOr<bool> Test(RequestId id) override {
    absl::MutexLock lock(&mu_);
    if (id > kMarkerBase) return true;
    if (!marker_posted_) ++tests_mid_step_;
    if (completed_.erase(id) > 0) return true;
    return inner_->Test(id);
  }
  absl::Status Wait(RequestId id, absl::Duration timeout) override {
    {
      absl::MutexLock lock(&mu_);
      if (id > kMarkerBase || completed_.erase(id) > 0) return absl::OkStatus();
    }
    return inner_->Wait(id, timeout);
  }
  void Abort(const std::string& reason) override { inner_->Abort(reason); }

  // A new step: the next Tests are mid-step until its marker.
  void NewStep() {
    absl::MutexLock lock(&mu_);
    marker_posted_ = false;
  }
  std::vector<RequestId> stream_waits() {
    absl::MutexLock lock(&mu_);
    return stream_waits_;
  }
  int tests_mid_step() {
    absl::MutexLock lock(&mu_);
    return tests_mid_step_;
  }
  int markers() {
    absl::MutexLock lock(&mu_);
    return markers_;
  }
  std::vector<std::thread::id> reduction_threads() {
    absl::MutexLock lock(&mu_);
    return reduction_threads_;
  }

 private:
  static constexpr RequestId kMarkerBase = RequestId{1} << 60;
  Transport* const inner_;
  int compute_stream_ = 0;
  DeviceStreams streams_;
  absl::Mutex mu_;
  absl::flat_hash_set<RequestId> completed_ ABSL_GUARDED_BY(mu_);  // seen by StreamWait
  std::vector<RequestId> stream_waits_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> reduction_threads_ ABSL_GUARDED_BY(mu_);
  int tests_mid_step_ ABSL_GUARDED_BY(mu_) = 0;
  int markers_ ABSL_GUARDED_BY(mu_) = 0;
  bool marker_posted_ ABSL_GUARDED_BY(mu_) = false;
};

struct RankRun {
  std::vector<std::string> log;
  std::vector<std::unique_ptr<ProbeStage>> stages;
  std::unique_ptr<BufferProvider> buffers;
  std::vector<StepResult> steps;
  absl::Status status;
  // spec.device: the rank's transport (its logs; its inner transport is
  // gone once RunRanks returns) and the thread that drove the rank.
  std::unique_ptr<DeviceLikeTransport> device;
  std::thread::id driver;
};

// A generated schedule, lowered and planned for ProbeStage sizes.
absl::StatusOr<ReplayPlan> ProbePlan(const std::string& schedule, int pp, int m,
                                     MemoryPolicy policy) {
  absl::StatusOr<Schedule> generated = Generate({schedule, pp, m, 0});
  if (!generated.ok()) return generated.status();
  absl::StatusOr<Schedule> lowered = LowerForReplay(*generated);
  if (!lowered.ok()) return lowered.status();
  Model model;
  model.defaults.input_bytes = kActivation;
  model.defaults.output_bytes = kActivation;
  model.defaults.param_bytes = 4;
  return PlanReplay(*lowered, model, policy);
}

struct RunSpec {
  int steps = 1;
  bool arena = false;
  int slow_send_polls = 0;  // > 0: sends complete only after this many Tests
  int fail_rank = -1;       // this rank's stages fail the Forward of microbatch 1
  bool stream_ordered = false;  // StreamOrderedBuffers
  void* stream = nullptr;       // RankExecutorOptions::stream
  bool together = false;        // one thread drives every rank (RunStepsTogether)
  bool device = false;          // over DeviceLikeTransport
  int capture_from = -1;        // together: the steps from this one are captured (SetCapturing)
};

// What one rank runs with, made before any rank starts.
struct RankSetup {
  std::unique_ptr<SlowSendTransport> slow;
  Transport* transport = nullptr;
  std::unique_ptr<RankExecutor> executor;
};

// Runs every rank's executor on its own thread, or all of them from this
// thread (spec.together); a failing rank aborts the world so the others end
// (as the in-process driver does).
std::vector<RankRun> RunRanks(const ReplayPlan& plan, const RunSpec& spec) {
  const Schedule& s = plan.schedule;
  std::unique_ptr<InProcessWorld> world = CreateInProcessWorld(s.pp);
  std::vector<RankRun> runs(s.pp);
  std::vector<RankSetup> setups(s.pp);
  for (int rank = 0; rank < s.pp; ++rank) {
    RankRun& run = runs[rank];
    RankSetup& setup = setups[rank];
    std::vector<Stage*> stages(s.num_stages(), nullptr);
    for (int st = 0; st < s.num_stages(); ++st) {
      if (s.RankOf(st) != rank) continue;
      run.stages.push_back(std::make_unique<ProbeStage>(st, s.IsFirstStage(st), s.IsLastStage(st),
                                                        &run.log));
      if (rank == spec.fail_rank) run.stages.back()->FailForwardOf(1);
      stages[st] = run.stages.back().get();
    }
    const RankExecutable& exe = plan.executable.ranks[rank];
    if (spec.stream_ordered) {
      run.buffers = std::make_unique<StreamOrderedBuffers>(exe.buffer_bytes);
    } else if (spec.arena) {
      run.buffers = std::make_unique<ArenaBuffers>(exe.buffer_bytes, plan.plans[rank].arena.offsets,
                                                   plan.plans[rank].arena.arena_bytes, 64);
    } else {
      run.buffers = std::make_unique<TrackedBuffers>(exe.buffer_bytes);
    }
    setup.transport = &world->transport(rank);
    if (spec.slow_send_polls > 0) {
      setup.slow = std::make_unique<SlowSendTransport>(setup.transport, spec.slow_send_polls);
      setup.transport = setup.slow.get();
    }
    if (spec.device) {
      run.device = std::make_unique<DeviceLikeTransport>(setup.transport);
      setup.transport = run.device.get();
    }
    RankExecutorOptions options;
    options.timeout = absl::Seconds(20);
    options.stream = spec.stream;
    absl::StatusOr<std::unique_ptr<RankExecutor>> executor = RankExecutor::Create(
        s, plan.executable, rank, setup.transport, stages, run.buffers.get(), nullptr, options);
    run.status = executor.status();
    if (executor.ok()) setup.executor = *std::move(executor);
  }
  if (spec.together) {
    std::vector<RankExecutor*> executors;
    for (RankSetup& setup : setups) {
      if (setup.executor == nullptr) return runs;
      executors.push_back(setup.executor.get());
    }
    for (int step = 0; step < spec.steps; ++step) {
      for (RankRun& run : runs) {
        run.driver = std::this_thread::get_id();
        if (run.device != nullptr) run.device->NewStep();
      }
      if (step == spec.capture_from) {
        for (int r = 0; r < s.pp; ++r) runs[r].status = executors[r]->SetCapturing(true);
        if (!runs[0].status.ok()) break;
      }
      std::vector<StepResult> results;
      absl::Status status = RunStepsTogether(executors, results);
      if (!status.ok()) {
        for (RankRun& run : runs) run.status = status;
        break;
      }
      for (int r = 0; r < s.pp; ++r) runs[r].steps.push_back(std::move(results[r]));
    }
    return runs;
  }
  auto body = [&](int rank) {
    RankRun& run = runs[rank];
    RankSetup& setup = setups[rank];
    for (int step = 0; run.status.ok() && step < spec.steps; ++step) {
      run.driver = std::this_thread::get_id();
      if (run.device != nullptr) run.device->NewStep();
      absl::StatusOr<StepResult> result = setup.executor->RunStep();
      run.status = result.status();
      if (result.ok()) run.steps.push_back(*std::move(result));
    }
    if (!run.status.ok()) setup.transport->Abort(std::string(run.status.message()));
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < s.pp; ++r) threads.emplace_back(body, r);
  for (std::thread& t : threads) t.join();
  return runs;
}

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

  class Wide final : public Stage {
   public:
    StageSizes Sizes() const override { return {16, kActivation, 0, 4}; }
    absl::Status LoadInput(const ExecutionContext&, int, MutableBytes) override {
      return absl::OkStatus();
    }
    absl::Status Forward(const ExecutionContext&, int, ConstBytes, MutableBytes,
                         MutableBytes) override {
      return absl::OkStatus();
    }
    absl::Status BackwardInput(const ExecutionContext&, int, ConstBytes, MutableBytes,
                               MutableBytes) override {
      return absl::OkStatus();
    }
    absl::Status BackwardWeight(const ExecutionContext&, int, ConstBytes, ConstBytes, ConstBytes,
                                MutableBytes) override {
      return absl::OkStatus();
    }
  } wide;
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

// The README's executor: one rank of a schedule on the caller's thread, its
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

TEST(RankExecutorTest, ReadmeExample) {
  ASSERT_OK_AND_ASSIGN(Schedule generated, Generate({"interleaved-1f1b", 2, 4, 0}));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, LowerForReplay(generated));
  MlpStageFactory factory(MlpOptions{MlpShape{8, 2, 1}, 3}, MlpLayout::Of(lowered, 1));
  ASSERT_OK_AND_ASSIGN(Model model, ModelWithStageSizes(Model(), lowered.num_stages(), factory));
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, PlanReplay(lowered, model, MemoryPolicy::kJit));
  std::unique_ptr<InProcessWorld> world = CreateInProcessWorld(2);
  const std::string dir = ::jitpipe::testing::MakeTempDir("readme");
  absl::Status status1;
  std::thread rank1([&] { status1 = RunMyRank(plan, 1, world->transport(1), factory, 2, dir); });
  EXPECT_OK(RunMyRank(plan, 0, world->transport(0), factory, 2, dir));
  rank1.join();
  EXPECT_OK(status1);
  ASSERT_OK_AND_ASSIGN(MlpComparison c,
                       CompareWithReference(RunMlpReference(factory.options(), factory.layout()),
                                            0, factory, ReduceKind::kAllReduce));
  EXPECT_LE(c.worst_grad_error, 1e-5) << c.ToString();
}

}  // namespace
}  // namespace jitpipe::rank_executor_test
