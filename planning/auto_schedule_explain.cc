// AutoScheduleResult::Explain and the lower bound (auto_schedule.h).
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/byte_units.h"
#include "base/time_units.h"
#include "planning/auto_schedule.h"

namespace jitpipe {
namespace {

constexpr double kInfinite = std::numeric_limits<double>::infinity();

std::string Percent(double value, double reference) {
  return absl::StrFormat("%+.1f%%", 100 * (value / reference - 1));
}

absl::string_view ReceiveWords(RecvPlacement recv) {
  switch (recv) {
    case RecvPlacement::kEarly:
      return "posted early (--recv early)";
    case RecvPlacement::kOffset:
      return "posted k computes ahead, k per receive (--recv offset)";
    case RecvPlacement::kJit:
    case RecvPlacement::kJitRendezvous:
      break;
  }
  return "just in time (--recv jit)";
}

}  // namespace

double PipelineLowerBound(const StageTimes& t, const std::vector<int>& stage_to_rank, int pp,
                          int microbatches, int* binding_rank) {
  const int stages = static_cast<int>(stage_to_rank.size());
  std::vector<double> head(pp, kInfinite), busy(pp, 0);
  double chain = 0;  // when stage s's first F may start
  for (int s = 0; s < stages; ++s) {
    const int r = stage_to_rank[s];
    head[r] = std::min(head[r], chain);
    busy[r] += microbatches * (t.forward_us[s] + t.backward_input_us[s] + t.backward_weight_us[s]);
    chain += t.forward_us[s];
    if (s + 1 < stages && stage_to_rank[s + 1] != r) chain += t.send_forward_us[s];
  }
  // One microbatch down the chain (`chain` + the last F), back up with I,
  // then stage 0's W.
  double critical = chain;
  for (int s = stages - 1; s >= 0; --s) {
    critical += t.backward_input_us[s];
    if (s > 0 && stage_to_rank[s - 1] != stage_to_rank[s]) critical += t.send_backward_us[s];
  }
  critical += t.backward_weight_us[0];
  double bound = critical;
  int rank = -1;
  for (int r = 0; r < pp; ++r) {
    if (head[r] + busy[r] > bound) {
      bound = head[r] + busy[r];
      rank = r;
    }
  }
  if (binding_rank != nullptr) *binding_rank = rank;
  return bound;
}

std::string AutoScheduleResult::Explain() const {
  const double t = evaluation.makespan_us;
  std::string out = absl::StrCat(
      "chose: ", description, "; receives ", ReceiveWords(evaluation.recv),
      " (the program written is lowered so; computes ahead of the consumer: ", recv_leads, ")",
      layout.empty() ? "" : absl::StrCat("; layers \"", layout, "\" (", cut_method, " cut)"),
      "\n");
  absl::StrAppendFormat(
      &out, "step: %s; lower bound %s (%s): %s; over all placements searched %s: %s\n",
      FormatMicros(t), FormatMicros(lower_bound_us),
      lower_bound_rank >= 0 ? absl::StrCat("start-up + busy time of rank ", lower_bound_rank)
                            : std::string("one microbatch's critical path"),
      Percent(t, lower_bound_us), FormatMicros(best_lower_bound_us),
      Percent(t, best_lower_bound_us));
  const RankMemory& tight = evaluation.memory.Tightest();
  const std::string memory = absl::StrCat(
      "rank ", tight.rank, " holds ", FormatBytes(tight.total()), " of ", FormatBytes(tight.limit),
      tight.reserve > 0 ? absl::StrCat(" less a ", FormatBytes(tight.reserve), " reserve") : "");
  if (unconstrained_us < t * (1 - 1e-3)) {
    absl::StrAppendFormat(&out,
                          "binding constraint: memory (%s); without the limit the search "
                          "reaches %s (%s)\n",
                          memory, FormatMicros(unconstrained_us), Percent(unconstrained_us, t));
  } else if (t <= lower_bound_us * (1 + 1e-3)) {
    absl::StrAppend(&out, "binding constraint: none; the step is at its placement's lower bound (",
                    memory, ")\n");
  } else {
    absl::StrAppend(&out, "binding constraint: dependencies (the pipeline's fill and drain); "
                    "memory does not bind: no faster schedule was found without the limit (",
                    memory, ")\n");
  }
  if (best_builtin.empty()) {
    absl::StrAppend(&out, "best built-in schedule that fits: none\n");
  } else {
    absl::StrAppendFormat(&out, "best built-in schedule that fits: %s, %s (chosen: %s)\n",
                          best_builtin, FormatMicros(best_builtin_us), Percent(t, best_builtin_us));
  }
  if (heuristic_us.has_value()) {
    absl::StrAppendFormat(&out, "zero-bubble heuristic: %s (chosen: %s)\n",
                          FormatMicros(*heuristic_us), Percent(t, *heuristic_us));
  }
  absl::StrAppendFormat(&out, "searched: %d candidates judged in %.3g s%s\n", judged,
                        absl::ToDoubleSeconds(elapsed),
                        budget_exhausted ? "; the time budget ended the search early (the "
                                           "result may differ with more time)"
                                         : "");
  return out;
}

}  // namespace jitpipe
