#include "runtime/rank_runner.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "stages/device/device_buffers.h"

namespace jitpipe {
namespace {

// The rank's provider: the CPU's over a host transport, the device's over
// a device backend (stages/device/device_buffers.h).
absl::StatusOr<std::shared_ptr<BufferProvider>> MakeBuffers(const RankExecutable& exe,
                                                            const RankMemoryPlan& plan,
                                                            BufferMode mode,
                                                            Transport& transport) {
  if (transport.device_streams() != nullptr) {
    absl::StatusOr<std::unique_ptr<BufferProvider>> device =
        mode == BufferMode::kArena
            ? MakeDeviceArenaBuffers(exe.buffer_bytes, plan.arena.offsets, plan.arena.arena_bytes,
                                     &transport)
            : MakeDeviceJitBuffers(exe.buffer_bytes, &transport);
    if (!device.ok()) return device.status();
    return std::shared_ptr<BufferProvider>(*std::move(device));
  }
  if (mode == BufferMode::kArena) {
    return std::shared_ptr<BufferProvider>(std::make_shared<ArenaBuffers>(
        exe.buffer_bytes, plan.arena.offsets, plan.arena.arena_bytes, plan.options.alignment));
  }
  return std::shared_ptr<BufferProvider>(std::make_shared<TrackedBuffers>(exe.buffer_bytes));
}

}  // namespace

std::vector<Group> DataParallelGroups(int pp, int dp) {
  std::vector<Group> groups(static_cast<size_t>(pp));
  for (int r = 0; r < pp; ++r) {
    for (int replica = 0; replica < dp; ++replica) groups[r].ranks.push_back(r + replica * pp);
  }
  return groups;
}

absl::StatusOr<std::unique_ptr<RankRunner>> RankRunner::Create(
    const Schedule& schedule, const Executable& executable, absl::Span<const RankMemoryPlan> plans,
    int world_rank, Transport& transport, StageFactory& factory, const ReplayOptions& options) {
  const int pp = schedule.pp;
  if (options.dp < 1 || world_rank < 0 || world_rank >= pp * options.dp) {
    return absl::InvalidArgumentError(absl::StrCat("world rank ", world_rank,
                                                   " is outside pp ", pp, " x dp ", options.dp));
  }
  const int rank = world_rank % pp;
  if (plans.size() != static_cast<size_t>(pp) || executable.ranks.size() != static_cast<size_t>(pp)) {
    return absl::InvalidArgumentError(absl::StrCat("the plans (", plans.size(),
                                                   ") and the executable (", executable.ranks.size(),
                                                   ") must have one entry per rank (", pp, ")"));
  }
  const size_t buffers = executable.ranks[rank].buffer_bytes.size();
  if (plans[rank].buffers.buffers.size() != buffers) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": the plan has ",
                                                   plans[rank].buffers.buffers.size(),
                                                   " buffers but the executable ", buffers));
  }
  if (options.buffers == BufferMode::kArena && plans[rank].arena.offsets.size() != buffers) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": arena buffers need a plan with an arena"));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<BufferProvider> provider,
                   MakeBuffers(executable.ranks[rank], plans[rank], options.buffers, transport));
  std::unique_ptr<RankRunner> runner(new RankRunner(schedule, executable, world_rank, pp,
                                                    transport, std::move(provider), options));
  runner->stages_.assign(schedule.num_stages(), nullptr);
  for (int s = 0; s < schedule.num_stages(); ++s) {
    if (schedule.RankOf(s) != rank) continue;
    ASSIGN_OR_RETURN(std::unique_ptr<Stage> stage, factory.Make(s, runner->replica_));
    runner->stages_[s] = stage.get();
    runner->owned_stages_.push_back(std::move(stage));
  }
  return runner;
}

RankRunner::RankRunner(const Schedule& schedule, const Executable& executable, int world_rank,
                       int pp, Transport& transport, std::shared_ptr<BufferProvider> buffers,
                       const ReplayOptions& options)
    : schedule_(schedule),
      executable_(executable),
      options_(options),
      world_rank_(world_rank),
      rank_(world_rank % pp),
      replica_(world_rank / pp),
      buffers_(std::move(buffers)),
      recorder_(world_rank, pp * options.dp),
      recorded_(&transport, &recorder_) {}

RankRunner::~RankRunner() = default;

absl::Status RankRunner::Start(std::chrono::steady_clock::time_point origin) {
  // A device rank's thread launches on its device.
  if (const DeviceStreams* device = recorded_.device_streams(); device != nullptr) {
    RETURN_IF_ERROR(BindThreadToDevice(device->device));
  }
  const RankExecutorOptions eo{replica_,         options_.dp, options_.reduce,
                               options_.timeout, origin,      options_.record_timeline};
  ASSIGN_OR_RETURN(executor_, RankExecutor::Create(schedule_, executable_, rank_, &recorded_,
                                                   stages_, buffers_.get(), &recorder_, eo));
  return absl::OkStatus();
}

absl::StatusOr<StepResult> RankRunner::RunStep() { return executor_->RunStep(); }

absl::Status RankRunner::Fail(const absl::Status& status, const std::string& dir) {
  if (!dir.empty()) (void)recorder_.Dump(dir, status.message());  // best effort: `status` is the news
  recorded_.Abort(std::string(status.message()));
  return status;
}

}  // namespace jitpipe
