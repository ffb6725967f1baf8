#include "planning/rank_memory.h"

#include <utility>

#include "base/status_macros.h"
#include "memory/liveness.h"

namespace jitpipe {
namespace {

struct ActivationsPeak {
  int64_t bytes = 0;
  int index = -1;
};

// Parameter gradients are counted whole, for the whole step, as gradients.
ActivationsPeak PeakWithoutGradients(const RankBuffers& buffers) {
  RankBuffers others{.rank = buffers.rank, .num_actions = buffers.num_actions, .buffers = {}};
  others.buffers.reserve(buffers.buffers.size());
  for (const Buffer& b : buffers.buffers) {
    if (b.kind != BufferKind::kParamGrad) others.buffers.push_back(b);
  }
  const Peak peak = PeakOf(LiveBytes(others));
  return ActivationsPeak{.bytes = peak.bytes, .index = peak.index};
}

absl::StatusOr<ActivationsPeak> PlanActivations(const Schedule& lowered, const Model& model,
                                                int rank, MemoryPolicy policy) {
  ASSIGN_OR_RETURN(RankBuffers buffers,
                   ComputeBufferLifetimes(lowered, model, rank, {.policy = policy}));
  return PeakWithoutGradients(buffers);
}

// Parameters, gradients, optimizer and limit of every rank; activations 0.
MemoryReport StaticParts(const Schedule& lowered, const Model& model,
                         const TrainingMemory& training) {
  MemoryReport out;
  out.ranks.resize(lowered.pp);
  std::vector<int64_t> elements(lowered.pp, 0);
  for (int s = 0; s < lowered.num_stages(); ++s) {
    RankMemory& m = out.ranks[lowered.RankOf(s)];
    m.parameters += model.ForStage(s).param_bytes;
    m.gradients += model.GradBytes(s);
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
    const ActivationsPeak peak = PeakWithoutGradients(buffers[r]);
    out.ranks[r].activations = peak.bytes;
    out.ranks[r].activations_peak_index = peak.index;
  }
  FindHeaviest(out);
  return out;
}

}  // namespace jitpipe
