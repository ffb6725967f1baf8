#include "planning/zero_bubble_heuristic.h"

#include <algorithm>
#include <limits>
#include <optional>
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

ListScheduleParams ZeroBubbleFlags(int combination, int pp, int microbatches) {
  ListScheduleParams p;
  p.pp = pp;
  p.microbatches = microbatches;
  p.stages_per_rank = 1;
  p.placement = Placement::kLoop;
  p.split_backward = true;
  p.warmup_limit = (combination & 1) != 0;
  p.prefer_backward = (combination & 2) != 0;
  p.fill = (combination & 4) != 0 ? FillWithW::kGreedy : FillWithW::kWhenItFits;
  p.name = "zb-heuristic";
  return p;
}

std::string ZeroBubbleFlagsName(int combination) {
  return absl::StrCat((combination & 2) != 0 ? "B prioritised" : "F prioritised", ", ",
                      (combination & 4) != 0 ? "W fills every bubble" : "W only where it fits",
                      ", ",
                      (combination & 1) != 0 ? "a bubble allowed before the first B"
                                             : "no bubble before the first B");
}

absl::StatusOr<HeuristicResult> ZeroBubbleHeuristic(const Model& model,
                                                    const TrainingMemory& training, int pp,
                                                    int microbatches) {
  const std::vector<int> placement = StageToRank(Placement::kLoop, pp, 1);
  const StageTimes times = StageTimesOf(model, placement);
  const std::vector<int64_t> caps = ActivationCaps(model, training, placement, pp);
  std::optional<HeuristicResult> best;
  int tried = 0;
  for (int combination = 0; combination < 8; ++combination) {
    ListScheduleParams params = ZeroBubbleFlags(combination, pp, microbatches);
    params.cap_bytes = caps;
    // Lower the heuristic's own cap by one microbatch's activations at a
    // time while the exact plan (which also counts buffers in flight)
    // misses the limit.
    for (int attempt = 0; attempt < 5; ++attempt) {
      absl::StatusOr<Schedule> s = BuildListSchedule(params, times);
      if (!s.ok()) break;  // the cap leaves no way forward
      ++tried;
      ASSIGN_OR_RETURN(Evaluation e, EvaluateSchedule(*s, model, training, RecvPlacement::kJit));
      if (e.fits) {
        if (!best.has_value() || e.makespan_us < best->evaluation.makespan_us) {
          best = HeuristicResult{.schedule = *std::move(s),
                                 .evaluation = std::move(e),
                                 .flags = ZeroBubbleFlagsName(combination)};
        }
        break;
      }
      for (int r = 0; r < pp; ++r) {
        if (!e.memory.ranks[r].fits()) params.cap_bytes[r] -= times.activation_bytes[r];
      }
    }
  }
  if (!best.has_value()) {
    return absl::NotFoundError("the zero-bubble heuristic finds no schedule within the limit");
  }
  best->tried = tried;
  return *std::move(best);
}

}  // namespace jitpipe
