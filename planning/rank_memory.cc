#include "planning/rank_memory.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "memory/liveness.h"

namespace jitpipe {
namespace {

struct ActivationsPeak {
  int64_t bytes = 0;      // activations at the peak
  int64_t gradients = 0;  // parameter gradients live at the same index
  int64_t unsharded = 0;  // FSDP working copies (UNSHARD..RESHARD) at the same index
  int index = -1;
};

// Everything the planner plans peaks together -- the one peak `plan`'s first
// table, the trace and this report share -- split at that index into the
// parameter gradients, the unsharded parameters the program's
// UNSHARD/RESHARD hold, and the rest (activations and buffers).
ActivationsPeak PeakOfPlannedBuffers(const RankBuffers& buffers) {
  RankBuffers grads{.rank = buffers.rank, .num_actions = buffers.num_actions, .buffers = {}};
  RankBuffers params{.rank = buffers.rank, .num_actions = buffers.num_actions, .buffers = {}};
  for (const Buffer& b : buffers.buffers) {
    if (b.kind == BufferKind::kParamGrad) grads.buffers.push_back(b);
    if (b.kind == BufferKind::kParams) params.buffers.push_back(b);
  }
  const Peak peak = PeakOf(LiveBytes(buffers));
  auto at_peak = [&](const RankBuffers& some) -> int64_t {
    return peak.index < 0 || some.buffers.empty() ? 0 : LiveBytes(some)[peak.index];
  };
  const int64_t gradients = at_peak(grads);
  const int64_t unsharded = at_peak(params);
  return ActivationsPeak{.bytes = peak.bytes - gradients - unsharded,
                         .gradients = gradients,
                         .unsharded = unsharded,
                         .index = peak.index};
}

// Stages whose parameters the program unshards and reshards (--fsdp).
std::vector<bool> UnshardedByProgram(const Schedule& lowered) {
  std::vector<bool> out(lowered.num_stages(), false);
  for (const RankProgram& program : lowered.ranks) {
    for (const Action& a : program) {
      if (a.kind == ActionKind::kUnshard && a.stage >= 0 && a.stage < lowered.num_stages()) {
        out[a.stage] = true;
      }
    }
  }
  return out;
}

absl::StatusOr<ActivationsPeak> PlanActivations(const Schedule& lowered, const Model& model,
                                                int rank, MemoryPolicy policy) {
  ASSIGN_OR_RETURN(RankBuffers buffers,
                   ComputeBufferLifetimes(lowered, model, rank, {.policy = policy}));
  return PeakOfPlannedBuffers(buffers);
}

// Parameters, gradients, optimizer and limit of every rank; activations 0.
MemoryReport StaticParts(const Schedule& lowered, const Model& model,
                         const TrainingMemory& training) {
  MemoryReport out;
  out.ranks.resize(lowered.pp);
  std::vector<int64_t> elements(lowered.pp, 0);
  const std::vector<bool> by_program = UnshardedByProgram(lowered);
  const int zero = training.optimizer.ZeroStage();
  const int64_t dp = std::max(1, model.dp.size);
  for (int s = 0; s < lowered.num_stages(); ++s) {
    RankMemory& m = out.ranks[lowered.RankOf(s)];
    const int64_t params = model.ForStage(s).param_bytes;
    if (by_program[s] || zero >= 3) {
      // FSDP (ZeRO-3): the resident shard; the working copy is the
      // planner's from each UNSHARD to its RESHARD, or, when the program
      // has none for the stage, held the whole step.
      m.parameters += (params + dp - 1) / dp;
      if (!by_program[s]) m.parameters += params;
    } else {
      m.parameters += params;
    }
    elements[lowered.RankOf(s)] += model.ParamElements(s);
  }
  for (int r = 0; r < lowered.pp; ++r) {
    RankMemory& m = out.ranks[r];
    m.rank = r;
    m.optimizer = training.optimizer.StateBytes(elements[r], model.dp.param_dtype, model.dp.size);
    m.limit = training.device.LimitFor(r);
    m.reserve = training.device.ReserveFor(r);
  }
  return out;
}

void FindHeaviest(MemoryReport& report) {
  report.heaviest = 0;
  for (const RankMemory& m : report.ranks) {
    if (m.total() > report.ranks[report.heaviest].total()) report.heaviest = m.rank;
  }
}

}  // namespace

TrainingMemory TrainingMemoryOf(const LayeredModel& model) {
  return TrainingMemory{.optimizer = model.optimizer, .device = model.device};
}

bool MemoryReport::fits() const {
  for (const RankMemory& r : ranks) {
    if (!r.fits()) return false;
  }
  return true;
}

const RankMemory& MemoryReport::Tightest() const {
  const RankMemory* best = nullptr;
  for (const RankMemory& r : ranks) {
    if (r.has_limit() && (best == nullptr || r.margin() < best->margin())) best = &r;
  }
  return best != nullptr ? *best : Heaviest();
}

MemoryReport ResidentRankMemory(const Schedule& lowered, const Model& model,
                                const TrainingMemory& training) {
  return StaticParts(lowered, model, training);
}

absl::StatusOr<int64_t> ActivationPeak(const Schedule& lowered, const Model& model, int rank,
                                       MemoryPolicy policy) {
  ASSIGN_OR_RETURN(ActivationsPeak peak, PlanActivations(lowered, model, rank, policy));
  return peak.bytes;
}

absl::StatusOr<MemoryReport> PlanRankMemories(const Schedule& lowered, const Model& model,
                                              const TrainingMemory& training,
                                              MemoryPolicy policy) {
  MemoryReport out = StaticParts(lowered, model, training);
  for (int r = 0; r < lowered.pp; ++r) {
    ASSIGN_OR_RETURN(ActivationsPeak peak, PlanActivations(lowered, model, r, policy));
    out.ranks[r].activations = peak.bytes;
    out.ranks[r].gradients = peak.gradients;
    out.ranks[r].unsharded = peak.unsharded;
    out.ranks[r].activations_peak_index = peak.index;
  }
  FindHeaviest(out);
  return out;
}

MemoryReport RankMemoriesFromBuffers(const Schedule& lowered, const Model& model,
                                     const TrainingMemory& training,
                                     const std::vector<RankBuffers>& buffers) {
  MemoryReport out = StaticParts(lowered, model, training);
  for (int r = 0; r < lowered.pp; ++r) {
    const ActivationsPeak peak = PeakOfPlannedBuffers(buffers[r]);
    out.ranks[r].activations = peak.bytes;
    out.ranks[r].gradients = peak.gradients;
    out.ranks[r].unsharded = peak.unsharded;
    out.ranks[r].activations_peak_index = peak.index;
  }
  FindHeaviest(out);
  return out;
}

}  // namespace jitpipe
