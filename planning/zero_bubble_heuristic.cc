#include "planning/zero_bubble_heuristic.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace jitpipe {

std::vector<int64_t> ActivationCaps(const Model& model, const TrainingMemory& training,
                                    const std::vector<int>& stage_to_rank, int pp) {
  std::vector<int64_t> fixed(pp, 0), elements(pp, 0);
  for (size_t s = 0; s < stage_to_rank.size(); ++s) {
    const int r = stage_to_rank[s];
    fixed[r] += model.ForStage(static_cast<int>(s)).param_bytes +
                model.GradBytes(static_cast<int>(s));
    elements[r] += model.ParamElements(static_cast<int>(s));
  }
  std::vector<int64_t> caps(pp);
  for (int r = 0; r < pp; ++r) {
    const int64_t limit = training.device.LimitFor(r);
    if (limit <= 0) {
      caps[r] = std::numeric_limits<int64_t>::max() / 4;
      continue;
    }
    fixed[r] += training.optimizer.StateBytes(elements[r], model.dp.param_dtype, model.dp.size);
    caps[r] = std::max<int64_t>(0, limit - fixed[r]);
  }
  return caps;
}

ZbGraph ZeroBubbleGraph(const StageTimes& times, const std::vector<int64_t>& caps) {
  const size_t n = times.forward_us.size();
  ZbGraph g{.f = times.forward_us, .b = times.backward_input_us, .w = times.backward_weight_us,
            .forward_in = std::vector<double>(n, 0), .backward_in = std::vector<double>(n, 0),
            .mem_f = times.activation_bytes, .mem_b = std::vector<int64_t>(n, 0),
            .mem_w = {}, .max_mem = caps};
  for (size_t j = 0; j < n; ++j) {
    if (j > 0) g.forward_in[j] = times.send_forward_us[j - 1];
    if (j + 1 < n) g.backward_in[j] = times.send_backward_us[j + 1];
    g.mem_w.push_back(-times.activation_bytes[j]);
  }
  return g;
}

namespace {

// The faster lowering that fits; else the jit one (the lighter), which says
// which ranks miss.
absl::StatusOr<Evaluation> JudgeBothWays(const Schedule& s, const Model& model,
                                         const TrainingMemory& training) {
  ASSIGN_OR_RETURN(Evaluation jit, EvaluateSchedule(s, model, training, RecvPlacement::kJit));
  ASSIGN_OR_RETURN(Evaluation early, EvaluateSchedule(s, model, training, RecvPlacement::kEarly));
  if (early.fits && (!jit.fits || early.makespan_us < jit.makespan_us)) return early;
  return jit;
}

}  // namespace

absl::StatusOr<HeuristicResult> ZeroBubbleHeuristic(const Model& model,
                                                    const TrainingMemory& training, int pp,
                                                    int microbatches) {
  if (pp < 1 || microbatches < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "zero-bubble heuristic: pp and microbatches must be >= 1, got ", pp, ", ", microbatches));
  }
  const std::vector<int> placement = StageToRank(Placement::kLoop, pp, 1);
  const StageTimes times = StageTimesOf(model, placement);
  std::vector<int64_t> caps = ActivationCaps(model, training, placement, pp);
  HeuristicResult out;
  for (int attempt = 0; attempt < 5; ++attempt) {
    absl::StatusOr<ZbOrder> order = ZbInitialSolution(ZeroBubbleGraph(times, caps), pp,
                                                      microbatches);
    if (!order.ok()) {
      if (order.status().code() != absl::StatusCode::kResourceExhausted) return order.status();
      break;  // the cap leaves no way forward
    }
    out.tried += 8;
    Schedule s;
    s.name = "zb-heuristic";
    s.pp = pp;
    s.stages_per_rank = 1;
    s.microbatches = microbatches;
    s.placement = Placement::kLoop;
    s.stage_to_rank = placement;
    s.ranks = std::move(order->stages);
    ASSIGN_OR_RETURN(Evaluation e, JudgeBothWays(s, model, training));
    if (e.fits) {
      out.schedule = std::move(s);
      out.evaluation = std::move(e);
      out.flags = ZbFlagsName(order->flags);
      out.upstream_span_us = order->best_time;
      out.caps_lowered = attempt;
      return out;
    }
    for (int r = 0; r < pp; ++r) {
      if (!e.memory.ranks[r].fits()) caps[r] -= times.activation_bytes[r];
    }
  }
  return absl::NotFoundError("the zero-bubble heuristic finds no schedule within the limit");
}

}  // namespace jitpipe
