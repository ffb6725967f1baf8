// The harness the rank executor's tests drive it with, one thread per rank
// over an in-process world (or one thread for all): a stage that logs its
// calls and checks the data it receives (ProbeStage), transports that
// complete sends late (SlowSendTransport) or behave as a device's would
// (DeviceLikeTransport), a provider of stream-ordered buffers, and
// RunRanks, which runs every rank of a planned schedule and returns what
// each saw. Test-only: shared so that the tests read as tests.
#ifndef JITPIPE_TESTS_TESTING_RANK_EXECUTOR_HARNESS_H_
#define JITPIPE_TESTS_TESTING_RANK_EXECUTOR_HARNESS_H_

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
#include "memory/memory_plan.h"
#include "scheduler/generators/generate.h"
#include "stages/reference/mlp_reference.h"
#include "stages/reference/mlp_stage.h"
#include "runtime/replay_plan.h"
#include "tests/testing/noop_stage.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"
#include "gtest/gtest.h"

namespace jitpipe::testing {

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
                       StashView) override {
    Log(ctx, "F", mb);
    if (mb == fail_forward_) return absl::InvalidArgumentError("the stage broke");
    if (Get(input) != (stage_ - 1) * 1000 + mb) return absl::DataLossError("wrong input");
    return Put(output, stage_ * 1000 + mb);
  }
  absl::Status BackwardInput(const ExecutionContext& ctx, int mb, ConstBytes output_grad,
                             StashView, MutableBytes input_grad) override {
    Log(ctx, "I", mb);
    if (last_ != output_grad.empty() || first_ != input_grad.empty()) {
      return absl::InternalError("a gradient buffer where none belongs, or none where one does");
    }
    return absl::OkStatus();
  }
  absl::Status BackwardWeight(const ExecutionContext& ctx, int mb, ConstBytes, ConstBytes,
                              StashView, MutableBytes param_grad) override {
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
inline absl::StatusOr<ReplayPlan> ProbePlan(const std::string& schedule, int pp, int m,
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
inline std::vector<RankRun> RunRanks(const ReplayPlan& plan, const RunSpec& spec) {
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

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_TESTING_RANK_EXECUTOR_HARNESS_H_
