#include "stages/mpi_runtime.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "comm/flight_analysis.h"
#include "comm/flight_recorder.h"
#include "scheduler/passes/validate.h"
#include "stages/buffer_provider.h"
#include "stages/mpi_outcome.h"
#include "stages/rank_executor.h"

namespace jitpipe {
namespace {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

absl::Status CheckInputs(const Schedule& schedule, const Executable& executable,
                         absl::Span<const RankMemoryPlan> plans, const MpiContext& context,
                         const InProcessOptions& options) {
  const int needed = schedule.pp * options.dp;
  if (context.size() != needed) {
    return absl::InvalidArgumentError(
        absl::StrCat("the MPI world has ", context.size(),
                     context.size() == 1 ? " process" : " processes", " but pp ", schedule.pp,
                     " x dp ", options.dp, " needs ", needed, " (mpirun -np ", needed, ")"));
  }
  if (context.dp() != options.dp) {
    return absl::InvalidArgumentError(absl::StrCat("MPI was set up for dp ", context.dp(),
                                                   " but the replay has dp ", options.dp));
  }
  if (options.steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--steps must be >= 1, got ", options.steps));
  }
  if (plans.size() != static_cast<size_t>(schedule.pp) ||
      executable.ranks.size() != static_cast<size_t>(schedule.pp)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the plans (", plans.size(), ") and the executable (", executable.ranks.size(),
                     ") must have one entry per rank (", schedule.pp, ")"));
  }
  const int rank = context.rank() % schedule.pp;
  if (options.buffers != BufferMode::kArena) return absl::OkStatus();
  if (plans[rank].arena.offsets.size() != executable.ranks[rank].buffer_bytes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": arena buffers need a plan with an arena"));
  }
  if (absl::Status strict = Validate(schedule, {CommSemantics::kStrict, 0}); !strict.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "arena buffers over MPI need a program that is deadlock-free under rendezvous "
        "semantics (lower it with --recv jit-rendezvous): ",
        strict.message()));
  }
  return absl::OkStatus();
}

// This process's run.
class MpiRun {
 public:
  MpiRun(const Schedule& schedule, const Executable& executable,
         absl::Span<const RankMemoryPlan> plans, StageFactory& factory, MpiContext& context,
         const InProcessOptions& options)
      : schedule_(schedule),
        executable_(executable),
        plans_(plans),
        factory_(factory),
        context_(context),
        options_(options),
        world_rank_(context.rank()),
        rank_(world_rank_ % schedule.pp),
        replica_(world_rank_ / schedule.pp),
        recorder_(world_rank_, context.size()),
        transport_(&context.transport(), &recorder_) {}

  absl::StatusOr<ReplayResult> Execute() {
    MpiRankOutcome outcome;
    std::thread watchdog([this] { WatchForAStuckStage(); });
    absl::Status status = RunRank(outcome);
    const bool settled = Settle();
    watchdog.join();
    if (!settled) {
      // The watchdog reported this rank stuck and ends the process; the
      // stage call returned meanwhile, too late to take part.
      for (;;) absl::SleepFor(absl::Seconds(1));
    }
    absl::StatusOr<std::vector<std::string>> parts;
    if (status.ok()) {
      parts = context_.Gather(EncodeRankOutcome(outcome), options_.timeout);
      status = parts.status();
      if (!status.ok()) status = InContext(status, "gathering the results");
    }
    if (!status.ok()) return Fail(status);
    if (world_rank_ != 0) return OwnPart(outcome);
    std::vector<MpiRankOutcome> outcomes;
    for (size_t w = 0; w < parts->size(); ++w) {
      ASSIGN_OR_RETURN(MpiRankOutcome decoded, DecodeRankOutcome((*parts)[w]));
      outcomes.push_back(std::move(decoded));
    }
    return Merge(outcomes);
  }

 private:
  double NowUs() const {
    const std::chrono::steady_clock::time_point origin(
        std::chrono::steady_clock::duration(origin_ticks_.load()));
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin)
        .count();
  }

  // The main thread, once RunRank has returned: true when the run goes on
  // here, false when the watchdog has taken over the failure path.
  bool Settle() {
    int running = kRunning;
    return state_.compare_exchange_strong(running, kSettled);
  }

  // The watchdog thread. Every wait of the main thread is bounded by the
  // timeout, but a stage call is not: a rank stuck in one never reaches the
  // failure path, so its flight record and report would be missing and the
  // others would wait for it. Once the job has been aborted for
  // stuck_grace while RunRank is still running, the watchdog does the
  // failure path for it (dump, report to rank 0, marked stuck) and ends the
  // process: rank 0 ends the job with MPI_Abort after its report, and a
  // process that outlives that exits here with status 1.
  void WatchForAStuckStage() {
    std::optional<absl::Time> aborted_at;
    while (state_.load() == kRunning) {
      if (!aborted_at.has_value() && context_.aborted()) aborted_at = absl::Now();
      if (aborted_at.has_value() && absl::Now() - *aborted_at >= options_.stuck_grace) {
        int running = kRunning;
        if (!state_.compare_exchange_strong(running, kWatchdog)) return;
        ReportStuck();
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
  }

  // How long reports are collected after a failure: the others' waits end
  // within the timeout, a stuck rank's watchdog reports stuck_grace after
  // the abort.
  absl::Duration CollectGrace() const { return options_.timeout + options_.stuck_grace; }

  [[noreturn]] void ReportStuck() {
    const absl::Status status = absl::DeadlineExceededError(absl::StrCat(
        "rank ", world_rank_, ": still in a stage call ", absl::FormatDuration(options_.stuck_grace),
        " after the job was aborted"));
    absl::Status dumped;
    if (!options_.flight_dir.empty()) {
      dumped = recorder_.Dump(options_.flight_dir, status.message());
    }
    MpiRankFailure mine{world_rank_, status, NowUs(), recorder_.ToJson(status.message()),
                        std::string(dumped.message()), /*stuck=*/true};
    context_.CollectAfterFailure(EncodeRankFailure(mine), CollectGrace());
    // Rank 0's MPI_Abort ends this process; if it does not come, exit.
    absl::SleepFor(options_.timeout);
    std::fflush(nullptr);
    std::_Exit(1);
  }

  absl::Status InContext(const absl::Status& status, absl::string_view doing) const {
    return absl::Status(status.code(),
                        absl::StrCat("rank ", world_rank_, ", ", doing, ": ", status.message()));
  }

  absl::Status MakeStages() {
    stages_.assign(schedule_.num_stages(), nullptr);
    for (int s = 0; s < schedule_.num_stages(); ++s) {
      if (schedule_.RankOf(s) != rank_) continue;
      ASSIGN_OR_RETURN(std::unique_ptr<Stage> stage, factory_.Make(s, replica_));
      stages_[s] = stage.get();
      owned_stages_.push_back(std::move(stage));
    }
    return absl::OkStatus();
  }

  void MakeBuffers() {
    const RankExecutable& exe = executable_.ranks[rank_];
    if (options_.buffers == BufferMode::kArena) {
      const RankMemoryPlan& plan = plans_[rank_];
      buffers_ = std::make_shared<ArenaBuffers>(exe.buffer_bytes, plan.arena.offsets,
                                                plan.arena.arena_bytes, plan.options.alignment);
    } else {
      buffers_ = std::make_shared<TrackedBuffers>(exe.buffer_bytes);
    }
  }

  // Sets up the rank and runs its steps, a job barrier before each.
  absl::Status RunRank(MpiRankOutcome& out) {
    if (!options_.flight_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(options_.flight_dir, ec);
      if (ec) {
        return InContext(absl::InvalidArgumentError(ec.message()),
                         absl::StrCat("creating the flight directory ", options_.flight_dir));
      }
    }
    RETURN_IF_ERROR(MakeStages());
    MakeBuffers();
    for (int step = 0; step < options_.steps; ++step) {
      absl::Status arrived = context_.Barrier(options_.timeout);
      if (!arrived.ok()) return InContext(arrived, absl::StrCat("before step ", step));
      if (step == 0) {
        origin_ = std::chrono::steady_clock::now();
        origin_ticks_ = origin_.time_since_epoch().count();
        RankExecutorOptions eo{replica_,         options_.dp, options_.reduce,
                               options_.timeout, origin_,     options_.record_timeline};
        ASSIGN_OR_RETURN(executor_, RankExecutor::Create(schedule_, executable_, rank_, &transport_,
                                                         stages_, buffers_.get(), &recorder_, eo));
      }
      ASSIGN_OR_RETURN(StepResult result, executor_->RunStep());
      out.steps.push_back(std::move(result));
      if (world_rank_ == 0 && options_.on_step) options_.on_step(step + 1);
    }
    out.heap_allocations = buffers_->heap_allocations();
    return absl::OkStatus();
  }

  // The failure path (see the header): abort, dump, report to rank 0.
  absl::Status Fail(const absl::Status& status) {
    const double failed_at_us = NowUs();
    transport_.Abort(std::string(status.message()));
    if (buffers_ != nullptr) context_.RetainUntilEnd(buffers_);
    absl::Status dumped;
    if (!options_.flight_dir.empty()) {
      dumped = recorder_.Dump(options_.flight_dir, status.message());
    }
    MpiRankFailure mine{world_rank_, status, failed_at_us, recorder_.ToJson(status.message()),
                        std::string(dumped.message())};
    std::vector<std::optional<std::string>> payloads =
        context_.CollectAfterFailure(EncodeRankFailure(mine), CollectGrace());
    if (world_rank_ != 0) return status;
    MpiFailures failures(payloads.size());
    for (size_t w = 0; w < payloads.size(); ++w) {
      if (!payloads[w].has_value()) continue;
      absl::StatusOr<MpiRankFailure> decoded = DecodeRankFailure(*payloads[w]);
      if (decoded.ok()) failures[w] = *std::move(decoded);
    }
    failures[0] = mine;
    // A stuck process never reaches MPI_Finalize, which the others' would
    // wait for: the job ends with MPI_Abort once this report is out.
    for (const std::optional<MpiRankFailure>& failure : failures) {
      if (failure.has_value() && failure->stuck) context_.EndWithAbort();
    }
    return FailureReport(failures);
  }

  // Rank 0: keeps the others' records in its flight_dir and names the root
  // failure, how the others stopped and, for a timeout, the analysis.
  absl::Status FailureReport(const MpiFailures& failures) const {
    const int root = RootFailure(failures);
    const absl::Status& cause = failures[root]->status;
    std::string message(cause.message());
    if (std::string others = HowOthersStopped(failures, root); !others.empty()) {
      absl::StrAppend(&message, "; other ranks: ", others);
    }
    std::vector<FlightRecord> records;
    if (std::string unwritten = KeepRecords(failures, options_.flight_dir, records);
        !unwritten.empty()) {
      absl::StrAppend(&message, "; flight records not written: ", unwritten);
    }
    if (cause.code() == absl::StatusCode::kDeadlineExceeded) {
      const FlightAnalysis analysis = AnalyzeFlightRecords(records);
      absl::StrAppend(&message, "; flight analysis",
                      options_.flight_dir.empty()
                          ? ""
                          : absl::StrCat(" (records in ", options_.flight_dir, ")"),
                      ": ", analysis.ok() ? "all operations matched" : analysis.first);
    }
    return absl::Status(cause.code(), message);
  }

  RankReplay ReplayOf(int w, const MpiRankOutcome& out) const {
    const int rank = w % schedule_.pp;
    std::vector<double> exposed;
    int64_t peak = 0;
    for (const StepResult& r : out.steps) {
      exposed.push_back(r.exposed_reduce_us);
      peak = std::max(peak, r.peak_bytes);
    }
    return {w,
            rank,
            w / schedule_.pp,
            peak,
            plans_[rank].peak.bytes,
            plans_[rank].arena.arena_bytes,
            out.heap_allocations,
            Median(exposed)};
  }

  void AppendTimeline(const MpiRankOutcome& out, Timeline& timeline) const {
    if (!options_.record_timeline) return;
    for (const StepResult& r : out.steps) {
      timeline.spans.insert(timeline.spans.end(), r.timeline.spans.begin(), r.timeline.spans.end());
      timeline.memory.insert(timeline.memory.end(), r.timeline.memory.begin(),
                             r.timeline.memory.end());
    }
  }

  ReplayResult OwnPart(const MpiRankOutcome& out) const {
    ReplayResult result;
    for (const StepResult& r : out.steps) {
      result.step_loss.push_back(r.loss);
      result.step_us.push_back(r.end_us - r.start_us);
    }
    result.ranks.push_back(ReplayOf(world_rank_, out));
    result.exposed_reduce_us = result.ranks.back().exposed_reduce_us;
    AppendTimeline(out, result.timeline);
    return result;
  }

  // World rank 0: the outcomes of every world rank, as RunInProcess's.
  absl::StatusOr<ReplayResult> Merge(const std::vector<MpiRankOutcome>& outcomes) const {
    ReplayResult result;
    std::vector<double> exposed(options_.steps, 0.0);
    for (int step = 0; step < options_.steps; ++step) {
      double start = 0, end = 0, loss = 0;
      for (size_t w = 0; w < outcomes.size(); ++w) {
        if (outcomes[w].steps.size() != static_cast<size_t>(options_.steps)) {
          return absl::InternalError(
              absl::StrCat("rank ", w, " reported ", outcomes[w].steps.size(), " steps"));
        }
        const StepResult& r = outcomes[w].steps[step];
        start = w == 0 ? r.start_us : std::min(start, r.start_us);
        end = std::max(end, r.end_us);
        loss += r.loss;
        exposed[step] = std::max(exposed[step], r.exposed_reduce_us);
      }
      result.step_loss.push_back(loss);
      result.step_us.push_back(end - start);
    }
    result.exposed_reduce_us = Median(exposed);
    for (size_t w = 0; w < outcomes.size(); ++w) {
      result.ranks.push_back(ReplayOf(static_cast<int>(w), outcomes[w]));
      AppendTimeline(outcomes[w], result.timeline);
    }
    return result;
  }

  const Schedule& schedule_;
  const Executable& executable_;
  const absl::Span<const RankMemoryPlan> plans_;
  StageFactory& factory_;
  MpiContext& context_;
  const InProcessOptions& options_;
  // Who runs the failure path: the main thread (settled), or the watchdog
  // for a main thread stuck in a stage call.
  static constexpr int kRunning = 0, kSettled = 1, kWatchdog = 2;
  std::atomic<int> state_{kRunning};
  const int world_rank_;
  const int rank_;  // pipeline rank
  const int replica_;
  std::chrono::steady_clock::time_point origin_ = std::chrono::steady_clock::now();
  // origin_ for NowUs(), which the watchdog thread calls too.
  std::atomic<std::chrono::steady_clock::rep> origin_ticks_{origin_.time_since_epoch().count()};

  // Declared so that the executor (and its reduction thread) goes first,
  // before the transport, the recorder, the buffers and the stages it uses.
  std::vector<std::unique_ptr<Stage>> owned_stages_;
  std::vector<Stage*> stages_;               // by stage id, null for other ranks' stages
  std::shared_ptr<BufferProvider> buffers_;  // shared: see RetainUntilEnd
  FlightRecorder recorder_;
  RecordingTransport transport_;
  std::unique_ptr<RankExecutor> executor_;
};

// One stage's gradients on the wire: stage, replica, element count, floats.
void AppendGradients(int stage, int replica, const std::vector<float>& grads, std::string& out) {
  const int32_t header[2] = {stage, replica};
  const int64_t count = static_cast<int64_t>(grads.size());
  out.append(reinterpret_cast<const char*>(header), sizeof(header));
  out.append(reinterpret_cast<const char*>(&count), sizeof(count));
  out.append(reinterpret_cast<const char*>(grads.data()), grads.size() * sizeof(float));
}

// Replays every record of `bytes` into the factory's stages' FinishStep.
absl::Status RecordGradients(absl::string_view bytes, MlpStageFactory& factory) {
  while (!bytes.empty()) {
    int32_t header[2];
    int64_t count = 0;
    if (bytes.size() < sizeof(header) + sizeof(count)) {
      return absl::InvalidArgumentError("truncated gradient record");
    }
    std::memcpy(header, bytes.data(), sizeof(header));
    std::memcpy(&count, bytes.data() + sizeof(header), sizeof(count));
    bytes.remove_prefix(sizeof(header) + sizeof(count));
    const size_t size = static_cast<size_t>(count) * sizeof(float);
    if (count < 0 || bytes.size() < size) {
      return absl::InvalidArgumentError("truncated gradient record");
    }
    ASSIGN_OR_RETURN(std::unique_ptr<Stage> stage, factory.Make(header[0], header[1]));
    RETURN_IF_ERROR(
        stage->FinishStep(ConstBytes(reinterpret_cast<const std::byte*>(bytes.data()), size)));
    bytes.remove_prefix(size);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GatherMlpGradients(const Schedule& schedule, MlpStageFactory& factory,
                                MpiContext& context, absl::Duration timeout) {
  const int rank = context.pipeline_rank();
  const int replica = context.replica();
  std::string mine;
  for (int s = 0; s < schedule.num_stages(); ++s) {
    if (schedule.RankOf(s) == rank)
      AppendGradients(s, replica, factory.FinishedGrads(s, replica), mine);
  }
  ASSIGN_OR_RETURN(std::vector<std::string> parts, context.Gather(mine, timeout));
  for (size_t w = 1; w < parts.size(); ++w) RETURN_IF_ERROR(RecordGradients(parts[w], factory));
  return absl::OkStatus();
}

absl::StatusOr<ReplayResult> RunMpiReplay(const Schedule& schedule, const Executable& executable,
                                          absl::Span<const RankMemoryPlan> plans,
                                          StageFactory& factory, MpiContext& context,
                                          const InProcessOptions& options) {
  RETURN_IF_ERROR(CheckInputs(schedule, executable, plans, context, options));
  MpiRun run(schedule, executable, plans, factory, context, options);
  return run.Execute();
}

}  // namespace jitpipe
