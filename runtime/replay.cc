#include "runtime/replay.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "comm/inproc/inproc_world.h"
#include "runtime/rank_report.h"
#include "runtime/rank_runner.h"
#include "runtime/replay_failure.h"
#include "runtime/replay_merge.h"
#include "runtime/replay_plan.h"
#include "scheduler/analysis/validate.h"

namespace jitpipe {
namespace {

absl::Status InContext(const absl::Status& status, int world_rank, absl::string_view doing) {
  return absl::Status(status.code(),
                      absl::StrCat("rank ", world_rank, ", ", doing, ": ", status.message()));
}

// A local rank of the run: its runner and what its thread leaves behind.
struct LocalRank {
  int world_rank = 0;
  std::unique_ptr<RankRunner> runner;  // null when it could not be made
  absl::Status status;                 // written by its thread only
  RankOutcome outcome;                 // written by its thread only
  double failed_at_us = 0;
};

// One process's share of a run.
class Replay {
 public:
  Replay(const Schedule& schedule, const Executable& executable,
         absl::Span<const RankMemoryPlan> plans, World& world, const ReplayOptions& options)
      : schedule_(schedule), executable_(executable), plans_(plans), world_(world),
        options_(options), local_(world.local_ranks().size()),
        ended_(local_.size(), false), records_(local_.size()), dump_errors_(local_.size()) {}
  ~Replay() {
    absl::MutexLock lock(&hook_->mu);
    hook_->replay = nullptr;
  }
  Replay(const Replay&) = delete;
  Replay& operator=(const Replay&) = delete;

  absl::StatusOr<ReplayResult> Execute(StageFactory& factory) {
    // The runners are made here, one after the other, so that a factory
    // need not be thread-safe and every rank has its recorder before any
    // rank can fail.
    for (size_t i = 0; i < local_.size(); ++i) {
      LocalRank& me = local_[i];
      me.world_rank = world_.local_ranks()[i];
      absl::StatusOr<std::unique_ptr<RankRunner>> made =
          RankRunner::Create(schedule_, executable_, plans_, me.world_rank,
                             world_.transport(me.world_rank), factory, options_);
      if (made.ok()) {
        me.runner = *std::move(made);
        me.runner->SetFlightMatching(world_.p2p_ordering() == P2pOrdering::kByTag
                                         ? FlightMatching::kByTag
                                         : FlightMatching::kByOrder);
      }
      me.status = made.status();
    }
    if (!options_.flight_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(options_.flight_dir, ec);
      for (LocalRank& me : local_) {
        if (ec && me.status.ok()) {
          me.status = InContext(absl::InvalidArgumentError(ec.message()), me.world_rank,
                                absl::StrCat("creating the flight directory ", options_.flight_dir));
        }
      }
    }
    StartWatchdog();
    std::vector<std::thread> threads;
    for (size_t i = 0; i < local_.size(); ++i) threads.emplace_back([this, i] { RankMain(i); });
    const std::vector<size_t> stuck = AwaitRanks();
    if (!stuck.empty()) return EndStuck(stuck, threads);
    for (std::thread& t : threads) t.join();

    bool failed = false;
    for (const LocalRank& me : local_) failed |= !me.status.ok();
    if (failed) return Failed({});
    if (world_.local_ranks().size() == static_cast<size_t>(world_.size())) return Merge(Mine());
    std::vector<std::string> payloads;
    for (const LocalRank& me : local_) payloads.push_back(EncodeRankOutcome(me.outcome));
    absl::StatusOr<std::vector<std::string>> parts = world_.Gather(payloads, options_.timeout);
    if (!parts.ok()) {
      for (LocalRank& me : local_) {
        me.status = InContext(parts.status(), me.world_rank, "gathering the results");
        Fail(me);
      }
      return Failed({});
    }
    if (!world_.is_root()) return Merge(Mine());  // its own ranks' part
    std::vector<RankOutcome> decoded(parts->size());
    std::vector<RankOutcomeOf> all;
    for (size_t w = 0; w < parts->size(); ++w) {
      const int world_rank = static_cast<int>(w);
      if (const LocalRank* me = Local(world_rank); me != nullptr) {
        all.push_back({world_rank, &me->outcome});
        continue;
      }
      ASSIGN_OR_RETURN(decoded[w], DecodeRankOutcome((*parts)[w]));
      all.push_back({world_rank, &decoded[w]});
    }
    return Merge(all);
  }

 private:
  double NowUs() const {
    absl::MutexLock lock(&mu_);
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin_)
        .count();
  }

  const LocalRank* Local(int world_rank) const {
    for (const LocalRank& me : local_) {
      if (me.world_rank == world_rank) return &me;
    }
    return nullptr;
  }

  // The body of local rank i's thread: a barrier before each step and after
  // the last, every one bounded by the timeout.
  void RankMain(size_t i) {
    LocalRank& me = local_[i];
    const int w = me.world_rank;
    // Every step's record is allocated before the first step, so memory
    // stays flat while the steps run (tests/runtime/soak_test.cc).
    if (me.status.ok()) me.outcome.steps.resize(options_.steps);
    for (int step = 0; me.status.ok() && step < options_.steps; ++step) {
      absl::Status arrived = world_.Barrier(w, options_.timeout);
      if (!arrived.ok()) {
        me.status = arrived.code() == absl::StatusCode::kDeadlineExceeded
                        ? InContext(arrived, w, absl::StrCat("before step ", step))
                        : arrived;
        break;
      }
      if (step == 0) me.status = me.runner->Start(Origin());
      if (!me.status.ok()) break;
      absl::StatusOr<StepResult> result = me.runner->RunStep();
      if (!result.ok()) {
        me.status = result.status();
        break;
      }
      me.outcome.steps[step] = *std::move(result);
      if (w == 0 && options_.on_step) options_.on_step(step + 1);
    }
    if (me.status.ok()) {
      absl::Status arrived = world_.Barrier(w, options_.timeout);
      if (arrived.code() == absl::StatusCode::kDeadlineExceeded) {
        arrived = InContext(arrived, w, "after the last step");
      }
      me.status = arrived;
    }
    if (!me.status.ok()) Fail(me);
    if (me.runner != nullptr) {
      me.outcome.peak_bytes = me.runner->buffers()->peak_bytes();
      me.outcome.heap_allocations = me.runner->buffers()->heap_allocations();
      me.outcome.allocator_peak_bytes = me.runner->buffers()->allocator_peak_bytes();
    }
    absl::MutexLock lock(&mu_);
    ended_[i] = true;
    ++num_ended_;
  }

  // Time zero: the moment this process's first rank left the first barrier.
  std::chrono::steady_clock::time_point Origin() {
    absl::MutexLock lock(&mu_);
    if (!origin_set_) {
      origin_ = std::chrono::steady_clock::now();
      origin_set_ = true;
    }
    return origin_;
  }

  // A local rank failed. The first failure of the process takes every local
  // rank's flight record as it stands -- before the abort disturbs it (sends
  // refused because the world is down) -- and writes them into the flight
  // directory; then the world is aborted, so that no rank waits on.
  void Fail(LocalRank& me) {
    const std::string reason =
        RankFailed(me.world_rank, me.status.message());
    me.failed_at_us = NowUs();
    {
      absl::MutexLock lock(&mu_);
      if (!failed_at_.has_value()) {
        failed_at_ = absl::Now();
        TakeRecordsLocked(reason);
      }
    }
    world_.Abort(me.world_rank, std::string(me.status.message()));
    if (me.runner != nullptr) world_.RetainUntilEnd(me.runner->buffers());
  }

  // Device backends watch their pending operations on a thread of their
  // own (host backends' waits carry the timeout; there this does nothing).
  // On a timeout the flight records are taken as a failing rank's are,
  // before the backend aborts its communicators. The world may outlive this
  // run, so its handler reaches the run through a hook the destructor cuts.
  void StartWatchdog() {
    world_.StartWatchdog(options_.timeout,
                         [hook = hook_](int world_rank, const absl::Status& status) {
                           absl::MutexLock lock(&hook->mu);
                           if (hook->replay != nullptr) hook->replay->TimedOut(world_rank, status);
                         });
  }

  void TimedOut(int world_rank, const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    if (failed_at_.has_value()) return;
    failed_at_ = absl::Now();
    TakeRecordsLocked(RankFailed(world_rank, status.message()));
  }

  void TakeRecordsLocked(const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (size_t j = 0; j < local_.size(); ++j) {
      if (local_[j].runner == nullptr) continue;
      records_[j] = local_[j].runner->Snapshot(reason);
      if (options_.flight_dir.empty()) continue;
      const absl::Status written = WriteFileAtomically(
          absl::StrCat(options_.flight_dir, "/rank_", local_[j].world_rank, ".json"), records_[j]);
      dump_errors_[j] = std::string(written.message());
    }
  }

  // Waits until every local rank has ended, or the job was aborted and
  // stuck_grace has passed since; returns the ranks still running then.
  std::vector<size_t> AwaitRanks() {
    std::optional<absl::Time> aborted_at;
    absl::MutexLock lock(&mu_);
    auto all_ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return num_ended_ == local_.size();
    };
    while (!mu_.AwaitWithTimeout(absl::Condition(&all_ended), absl::Milliseconds(10))) {
      if (!aborted_at.has_value()) {
        if (failed_at_.has_value()) {
          aborted_at = *failed_at_;
        } else {
          mu_.Unlock();  // a remote abort: the backend polls for its notice
          const bool aborted = world_.aborted();
          mu_.Lock();
          if (aborted) aborted_at = absl::Now();
        }
      }
      if (aborted_at.has_value() && absl::Now() - *aborted_at >= options_.stuck_grace &&
          !all_ended()) {
        std::vector<size_t> stuck;
        for (size_t i = 0; i < local_.size(); ++i) {
          if (!ended_[i]) stuck.push_back(i);
        }
        if (!failed_at_.has_value()) {  // no local rank failed: take the records now
          failed_at_ = absl::Now();
          TakeRecordsLocked(absl::StrCat("rank ", local_[stuck[0]].world_rank,
                                         " stuck in a stage call"));
        }
        return stuck;
      }
    }
    return {};
  }

  // Some local ranks are in stage calls that do not return: report them,
  // then end the process through on_stuck (see ReplayOptions).
  absl::Status EndStuck(const std::vector<size_t>& stuck, std::vector<std::thread>& threads) {
    const absl::Status report = Failed(stuck);
    if (options_.on_stuck) {
      options_.on_stuck(report, world_);
    } else {
      std::fprintf(stderr, "jitpipe: %s\n", std::string(report.message()).c_str());
      std::fflush(nullptr);
      world_.LeaveBeforeExit();
      std::_Exit(1);
    }
    for (std::thread& t : threads) t.join();
    return report;
  }

  // The failure path once the local ranks have ended (or are stuck): hand
  // every local rank's failure to rank 0; there, the report
  // (replay_failure.h).
  absl::Status Failed(const std::vector<size_t>& stuck) {
    std::vector<RankFailure> mine;
    {
      absl::MutexLock lock(&mu_);
      for (size_t i = 0; i < local_.size(); ++i) {
        const LocalRank& me = local_[i];
        const bool is_stuck = std::find(stuck.begin(), stuck.end(), i) != stuck.end();
        // A stuck rank's thread still runs and writes its status and
        // failure time when its stage call returns: read neither (its
        // failure is that it is stuck; it has not failed otherwise).
        mine.push_back(FailureOf({me.world_rank, is_stuck ? absl::OkStatus() : me.status,
                                  is_stuck, is_stuck ? 0.0 : me.failed_at_us, records_[i],
                                  dump_errors_[i]},
                                 options_.stuck_grace));
      }
    }
    return ExchangeFailures(world_, mine, options_);
  }

  // This process's ranks' outcomes, in local order.
  std::vector<RankOutcomeOf> Mine() const {
    std::vector<RankOutcomeOf> mine;
    for (const LocalRank& me : local_) mine.push_back({me.world_rank, &me.outcome});
    return mine;
  }

  absl::StatusOr<ReplayResult> Merge(const std::vector<RankOutcomeOf>& ranks) const {
    return MergeOutcomes(ranks, {schedule_.pp, options_.steps, plans_, &executable_,
                                 options_.record_timeline, world_.PeakInFlightBytes()});
  }

  const Schedule& schedule_;
  const Executable& executable_;
  const absl::Span<const RankMemoryPlan> plans_;
  World& world_;
  const ReplayOptions& options_;
  // Slot i is written by local rank i's thread, read once it has ended.
  std::vector<LocalRank> local_;

  // What the watchdog's handler reaches this run through (StartWatchdog).
  struct WatchdogHook {
    absl::Mutex mu;
    Replay* replay ABSL_GUARDED_BY(mu) = nullptr;
  };
  const std::shared_ptr<WatchdogHook> hook_ = MakeHook(this);
  static std::shared_ptr<WatchdogHook> MakeHook(Replay* replay) {
    auto hook = std::make_shared<WatchdogHook>();
    absl::MutexLock lock(&hook->mu);
    hook->replay = replay;
    return hook;
  }

  mutable absl::Mutex mu_;
  std::chrono::steady_clock::time_point origin_ ABSL_GUARDED_BY(mu_) =
      std::chrono::steady_clock::now();
  bool origin_set_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<bool> ended_ ABSL_GUARDED_BY(mu_);
  size_t num_ended_ ABSL_GUARDED_BY(mu_) = 0;
  // The first local failure, and the records taken then (by local index).
  std::optional<absl::Time> failed_at_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> records_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> dump_errors_ ABSL_GUARDED_BY(mu_);
};

absl::Status CheckInputs(const Schedule& schedule, const Executable& executable,
                         absl::Span<const RankMemoryPlan> plans, const World& world,
                         const ReplayOptions& options) {
  RETURN_IF_ERROR(CheckReplayWorld(schedule.pp, options.dp));
  if (options.steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--steps must be >= 1, got ", options.steps));
  }
  RETURN_IF_ERROR(world.CheckSize(schedule.pp * options.dp,
                                  absl::StrCat("pp ", schedule.pp, " x dp ", options.dp)));
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
  // A backend that matches transfers in order (NCCL) runs only programs
  // proven for its FIFOs.
  if (world.p2p_ordering() != P2pOrdering::kByTag) {
    if (absl::Status order = CheckProgramOrder(schedule, world.p2p_ordering()); !order.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("over ", world.name(), ": ", order.message()));
    }
  }
  // With arena buffers a rank completes its sends before their bytes are
  // reused; where a send completes only once its receive is posted, that
  // wait must not be able to close a cycle.
  if (options.buffers == BufferMode::kArena &&
      world.send_completion() == SendCompletion::kRendezvous) {
    if (absl::Status strict = Validate(schedule, {CommSemantics::kStrict, 0}); !strict.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "arena buffers over ", world.name(),
          " need a program that is deadlock-free under "
          "rendezvous semantics (lower it with --recv jit-rendezvous): ",
          strict.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

double ReplayResult::median_step_us() const { return MedianOf(step_us); }

absl::StatusOr<ReplayResult> RunReplay(const Schedule& schedule, const Executable& executable,
                                       absl::Span<const RankMemoryPlan> plans,
                                       StageFactory& factory, World& world,
                                       const ReplayOptions& options) {
  RETURN_IF_ERROR(CheckInputs(schedule, executable, plans, world, options));
  // Every process asks for the same groups, before any rank can reduce.
  if (absl::Status groups =
          world.CreateGroups(DataParallelGroups(schedule.pp, options.dp), options.timeout);
      !groups.ok()) {
    return absl::Status(groups.code(), absl::StrCat("requesting the data-parallel groups: ",
                                                    groups.message()));
  }
  Replay replay(schedule, executable, plans, world, options);
  return replay.Execute(factory);
}

absl::StatusOr<ReplayResult> RunInProcess(const Schedule& schedule, const Executable& executable,
                                          absl::Span<const RankMemoryPlan> plans,
                                          StageFactory& factory, const ReplayOptions& options) {
  RETURN_IF_ERROR(CheckReplayWorld(schedule.pp, options.dp));
  std::unique_ptr<InProcessWorld> world = CreateInProcessWorld(schedule.pp * options.dp);
  return RunReplay(schedule, executable, plans, factory, *world, options);
}

absl::Status CheckReplayWorld(int pp, int dp) {
  if (dp < 1) return absl::InvalidArgumentError(absl::StrCat("--dp must be >= 1, got ", dp));
  const int64_t ranks = int64_t{pp} * dp;
  if (ranks > kMaxReplayRanks) {
    return absl::InvalidArgumentError(absl::StrCat("pp ", pp, " x dp ", dp, " = ", ranks,
                                                   " ranks exceeds the limit of ",
                                                   kMaxReplayRanks, " replayed ranks"));
  }
  return absl::OkStatus();
}

}  // namespace jitpipe
