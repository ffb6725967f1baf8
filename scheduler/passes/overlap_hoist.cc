#include "scheduler/passes/overlap_hoist.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "base/status_macros.h"
#include "scheduler/analysis/pass_utils.h"

namespace jitpipe {
namespace {

bool IsGradientAction(ActionKind kind) {
  return kind == ActionKind::kBackward || kind == ActionKind::kBackwardWeight;
}

}  // namespace

void PlaceReduceAfterLastGradient(RankProgram& program, int stage) {
  auto it = std::find_if(program.begin(), program.end(), [&](const Action& a) {
    return a.kind == ActionKind::kReduceGrad && a.stage == stage;
  });
  if (it == program.end()) return;
  Action reduce = CopyOf(*it);
  program.erase(it);
  int last = -1;
  for (int i = 0; i < static_cast<int>(program.size()); ++i) {
    ForEachComputePart(program[i], [&](const Action& part) {
      if (part.stage == stage && IsGradientAction(part.kind)) last = i;
    });
  }
  size_t at = static_cast<size_t>(last + 1);
  while (at < program.size() && IsSendRecv(program[at].kind)) ++at;
  program.insert(program.begin() + static_cast<std::ptrdiff_t>(at), std::move(reduce));
}

namespace {

// Whether `w` (a W) may run before `a`: not a W of its stage, not its I,
// and no UNSHARD or RESHARD between them.
bool MayPass(const RankProgram& program, int a_at, int w_at) {
  const Action& a = program[a_at];
  const Action& w = program[w_at];
  bool ok = true;
  ForEachComputePart(a, [&](const Action& part) {
    if (part.stage != w.stage) return;
    if (part.kind == ActionKind::kBackwardWeight) ok = false;
    if (part.kind == ActionKind::kBackwardInput && part.microbatch == w.microbatch) ok = false;
  });
  for (int i = a_at; i < w_at && ok; ++i) {
    if (i > a_at) {
      ForEachComputePart(program[i], [&](const Action& part) {
        if (part.stage == w.stage && part.kind == ActionKind::kBackwardInput &&
            part.microbatch == w.microbatch) {
          ok = false;
        }
      });
    }
    if (program[i].kind == ActionKind::kUnshard || program[i].kind == ActionKind::kReshard) {
      ok = false;
    }
  }
  return ok;
}

// The program with the W at `w_at` moved right before the action at `a_at`.
RankProgram Moved(const RankProgram& program, int a_at, int w_at) {
  RankProgram out;
  out.reserve(program.size());
  for (int i = 0; i < static_cast<int>(program.size()); ++i) {
    if (i == a_at) out.push_back(CopyOf(program[w_at]));
    if (i != w_at) out.push_back(CopyOf(program[i]));
  }
  PlaceReduceAfterLastGradient(out, program[w_at].stage);
  return out;
}

int LatestRank(const StepTime& t) {
  return static_cast<int>(std::max_element(t.rank_end_us.begin(), t.rank_end_us.end()) -
                          t.rank_end_us.begin());
}

}  // namespace

absl::StatusOr<Schedule> HoistWeightGradients(
    Schedule schedule, const StepTimeFunction& step_time,
    const std::function<absl::StatusOr<int64_t>(const Schedule&, int)>& peak,
    const std::vector<int64_t>& limit) {
  ASSIGN_OR_RETURN(StepTime current, step_time(schedule));
  for (int round = 0; round < kHoistRounds; ++round) {
    if (current.rank_end_us.empty()) break;
    const int r = LatestRank(current);
    const RankProgram program = schedule.ranks[r];
    std::vector<int> compute;
    for (int i = 0; i < static_cast<int>(program.size()); ++i) {
      if (IsCompute(program[i].kind)) compute.push_back(i);
    }
    const int n = static_cast<int>(compute.size());
    std::optional<RankProgram> best;
    StepTime best_time = current;
    for (int k = std::max(1, n - kHoistWindow); k < n; ++k) {
      const int w_at = compute[k];
      if (program[w_at].kind != ActionKind::kBackwardWeight) continue;
      // Every earlier slot back to the first action it may not pass.
      for (int j = k - 1; j >= std::max(0, k - kHoistDistance); --j) {
        const int a_at = compute[j];
        if (!MayPass(program, a_at, w_at)) break;
        RankProgram candidate = Moved(program, a_at, w_at);
        std::swap(schedule.ranks[r], candidate);
        absl::StatusOr<int64_t> bytes = peak(schedule, r);
        absl::StatusOr<StepTime> t =
            bytes.ok() && *bytes <= limit[r] ? step_time(schedule) : absl::StatusOr<StepTime>();
        std::swap(schedule.ranks[r], candidate);
        if (!bytes.ok()) return bytes.status();
        if (*bytes > limit[r]) continue;
        if (!t.ok()) return t.status();
        if (t->makespan_us < best_time.makespan_us - 1e-9) {
          best = std::move(candidate);
          best_time = *std::move(t);
        }
      }
    }
    if (!best.has_value()) break;
    schedule.ranks[r] = *std::move(best);
    current = std::move(best_time);
  }
  return schedule;
}

}  // namespace jitpipe
