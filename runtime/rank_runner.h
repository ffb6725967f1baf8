// One world rank of a replay, with everything it owns: its Stages (made by
// the caller's StageFactory), its buffer provider (tracked or the plan's
// arena), its flight recorder, the recording transport over the backend's
// Transport, and its RankExecutor. The replay driver (replay.h) runs one per
// local rank; a runtime with its own launcher runs one per process over any
// Transport:
//
//   ASSIGN_OR_RETURN(std::unique_ptr<RankRunner> me,
//                    RankRunner::Create(plan.schedule, plan.executable, plan.plans,
//                                       world_rank, transport, my_stages, options));
//   RETURN_IF_ERROR(me->Start(std::chrono::steady_clock::now()));
//   for (int step = 0; step < steps; ++step) {
//     absl::StatusOr<StepResult> r = me->RunStep();
//     if (!r.ok()) return me->Fail(r.status(), flight_dir);  // dump + abort
//   }
//
// Layout: world rank w is pipeline rank w mod pp of replica w / pp
// (rank_executor.h), so transport.rank() must be w and transport.size()
// pp x options.dp. Pipeline rank r's gradients are reduced over its
// data-parallel group {r, r + pp, ..., r + (dp - 1) pp}: with dp > 1 every
// process of the job requests DataParallelGroups(pp, dp) from its world
// (World::CreateGroups) before the first step; the replay driver does.
//
// Thread safety: one thread drives a runner; Snapshot() may be called from
// another (the flight recorder is thread-safe).
#ifndef JITPIPE_RUNTIME_RANK_RUNNER_H_
#define JITPIPE_RUNTIME_RANK_RUNNER_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "comm/flight_recorder.h"
#include "comm/transport.h"
#include "memory/memory_plan.h"
#include "runtime/replay_options.h"
#include "scheduler/ir/schedule.h"
#include "stages/exec/buffer_provider.h"
#include "stages/exec/rank_executable.h"
#include "stages/exec/rank_executor.h"
#include "stages/exec/stage.h"

namespace jitpipe {

// The collective groups a replay of pp x dp ranks reduces over, one per
// pipeline rank r: {r, r + pp, ..., r + (dp - 1) pp}, the group index being
// the replica. REQUIRES: pp >= 1, dp >= 1.
std::vector<Group> DataParallelGroups(int pp, int dp);

class RankRunner {
 public:
  // Borrowed, and must outlive the runner: schedule, executable, plans (one
  // per pipeline rank), transport. The rank's stages are made here with
  // factory.Make(stage, replica). Errors: InvalidArgument when `world_rank`
  // is outside the layout or its plan does not fit the executable; the
  // factory's error.
  static absl::StatusOr<std::unique_ptr<RankRunner>> Create(
      const Schedule& schedule, const Executable& executable,
      absl::Span<const RankMemoryPlan> plans, int world_rank, Transport& transport,
      StageFactory& factory, const ReplayOptions& options);

  RankRunner(const RankRunner&) = delete;
  RankRunner& operator=(const RankRunner&) = delete;
  ~RankRunner();

  // Creates the executor, its timeline's time zero `origin` (shared by the
  // ranks of a process; taken after the first barrier so that processes
  // line up). Errors: RankExecutor::Create's. REQUIRES: called once.
  absl::Status Start(std::chrono::steady_clock::time_point origin);
  bool started() const { return executor_ != nullptr; }

  // One step of the rank's program (RankExecutor::RunStep). REQUIRES: Start.
  absl::StatusOr<StepResult> RunStep();

  // How the world pairs transfers, recorded for fr-analyze.
  void SetFlightMatching(FlightMatching matching) { recorder_.SetMatching(matching); }

  // The rank's flight record as it stands, with `reason` (FlightRecorder::ToJson).
  std::string Snapshot(absl::string_view reason) const { return recorder_.ToJson(reason); }

  // The failure path of a runner on its own: dumps its record into `dir`
  // (when set), aborts the transport and returns `status`.
  absl::Status Fail(const absl::Status& status, const std::string& dir);

  int world_rank() const { return world_rank_; }
  int rank() const { return rank_; }  // pipeline rank
  int replica() const { return replica_; }
  Transport& transport() { return recorded_; }
  FlightRecorder& recorder() { return recorder_; }
  // Shared so that a failed run can hand the buffers to the backend
  // (World::RetainUntilEnd) instead of freeing them under pending operations.
  const std::shared_ptr<BufferProvider>& buffers() const { return buffers_; }

 private:
  RankRunner(const Schedule& schedule, const Executable& executable, int world_rank, int pp,
             Transport& transport, std::shared_ptr<BufferProvider> buffers,
             const ReplayOptions& options);

  const Schedule& schedule_;
  const Executable& executable_;
  const ReplayOptions options_;
  const int world_rank_;
  const int rank_;
  const int replica_;
  // Declared so that the executor (and its reduction thread) goes first,
  // before the transport, the recorder, the buffers and the stages it uses.
  std::vector<std::unique_ptr<Stage>> owned_stages_;
  std::vector<Stage*> stages_;  // by stage id, null for other ranks' stages
  std::shared_ptr<BufferProvider> buffers_;
  FlightRecorder recorder_;
  RecordingTransport recorded_;
  std::unique_ptr<RankExecutor> executor_;
};

}  // namespace jitpipe

#endif  // JITPIPE_RUNTIME_RANK_RUNNER_H_
