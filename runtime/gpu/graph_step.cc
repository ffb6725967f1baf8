// The eager and graph-replayed steps of the one-GPU backend (graph_step.h).
#include "runtime/gpu/graph_step.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/cuda/step_graph.h"
#include "stages/device/device_buffers.h"
#include "stages/exec/rank_executor.h"

namespace jitpipe::gpu {
namespace {

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

double MicrosSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
      .count();
}

// One rank's stages, buffers and executor; destroyed executor first.
struct GraphRank {
  std::vector<std::unique_ptr<Stage>> owned;
  std::unique_ptr<BufferProvider> buffers;
  std::unique_ptr<RankExecutor> executor;
  std::vector<Stage*> last_stages;  // chain-final stages: their losses
  ~GraphRank() { executor.reset(); }
};

}  // namespace

absl::StatusOr<GraphSteps> RunGraphSteps(const ReplayPlan& plan, CudaWorld& world,
                                         StageFactory& stages, int steps,
                                         absl::Duration timeout, const StepCheck& check) {
  const Schedule& s = plan.schedule;
  if (world.size() != s.pp) {
    return absl::InvalidArgumentError("a step captured as a CUDA graph needs --dp 1");
  }
  if (steps < 1) return absl::InvalidArgumentError("a graph replay needs 1 step or more");
  RETURN_IF_ERROR(BindThreadToDevice(world.device()));
  std::vector<std::unique_ptr<GraphRank>> ranks;
  std::vector<RankExecutor*> executors;
  const auto origin = std::chrono::steady_clock::now();
  for (int r = 0; r < s.pp; ++r) {
    auto rank = std::make_unique<GraphRank>();
    std::vector<Stage*> by_stage(s.num_stages(), nullptr);
    for (int st = 0; st < s.num_stages(); ++st) {
      if (s.RankOf(st) != r) continue;
      ASSIGN_OR_RETURN(std::unique_ptr<Stage> stage, stages.Make(st, 0));
      by_stage[st] = stage.get();
      if (s.IsLastStage(st)) rank->last_stages.push_back(stage.get());
      rank->owned.push_back(std::move(stage));
    }
    const RankMemoryPlan& memory = plan.plans[r];
    if (memory.arena.offsets.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", r, "'s plan has no arena"));
    }
    ASSIGN_OR_RETURN(rank->buffers,
                     MakeDeviceArenaBuffers(plan.executable.ranks[r].buffer_bytes,
                                            memory.arena.offsets, memory.arena.arena_bytes,
                                            &world.transport(r)));
    RankExecutorOptions options;
    options.timeout = timeout;
    options.origin = origin;
    options.record_timeline = false;
    options.reduce = plan.model.dp.reduce;
    ASSIGN_OR_RETURN(rank->executor,
                     RankExecutor::Create(s, plan.executable, r, &world.transport(r), by_stage,
                                          rank->buffers.get(), nullptr, options));
    executors.push_back(rank->executor.get());
    ranks.push_back(std::move(rank));
  }
  auto abort_on_error = [&](const absl::Status& status) {
    if (!status.ok()) world.Abort(0, std::string(status.message()));
    return status;
  };

  GraphSteps out;
  out.steps = steps;
  std::vector<double> eager_us, graph_us;
  std::vector<StepResult> results;
  for (int k = 0; k < steps; ++k) {
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(abort_on_error(RunStepsTogether(executors, results)));
    eager_us.push_back(MicrosSince(start));
    out.eager_loss = 0;
    for (const StepResult& r : results) out.eager_loss += r.loss;
  }

  for (RankExecutor* e : executors) RETURN_IF_ERROR(e->SetCapturing(true));
  ASSIGN_OR_RETURN(std::unique_ptr<StepGraph> graph,
                   BeginStepCapture(world.device(), world.streams()));
  RETURN_IF_ERROR(abort_on_error(RunStepsTogether(executors, results)));
  RETURN_IF_ERROR(graph->EndCapture());
  out.nodes = graph->nodes();
  for (int k = 0; k < steps; ++k) {
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(graph->Launch(/*wait=*/true));
    graph_us.push_back(MicrosSince(start));
  }
  for (const auto& rank : ranks) {
    for (Stage* stage : rank->last_stages) {
      for (int mb = 0; mb < s.microbatches; ++mb) out.graph_loss += stage->Loss(mb);
    }
  }
  out.eager_host_us = Median(eager_us);
  out.graph_host_us = Median(graph_us);
  if (check) {
    ASSIGN_OR_RETURN(out.check, check(out.graph_loss));
  }
  graph.reset();
  return out;
}

}  // namespace jitpipe::gpu
