#include "scheduler/passes/overlap_merge.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "scheduler/analysis/pass_utils.h"

namespace jitpipe {
namespace {

constexpr double kEpsilonUs = 1e-9;

struct Candidate {
  RankProgram program;
  Action i, w, b;  // the I and W merged, and the B they become
};

bool HasReduce(const RankProgram& program, int stage) {
  return std::any_of(program.begin(), program.end(), [&](const Action& a) {
    return a.kind == ActionKind::kReduceGrad && a.stage == stage;
  });
}

// The rank's merge candidate (overlap_merge.h), or nullopt when the rank
// has none. Index spaces: program positions only.
std::optional<Candidate> MergeCandidate(const RankProgram& program) {
  // The last standalone I; everything compute after it must be a W.
  int i_at = -1;
  for (int p = static_cast<int>(program.size()) - 1; p >= 0; --p) {
    const ActionKind kind = program[p].kind;
    if (kind == ActionKind::kUnshard || kind == ActionKind::kReshard) return std::nullopt;
    if (kind == ActionKind::kBackwardInput) {
      i_at = p;
      break;
    }
    if (IsCompute(kind) && kind != ActionKind::kBackwardWeight) return std::nullopt;
  }
  if (i_at < 0) return std::nullopt;
  const Action& i = program[i_at];
  if (!HasReduce(program, i.stage)) return std::nullopt;
  int w_at = -1;
  std::vector<int> moved;  // the other Ws after the I, in order
  for (int p = i_at + 1; p < static_cast<int>(program.size()); ++p) {
    if (program[p].kind != ActionKind::kBackwardWeight) continue;
    if (program[p].stage == i.stage && program[p].microbatch == i.microbatch) {
      w_at = p;
    } else {
      moved.push_back(p);
    }
  }
  if (w_at < 0) return std::nullopt;  // the I's W ran before it: invalid input
  // The Ws go before the receives posted right before the I.
  int insert_at = i_at;
  while (insert_at > 0 && IsRecv(program[insert_at - 1].kind)) --insert_at;
  Candidate out{.program = {},
                .i = CopyOf(i),
                .w = CopyOf(program[w_at]),
                .b = SimpleAction(ActionKind::kBackward, i.stage, i.microbatch)};
  out.program.reserve(program.size());
  for (int p = 0; p < static_cast<int>(program.size()); ++p) {
    if (p == insert_at) {
      for (int m : moved) out.program.push_back(CopyOf(program[m]));
    }
    if (p == i_at) {
      out.program.push_back(CopyOf(out.b));
    } else if (p != w_at && std::find(moved.begin(), moved.end(), p) == moved.end()) {
      out.program.push_back(CopyOf(program[p]));
    }
  }
  PlaceReduceAfterLastGradient(out.program, i.stage);
  for (int m : moved) PlaceReduceAfterLastGradient(out.program, program[m].stage);
  return out;
}

// The rank that ends the step last among those not yet tried (-1: none).
int LatestUntried(const StepTime& t, const std::vector<bool>& tried) {
  int latest = -1;
  for (int r = 0; r < static_cast<int>(t.rank_end_us.size()); ++r) {
    if (tried[r]) continue;
    if (latest < 0 || t.rank_end_us[r] > t.rank_end_us[latest] + kEpsilonUs) latest = r;
  }
  return latest;
}

}  // namespace

std::string BackwardMergeDecision::ToString() const {
  const std::string pair =
      absl::StrCat(stage, "I", microbatch, " ", stage, "W", microbatch);
  if (undone) {
    return absl::StrFormat("rank %d: %s kept split: merging ends the rank earlier but not the "
                           "step, which another rank that keeps its split also ends (step "
                           "%.2f us)",
                           rank, pair, makespan_split_us);
  }
  if (merged) {
    return absl::StrFormat("rank %d: %s merged into %dB%d: step %.2f us -> %.2f us", rank, pair,
                           stage, microbatch, makespan_split_us, makespan_merged_us);
  }
  if (raises_peak) {
    return absl::StrFormat("rank %d: %s kept split: merging raises the rank's peak memory",
                           rank, pair);
  }
  if (makespan_merged_us > makespan_split_us + kEpsilonUs) {
    return absl::StrFormat("rank %d: %s kept split: merging lengthens the step from %.2f us to "
                           "%.2f us",
                           rank, pair, makespan_split_us, makespan_merged_us);
  }
  return absl::StrFormat("rank %d: %s kept split: merging does not end the rank earlier "
                         "(step %.2f us either way)",
                         rank, pair, makespan_split_us);
}

absl::StatusOr<BackwardMergeResult> MergeLastBackwards(
    Schedule schedule, const StepTimeFunction& step_time,
    const std::function<absl::StatusOr<int64_t>(const Schedule&, int)>& peak,
    const std::vector<int64_t>& limit) {
  BackwardMergeResult out;
  std::vector<bool> tried(schedule.pp, false);
  ASSIGN_OR_RETURN(StepTime current, step_time(schedule));
  const double initial_us = current.makespan_us;
  std::optional<Schedule> unmerged;  // the input, kept once a merge is
  // One round per rank at most: each round tries the latest untried rank.
  for (int round = 0; round < schedule.pp; ++round) {
    const int r = LatestUntried(current, tried);
    if (r < 0) break;
    tried[r] = true;
    std::optional<Candidate> candidate = MergeCandidate(schedule.ranks[r]);
    if (!candidate.has_value()) break;
    BackwardMergeDecision decision{.rank = r,
                                   .stage = candidate->i.stage,
                                   .microbatch = candidate->i.microbatch,
                                   .merged = false,
                                   .makespan_split_us = current.makespan_us,
                                   .makespan_merged_us = 0,
                                   .raises_peak = false};
    std::swap(schedule.ranks[r], candidate->program);  // the candidate, until refused
    ASSIGN_OR_RETURN(const int64_t bytes, peak(schedule, r));
    decision.raises_peak = bytes > limit[r];
    std::optional<StepTime> merged;
    if (!decision.raises_peak) {
      ASSIGN_OR_RETURN(merged, step_time(schedule));
      decision.makespan_merged_us = merged->makespan_us;
      decision.merged = merged->makespan_us <= current.makespan_us + kEpsilonUs &&
                        merged->rank_end_us[r] < current.rank_end_us[r] - kEpsilonUs;
    }
    out.decisions.push_back(decision);
    if (!decision.merged) {
      std::swap(schedule.ranks[r], candidate->program);  // the split, back
      break;  // the step ends on this rank: no other merge shortens it
    }
    if (!unmerged.has_value()) {
      unmerged = schedule;
      std::swap(unmerged->ranks[r], candidate->program);
    }
    // Ws may now move earlier around the B; the hoisting keeps only what
    // shortens the step further.
    ASSIGN_OR_RETURN(schedule, HoistWeightGradients(std::move(schedule), step_time, peak, limit));
    ASSIGN_OR_RETURN(current, step_time(schedule));
  }
  if (unmerged.has_value() && current.makespan_us >= initial_us - kEpsilonUs) {
    for (BackwardMergeDecision& d : out.decisions) {
      d.undone = d.merged;
      d.merged = false;
    }
    out.schedule = *std::move(unmerged);
    return out;
  }
  out.schedule = std::move(schedule);
  return out;
}

}  // namespace jitpipe
