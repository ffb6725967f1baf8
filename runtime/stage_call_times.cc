#include "runtime/stage_call_times.h"

#include <array>
#include <map>

#include "absl/strings/str_cat.h"

namespace jitpipe {
namespace {

// Index of a call kind in the sums below; -1 for a kind not counted.
int KindSlot(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return 0;
    case ActionKind::kBackwardInput:
      return 1;
    case ActionKind::kBackwardWeight:
      return 2;
    case ActionKind::kBackward:
      return 3;
    default:
      return -1;
  }
}

int ComputeActions(const RankProgram& program) {
  int n = 0;
  for (const Action& a : program) n += IsCompute(a.kind);
  return n;
}

}  // namespace

absl::StatusOr<std::vector<StageCallTimes>> MeasureStageCallTimes(const Schedule& lowered,
                                                                  const Timeline& timeline,
                                                                  int steps, int skip_steps) {
  if (steps < 1 || skip_steps < 0 || skip_steps >= steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot skip ", skip_steps, " of ", steps, " steps: at least one step must be counted"));
  }
  const int stages = lowered.num_stages();
  std::vector<std::array<double, 4>> sum(stages, {0, 0, 0, 0});
  std::vector<std::array<int, 4>> count(stages, {0, 0, 0, 0});
  // Index spaces: world rank w (timeline span rank), its program
  // lowered.ranks[w % pp], and the w's k-th compute span, of step
  // k / (compute actions of that program).
  std::map<int, int> seen;  // world rank -> compute spans so far
  for (const TimelineSpan& span : timeline.spans) {
    if (span.track != TimelineTrack::kCompute) continue;
    if (span.rank < 0) return absl::InvalidArgumentError(absl::StrCat("span of rank ", span.rank));
    const RankProgram& program = lowered.ranks[span.rank % lowered.pp];
    if (span.index < 0 || span.index >= static_cast<int>(program.size()) ||
        !IsCompute(program[span.index].kind)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", span.rank, ": compute span at index ", span.index,
          " is not a compute action of its program"));
    }
    const int step = seen[span.rank]++ / ComputeActions(program);
    const Action& action = program[span.index];
    const int slot = KindSlot(action.kind);
    if (step < skip_steps || slot < 0) continue;
    sum[action.stage][slot] += span.end_us - span.start_us;
    ++count[action.stage][slot];
  }
  for (const auto& [rank, spans] : seen) {
    const int expected = steps * ComputeActions(lowered.ranks[rank % lowered.pp]);
    if (spans != expected) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " has ", spans,
                                                     " compute spans; ", steps, " steps of its "
                                                     "program have ", expected));
    }
  }
  std::vector<StageCallTimes> out(stages);
  for (int s = 0; s < stages; ++s) {
    auto mean = [&](int k) { return count[s][k] > 0 ? sum[s][k] / count[s][k] : 0.0; };
    out[s] = {s,           mean(0),     mean(1),     mean(2),    mean(3),
              count[s][0], count[s][1], count[s][2], count[s][3]};
  }
  return out;
}

}  // namespace jitpipe
