#include "runtime/replay_plan.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "scheduler/analysis/comm_matching.h"
#include "scheduler/passes/lower.h"
#include "scheduler/analysis/pair_order.h"
#include "scheduler/analysis/validate.h"

namespace jitpipe {

absl::StatusOr<Schedule> LowerForReplay(const Schedule& schedule, RecvPlacement recv) {
  if (schedule.lowered) return schedule;
  LowerOptions options;
  options.recv = recv;
  options.reduce_grad = true;
  return Lower(schedule, options);
}

absl::StatusOr<Schedule> LowerForOrdering(const Schedule& schedule, P2pOrdering ordering) {
  if (schedule.lowered) return schedule;
  switch (ordering) {
    case P2pOrdering::kByTag:
      return LowerForReplay(schedule, RecvPlacement::kJit);
    case P2pOrdering::kFifoPerEdge: {
      ASSIGN_OR_RETURN(Schedule jit, LowerForReplay(schedule, RecvPlacement::kJit));
      ASSIGN_OR_RETURN(CommPositions positions, MatchSendRecv(jit));
      if (CheckPairOrder(jit, positions).ok()) return jit;
      return LowerForReplay(schedule, RecvPlacement::kJitRendezvous);
    }
    case P2pOrdering::kFifoPerRank:
      return LowerForReplay(schedule, RecvPlacement::kJitRendezvous);
  }
  return absl::InternalError("an unknown ordering");
}

absl::StatusOr<Schedule> LowerForBackend(const Schedule& schedule, const BackendTraits& backend,
                                         BufferMode buffers) {
  if (backend.ordering != P2pOrdering::kByTag) return LowerForOrdering(schedule, backend.ordering);
  const bool rendezvous =
      backend.send_completion == SendCompletion::kRendezvous && buffers == BufferMode::kArena;
  return LowerForReplay(schedule, rendezvous ? RecvPlacement::kJitRendezvous : RecvPlacement::kJit);
}

absl::Status CheckProgramOrder(const Schedule& lowered, P2pOrdering ordering) {
  switch (ordering) {
    case P2pOrdering::kByTag:
      return Validate(lowered, ValidateOptions{CommSemantics::kRelaxed, 0});
    case P2pOrdering::kFifoPerEdge: {
      RETURN_IF_ERROR(Validate(lowered, ValidateOptions{CommSemantics::kRelaxed, 0}));
      ASSIGN_OR_RETURN(CommPositions positions, MatchSendRecv(lowered));
      if (absl::Status order = CheckPairOrder(lowered, positions); !order.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a FIFO per directed pair of ranks (nccl-lazy) needs every pair's receives in the "
            "order of its sends (lower it with --recv jit-rendezvous): ",
            order.message()));
      }
      return absl::OkStatus();
    }
    case P2pOrdering::kFifoPerRank:
      if (absl::Status strict = Validate(lowered, ValidateOptions{CommSemantics::kStrict, 0});
          !strict.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "one FIFO per rank (nccl) needs a program that is deadlock-free under strict "
            "semantics (lower it with --recv jit-rendezvous): ",
            strict.message()));
      }
      return absl::OkStatus();
  }
  return absl::InternalError("an unknown ordering");
}

std::vector<Edge> P2pEdges(const Executable& executable, int pp, int dp) {
  std::vector<Edge> edges;
  for (const Transfer& t : executable.transfers) {
    for (int replica = 0; replica < dp; ++replica) {
      edges.push_back({replica * pp + t.src_rank, replica * pp + t.dst_rank});
    }
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  return edges;
}

absl::StatusOr<Model> ModelWithStageSizes(Model model, int num_stages, StageFactory& factory) {
  const int grad_bytes = DtypeBytes(model.dp.grad_dtype);
  const int param_bytes = DtypeBytes(model.dp.param_dtype);
  for (int s = 0; s < num_stages; ++s) {
    ASSIGN_OR_RETURN(std::unique_ptr<Stage> stage, factory.Make(s, 0));
    const StageSizes sizes = stage->Sizes();
    if (sizes.param_grad_bytes % grad_bytes != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stage ", s, "'s ", sizes.param_grad_bytes, " gradient bytes are not a whole number of ",
          DtypeName(model.dp.grad_dtype), " elements (the model's dp.grad_dtype)"));
    }
    StageOverride* entry = nullptr;
    for (StageOverride& o : model.stages) {
      if (o.index == s) entry = &o;
    }
    if (entry == nullptr) {
      model.stages.push_back(StageOverride{s, {}});
      entry = &model.stages.back();
    }
    entry->spec.input_bytes = sizes.input_bytes;
    entry->spec.output_bytes = sizes.output_bytes;
    entry->spec.stash_bytes = sizes.stash_bytes;
    entry->spec.stash_segments.reset();  // none: one buffer
    if (!sizes.stash_segments.empty()) entry->spec.stash_segments = sizes.stash_segments;
    entry->spec.param_bytes = sizes.param_grad_bytes / grad_bytes * param_bytes;
  }
  return model;
}

SendCompletionModel PlanSendCompletion(const BackendTraits& backend) {
  return backend.send_completion == SendCompletion::kRendezvous ? SendCompletionModel::kReceive
                                                                : SendCompletionModel::kPost;
}

absl::StatusOr<ReplayPlan> PlanReplay(Schedule lowered, Model model, MemoryPolicy policy,
                                      SendCompletionModel send) {
  if (!lowered.lowered) {
    return absl::FailedPreconditionError(
        "replay needs a lowered program; lower it first (LowerForReplay)");
  }
  RETURN_IF_ERROR(Validate(lowered, ValidateOptions{CommSemantics::kRelaxed, 0}));
  RETURN_IF_ERROR(CheckModelFits(model, lowered.num_stages()));
  ReplayPlan out;
  PlanOptions plan_options;
  plan_options.policy = policy;
  plan_options.send_completion = send;
  ASSIGN_OR_RETURN(out.plans, PlanMemory(lowered, model, plan_options));
  std::vector<RankBuffers> buffers;
  buffers.reserve(out.plans.size());
  for (const RankMemoryPlan& plan : out.plans) buffers.push_back(plan.buffers);
  ASSIGN_OR_RETURN(out.executable, BuildExecutable(lowered, model, std::move(buffers)));
  out.schedule = std::move(lowered);
  out.model = std::move(model);
  return out;
}

}  // namespace jitpipe
