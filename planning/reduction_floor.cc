#include "planning/reduction_floor.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace jitpipe {
namespace {

std::vector<bool> Reduced(const Schedule& s) {
  std::vector<bool> reduced(s.num_stages(), false);
  for (const RankProgram& program : s.ranks) {
    for (const Action& a : program) {
      if (a.kind == ActionKind::kReduceGrad) reduced[a.stage] = true;
    }
  }
  return reduced;
}

// The least that can follow rank `program`'s compute: over the actions that
// can end it once Ws move (any W, or the last other compute action if it is
// a B), the stage's unstreamed reduction.
double RankFloor(const RankProgram& program, const Model& model,
                 const std::vector<bool>& reduced) {
  const int k = model.dp.buckets;
  auto floor = [&](int stage, double d) {
    const double bucket = model.dp.link.TransferUs(model.ReduceTrafficBytes(stage) / k);
    return std::max(bucket, k * bucket - d * (k - 1) / k);
  };
  double least = std::numeric_limits<double>::infinity();
  const Action* last_other = nullptr;
  for (const Action& a : program) {
    if (!IsCompute(a.kind)) continue;
    if (a.kind == ActionKind::kBackwardWeight) {
      if (reduced[a.stage]) least = std::min(least, floor(a.stage, model.ComputeUs(a)));
    } else {
      last_other = &a;
    }
  }
  if (last_other != nullptr && last_other->kind == ActionKind::kBackward &&
      reduced[last_other->stage]) {
    least = std::min(least, floor(last_other->stage, model.ComputeUs(*last_other)));
  }
  return least == std::numeric_limits<double>::infinity() ? 0 : least;
}

}  // namespace

double MinimumExposedReduceUs(const Schedule& lowered, const Model& model,
                              const SimulationResult& sim) {
  if (model.dp.size <= 1 || sim.ranks.empty()) return 0;
  double finish = 0;
  for (const RankSimulation& r : sim.ranks) {
    finish = std::max(finish, r.first_start_us + r.span_us);
  }
  const std::vector<bool> reduced = Reduced(lowered);
  double bound = 0;
  for (const RankSimulation& r : sim.ranks) {
    if (r.first_start_us + r.span_us < finish - 1e-9) continue;
    bound = std::max(bound, RankFloor(lowered.ranks[r.rank], model, reduced));
  }
  return bound;
}

}  // namespace jitpipe
