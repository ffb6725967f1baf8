#include "stages/inproc_runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "comm/flight_analysis.h"
#include "comm/flight_recorder.h"
#include "comm/inproc/inproc_transport.h"
#include "stages/buffer_provider.h"
#include "stages/rank_executor.h"

namespace jitpipe {
namespace {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

absl::Status Stopped() { return absl::AbortedError("stopped: another rank failed"); }

// A barrier between steps that never hangs: it gives up when the run has
// failed (Fail) or the timeout passes.
class StepBarrier {
 public:
  explicit StepBarrier(int parties) : parties_(parties) {}

  // OK when every party arrived; Aborted when the run failed,
  // DeadlineExceeded when the timeout passed first.
  absl::Status Wait(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    if (failed_) return Stopped();
    const int64_t generation = generation_;
    if (++arrived_ == parties_) {
      arrived_ = 0;
      ++generation_;
      return absl::OkStatus();
    }
    auto released = [this, generation]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return failed_ || generation_ != generation;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&released), timeout)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "timed out after ", absl::FormatDuration(timeout),
          " waiting at the step barrier for the other ranks"));
    }
    return failed_ ? Stopped() : absl::OkStatus();
  }

  void Fail() {
    absl::MutexLock lock(&mu_);
    failed_ = true;
  }

 private:
  const int parties_;
  absl::Mutex mu_;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
};

// What one world rank's thread leaves behind.
struct RankOutcome {
  absl::Status status;
  std::vector<StepResult> steps;
  int64_t peak_bytes = 0;
  int64_t heap_allocations = 0;
};

// One run: the shared state of the rank threads.
class Run {
 public:
  Run(const Schedule& schedule, const Executable& executable,
      absl::Span<const RankMemoryPlan> plans, StageFactory& factory,
      const InProcessOptions& options)
      : schedule_(schedule), executable_(executable), plans_(plans), factory_(factory),
        options_(options), world_size_(schedule.pp * options.dp),
        world_(CreateInProcessWorld(world_size_)), barrier_(world_size_),
        outcomes_(world_size_), origin_(std::chrono::steady_clock::now()) {
    for (int w = 0; w < world_size_; ++w) {
      recorders_.push_back(std::make_unique<FlightRecorder>(w, world_size_));
    }
  }

  absl::StatusOr<ReplayResult> Execute() {
    std::vector<std::thread> threads;
    for (int w = 0; w < world_size_; ++w) threads.emplace_back([this, w] { RankMain(w); });
    if (std::optional<absl::Status> stuck = AwaitRanks(); stuck.has_value()) {
      if (options_.on_stuck) {
        options_.on_stuck(*stuck);
      } else {
        std::fprintf(stderr, "jitpipe: %s\n", std::string(stuck->message()).c_str());
        std::fflush(nullptr);
        std::_Exit(1);
      }
      for (std::thread& t : threads) t.join();
      return *stuck;
    }
    for (std::thread& t : threads) t.join();
    absl::MutexLock lock(&mu_);
    if (root_rank_ >= 0) return FailureReport(root_rank_);
    return Collect();
  }

 private:
  std::unique_ptr<BufferProvider> MakeProvider(int rank) const {
    const RankExecutable& exe = executable_.ranks[rank];
    if (options_.buffers == BufferMode::kArena) {
      const RankMemoryPlan& plan = plans_[rank];
      return std::make_unique<ArenaBuffers>(exe.buffer_bytes, plan.arena.offsets,
                                            plan.arena.arena_bytes, plan.options.alignment);
    }
    return std::make_unique<TrackedBuffers>(exe.buffer_bytes);
  }

  // Waits until every rank thread has ended, or the run has failed and
  // stuck_grace has passed since; then returns the failure report naming
  // the ranks still running (nullopt when every thread ended).
  std::optional<absl::Status> AwaitRanks() {
    absl::MutexLock lock(&mu_);
    auto ended_or_failed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return ended_ == world_size_ || root_rank_ >= 0;
    };
    mu_.Await(absl::Condition(&ended_or_failed));
    auto all_ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ended_ == world_size_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&all_ended), options_.stuck_grace)) {
      return std::nullopt;
    }
    return FailureReport(root_rank_);
  }

  // The body of world rank w's thread. Members are declared so that the
  // executor (and its reduction thread) goes before the transport, the
  // buffers and the stages it borrows.
  void RankMain(int w) {
    const int rank = w % schedule_.pp, replica = w / schedule_.pp;
    RankOutcome& out = outcomes_[w];
    std::vector<std::unique_ptr<Stage>> owned;
    std::vector<Stage*> stages(schedule_.num_stages(), nullptr);
    std::unique_ptr<BufferProvider> buffers = MakeProvider(rank);
    RecordingTransport transport(&world_->transport(w), recorders_[w].get());
    out.status = MakeStages(rank, replica, owned, stages);
    std::unique_ptr<RankExecutor> executor;
    if (out.status.ok()) {
      RankExecutorOptions eo{replica, options_.dp, options_.reduce, options_.timeout, origin_,
                             options_.record_timeline};
      absl::StatusOr<std::unique_ptr<RankExecutor>> made = RankExecutor::Create(
          schedule_, executable_, rank, &transport, stages, buffers.get(), recorders_[w].get(), eo);
      out.status = made.status();
      if (made.ok()) executor = *std::move(made);
    }
    // Every step's record is allocated before the first step, so memory
    // stays flat while the steps run (tests/stages/soak_test.cc).
    out.steps.resize(options_.steps);
    // "rank 1, before step 0: timed out ...", as the MPI backend says it.
    auto at_barrier = [w](const absl::Status& s, absl::string_view where) {
      if (s.code() != absl::StatusCode::kDeadlineExceeded) return s;
      return absl::Status(s.code(), absl::StrCat("rank ", w, ", ", where, ": ", s.message()));
    };
    for (int step = 0; out.status.ok() && step < options_.steps; ++step) {
      out.status = at_barrier(barrier_.Wait(options_.timeout), absl::StrCat("before step ", step));
      if (out.status.code() == absl::StatusCode::kAborted) break;  // another rank failed
      if (!out.status.ok()) break;
      absl::StatusOr<StepResult> result = executor->RunStep();
      if (!result.ok()) {
        out.status = result.status();
        break;
      }
      out.steps[step] = *std::move(result);
      if (w == 0 && options_.on_step) options_.on_step(step + 1);
    }
    // The end of the last step: a rank that finished waits for the others,
    // bounded by the timeout like every other wait.
    if (out.status.ok()) {
      out.status = at_barrier(barrier_.Wait(options_.timeout), "after the last step");
    }
    if (!out.status.ok()) Fail(w, out.status, transport);
    out.peak_bytes = buffers->peak_bytes();
    out.heap_allocations = buffers->heap_allocations();
    absl::MutexLock lock(&mu_);
    ended_rank_[w] = true;
    ++ended_;
  }

  absl::Status MakeStages(int rank, int replica, std::vector<std::unique_ptr<Stage>>& owned,
                          std::vector<Stage*>& stages) {
    absl::MutexLock lock(&factory_mu_);  // factories need not be thread-safe
    for (int s = 0; s < schedule_.num_stages(); ++s) {
      if (schedule_.RankOf(s) != rank) continue;
      ASSIGN_OR_RETURN(std::unique_ptr<Stage> stage, factory_.Make(s, replica));
      stages[s] = stage.get();
      owned.push_back(std::move(stage));
    }
    return absl::OkStatus();
  }

  // The first failure is the root: every other failure follows from the
  // abort it causes. The root takes every rank's flight record as it stands
  // at that moment (before the abort disturbs it), writes them into the
  // flight directory, then stops the barrier and aborts the world.
  void Fail(int w, const absl::Status& status, Transport& transport) {
    {
      absl::MutexLock lock(&mu_);
      if (root_rank_ < 0) {
        root_rank_ = w;
        const std::string reason = absl::StrCat("rank ", w, " failed: ", status.message());
        for (const auto& recorder : recorders_) snapshots_.push_back(recorder->ToJson(reason));
        if (!options_.flight_dir.empty()) {
          for (int r = 0; r < world_size_ && dump_status_.ok(); ++r) {
            dump_status_ = WriteFileAtomically(
                absl::StrCat(options_.flight_dir, "/rank_", r, ".json"), snapshots_[r]);
          }
        }
      }
    }
    barrier_.Fail();
    transport.Abort(std::string(status.message()));
  }

  absl::Status FailureReport(int root_rank) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Status& root = outcomes_[root_rank].status;
    std::vector<int> aborted, timed_out, failed, stuck;
    for (int w = 0; w < world_size_; ++w) {
      if (w == root_rank) continue;
      if (!ended_rank_[w]) {
        stuck.push_back(w);
        continue;
      }
      switch (outcomes_[w].status.code()) {
        case absl::StatusCode::kAborted: aborted.push_back(w); break;
        case absl::StatusCode::kDeadlineExceeded: timed_out.push_back(w); break;
        case absl::StatusCode::kOk: break;
        default: failed.push_back(w); break;
      }
    }
    std::string message(root.message());
    std::vector<std::string> others;
    if (!aborted.empty()) others.push_back(absl::StrCat("aborted (", absl::StrJoin(aborted, ", "), ")"));
    if (!timed_out.empty()) others.push_back(absl::StrCat("timed out (", absl::StrJoin(timed_out, ", "), ")"));
    if (!failed.empty()) others.push_back(absl::StrCat("failed (", absl::StrJoin(failed, ", "), ")"));
    if (!others.empty()) absl::StrAppend(&message, "; other ranks: ", absl::StrJoin(others, ", "));
    if (root.code() == absl::StatusCode::kDeadlineExceeded) {
      absl::StrAppend(&message, "; ", FlightDiagnosis());
    }
    if (!stuck.empty()) {
      absl::StrAppend(&message, "; ", stuck.size() == 1 ? "rank " : "ranks ",
                      absl::StrJoin(stuck, ", "), " still running ",
                      absl::FormatDuration(options_.stuck_grace),
                      " after the failure (a stage call that does not return)");
    }
    return absl::Status(root.code(), message);
  }

  // The first line of the flight analysis of the records taken at the root
  // failure (the ones written into the flight directory).
  std::string FlightDiagnosis() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!dump_status_.ok()) {
      return absl::StrCat("flight records not written: ", dump_status_.message());
    }
    std::vector<FlightRecord> records;
    for (const std::string& json : snapshots_) {
      absl::StatusOr<FlightRecord> r = ParseFlightRecord(json);
      if (r.ok()) records.push_back(*std::move(r));
    }
    const std::string where =
        options_.flight_dir.empty() ? "" : absl::StrCat(" (records in ", options_.flight_dir, ")");
    FlightAnalysis analysis = AnalyzeFlightRecords(records);
    return absl::StrCat("flight analysis", where, ": ",
                        analysis.ok() ? "all operations matched" : analysis.first);
  }

  ReplayResult Collect() const {
    ReplayResult result;
    std::vector<double> exposed(options_.steps, 0.0);
    for (int step = 0; step < options_.steps; ++step) {
      double start = 0, end = 0, loss = 0;
      for (int w = 0; w < world_size_; ++w) {
        const StepResult& r = outcomes_[w].steps[step];
        start = w == 0 ? r.start_us : std::min(start, r.start_us);
        end = std::max(end, r.end_us);
        loss += r.loss;
        exposed[step] = std::max(exposed[step], r.exposed_reduce_us);
      }
      result.step_loss.push_back(loss);
      result.step_us.push_back(end - start);
    }
    result.exposed_reduce_us = Median(exposed);
    result.peak_in_flight_bytes = world_->PeakInFlightBytes();
    for (int w = 0; w < world_size_; ++w) {
      const RankOutcome& out = outcomes_[w];
      const int rank = w % schedule_.pp;
      std::vector<double> rank_exposed;
      for (const StepResult& r : out.steps) {
        rank_exposed.push_back(r.exposed_reduce_us);
        if (!options_.record_timeline) continue;
        result.timeline.spans.insert(result.timeline.spans.end(), r.timeline.spans.begin(),
                                     r.timeline.spans.end());
        result.timeline.memory.insert(result.timeline.memory.end(), r.timeline.memory.begin(),
                                      r.timeline.memory.end());
      }
      result.ranks.push_back({w, rank, w / schedule_.pp, out.peak_bytes,
                              plans_[rank].peak.bytes, plans_[rank].arena.arena_bytes,
                              out.heap_allocations, Median(rank_exposed)});
    }
    return result;
  }

  const Schedule& schedule_;
  const Executable& executable_;
  const absl::Span<const RankMemoryPlan> plans_;
  StageFactory& factory_;
  const InProcessOptions& options_;
  const int world_size_;
  const std::unique_ptr<InProcessWorld> world_;
  StepBarrier barrier_;
  std::vector<std::unique_ptr<FlightRecorder>> recorders_;  // by world rank
  std::vector<RankOutcome> outcomes_;  // slot w written by thread w only
  const std::chrono::steady_clock::time_point origin_;

  absl::Mutex factory_mu_;
  absl::Mutex mu_;
  int root_rank_ ABSL_GUARDED_BY(mu_) = -1;
  // Rank threads that have ended; outcomes_[w] is read only once slot w is
  // set (a stuck thread may still write its own).
  std::vector<bool> ended_rank_ ABSL_GUARDED_BY(mu_) = std::vector<bool>(world_size_, false);
  int ended_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> snapshots_ ABSL_GUARDED_BY(mu_);  // flight records at the root failure
  absl::Status dump_status_ ABSL_GUARDED_BY(mu_);
};

absl::Status CheckInputs(const Schedule& schedule, const Executable& executable,
                         absl::Span<const RankMemoryPlan> plans, const InProcessOptions& options) {
  if (options.dp < 1) return absl::InvalidArgumentError(absl::StrCat("--dp must be >= 1, got ", options.dp));
  if (options.steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--steps must be >= 1, got ", options.steps));
  }
  if (plans.size() != static_cast<size_t>(schedule.pp) ||
      executable.ranks.size() != static_cast<size_t>(schedule.pp)) {
    return absl::InvalidArgumentError(absl::StrCat("the plans (", plans.size(),
                                                   ") and the executable (", executable.ranks.size(),
                                                   ") must have one entry per rank (", schedule.pp, ")"));
  }
  for (int r = 0; r < schedule.pp; ++r) {
    const size_t buffers = executable.ranks[r].buffer_bytes.size();
    if (plans[r].buffers.buffers.size() != buffers) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", r, ": the plan has ", plans[r].buffers.buffers.size(),
                       " buffers but the executable ", buffers));
    }
    if (options.buffers == BufferMode::kArena && plans[r].arena.offsets.size() != buffers) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", r, ": arena buffers need a plan with an arena"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

double ReplayResult::median_step_us() const { return Median(step_us); }

absl::StatusOr<ReplayResult> RunInProcess(const Schedule& schedule, const Executable& executable,
                                          absl::Span<const RankMemoryPlan> plans,
                                          StageFactory& factory, const InProcessOptions& options) {
  RETURN_IF_ERROR(CheckInputs(schedule, executable, plans, options));
  if (!options.flight_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.flight_dir, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot create the flight directory ", options.flight_dir, ": ",
                       ec.message()));
    }
  }
  Run run(schedule, executable, plans, factory, options);
  return run.Execute();
}

}  // namespace jitpipe
