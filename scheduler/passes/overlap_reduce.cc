#include "scheduler/passes/overlap_reduce.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "scheduler/analysis/pass_utils.h"

namespace jitpipe {
namespace {

constexpr int32_t kNone = -1;
constexpr int32_t kNever = std::numeric_limits<int32_t>::max();

// Stage -> its position among the rank's stages (kNone when not on the rank).
std::vector<int32_t> LocalIndex(const Schedule& s, int rank, int* count) {
  std::vector<int32_t> local(s.num_stages(), kNone);
  int n = 0;
  for (int stage = 0; stage < s.num_stages(); ++stage) {
    if (s.RankOf(stage) == rank) local[stage] = n++;
  }
  *count = n;
  return local;
}

bool HoldsGradient(ActionKind kind) {
  return kind == ActionKind::kBackward || kind == ActionKind::kBackwardWeight;
}

// One position of the program that holds a standalone W.
struct WSlot {
  int32_t position = 0;
  int32_t local_stage = 0;
  int32_t region = 0;      // UNSHARD/RESHARD actions seen before it
  int32_t i_position = 0;  // where its I ran
};

struct StageInfo {
  int32_t first_gradient = kNever;  // its first W or B (parameter gradients allocated)
  int32_t completion = kNone;       // its last W or B
  int32_t gradient_parts = 0;
  int32_t reduce_position = kNone;  // its REDUCE_GRAD in the input
  std::vector<int32_t> ws;          // its W slots, in order
};

// What the reordering needs to know about one rank's program. Index spaces:
// program position, W slot (the k-th W of the program), local stage,
// local stage x microbatch.
struct RankAnalysis {
  std::vector<WSlot> slots;
  std::vector<StageInfo> stages;  // by local stage
};

absl::StatusOr<RankAnalysis> Analyze(const Schedule& s, int rank,
                                     const std::vector<int32_t>& local, int num_local) {
  const RankProgram& program = s.ranks[rank];
  const int mbs = s.microbatches_per_chain();
  RankAnalysis out;
  out.stages.resize(num_local);
  std::vector<int32_t> i_position(static_cast<size_t>(num_local) * mbs, kNone);
  int32_t region = 0;
  for (int32_t p = 0; p < static_cast<int32_t>(program.size()); ++p) {
    const Action& a = program[p];
    if (a.kind == ActionKind::kUnshard || a.kind == ActionKind::kReshard) ++region;
    if (a.kind == ActionKind::kReduceGrad) {
      StageInfo& info = out.stages[local[a.stage]];
      if (info.reduce_position != kNone) {
        return absl::InvalidArgumentError(
            absl::StrCat(Where(rank, p, a), ": a second REDUCE_GRAD for stage ", a.stage));
      }
      info.reduce_position = p;
    }
    ForEachComputePart(a, [&](const Action& part) {
      const int32_t l = local[part.stage];
      if (part.kind == ActionKind::kBackwardInput) {
        i_position[static_cast<size_t>(l) * mbs + part.microbatch] = p;
      }
      if (!HoldsGradient(part.kind)) return;
      StageInfo& info = out.stages[l];
      info.first_gradient = std::min(info.first_gradient, p);
      info.completion = p;
      ++info.gradient_parts;
    });
    if (a.kind != ActionKind::kBackwardWeight) continue;
    const int32_t l = local[a.stage];
    const int32_t i_at = i_position[static_cast<size_t>(l) * mbs + a.microbatch];
    if (i_at == kNone) {
      return absl::InvalidArgumentError(absl::StrCat(Where(rank, p, a), ": W before its I"));
    }
    out.stages[l].ws.push_back(static_cast<int32_t>(out.slots.size()));
    out.slots.push_back({p, l, region, i_at});
  }
  return out;
}

// The W (by its original slot) placed at each slot: the first `keep` slots
// keep theirs; at each later slot, the next W of the highest-priority stage
// that may run there. Priority: stages with a REDUCE_GRAD first, then by
// their completion in the input.
absl::StatusOr<std::vector<int32_t>> AssignSlots(const RankAnalysis& rank, size_t keep) {
  const size_t n = rank.slots.size();
  std::vector<int32_t> by_priority(rank.stages.size());
  for (size_t l = 0; l < by_priority.size(); ++l) by_priority[l] = static_cast<int32_t>(l);
  std::stable_sort(by_priority.begin(), by_priority.end(), [&](int32_t a, int32_t b) {
    const StageInfo& x = rank.stages[a];
    const StageInfo& y = rank.stages[b];
    return std::make_pair(x.reduce_position == kNone, x.completion) <
           std::make_pair(y.reduce_position == kNone, y.completion);
  });
  std::vector<int32_t> assignment(n);
  std::vector<size_t> head(rank.stages.size(), 0);  // next W of each stage
  for (size_t j = 0; j < keep && j < n; ++j) {
    assignment[j] = static_cast<int32_t>(j);
    ++head[rank.slots[j].local_stage];
  }
  for (size_t j = keep; j < n; ++j) {
    const WSlot& at = rank.slots[j];
    std::optional<int32_t> chosen;
    for (int32_t l : by_priority) {
      const StageInfo& info = rank.stages[l];
      if (head[l] == info.ws.size()) continue;
      const WSlot& w = rank.slots[info.ws[head[l]]];
      if (w.region == at.region && w.i_position < at.position &&
          info.first_gradient <= at.position) {
        chosen = l;
        break;
      }
    }
    // Some stage is always behind its input order here, and its next W may
    // run at this slot; reaching this is a bug.
    if (!chosen.has_value()) {
      return absl::InternalError(absl::StrCat("overlap_reduce: no W may run at position ",
                                              at.position));
    }
    assignment[j] = rank.stages[*chosen].ws[head[*chosen]++];
  }
  return assignment;
}

// The rank's program with Ws placed by `assignment` and each REDUCE_GRAD
// right after its stage's last W or B and the sends and receives that follow
// it.
RankProgram Emit(const RankProgram& program, const RankAnalysis& rank,
                 const std::vector<int32_t>& assignment, const std::vector<int32_t>& local) {
  RankProgram out;
  out.reserve(program.size());
  std::vector<int32_t> done(rank.stages.size(), 0);
  std::vector<int32_t> pending;  // stages whose REDUCE_GRAD is due
  size_t slot = 0;
  auto flush = [&] {
    for (int32_t stage : pending) out.push_back(Action::StageWide(ActionKind::kReduceGrad, stage));
    pending.clear();
  };
  for (size_t p = 0; p < program.size(); ++p) {
    const Action& original = program[p];
    if (!IsSendRecv(original.kind)) flush();
    if (original.kind == ActionKind::kReduceGrad) {
      // Kept in place only for a stage without gradients on this rank.
      if (rank.stages[local[original.stage]].gradient_parts == 0) out.push_back(original);
      continue;
    }
    const Action& a = original.kind == ActionKind::kBackwardWeight
                          ? program[rank.slots[assignment[slot++]].position]
                          : original;
    out.push_back(CopyOf(a));
    ForEachComputePart(a, [&](const Action& part) {
      if (!HoldsGradient(part.kind)) return;
      const StageInfo& info = rank.stages[local[part.stage]];
      if (++done[local[part.stage]] == info.gradient_parts && info.reduce_position != kNone) {
        pending.push_back(part.stage);
      }
    });
  }
  flush();
  return out;
}

int64_t UnitPeak(const Schedule& s, int rank, const RankProgram& program) {
  int num_local = 0;
  const std::vector<int32_t> local = LocalIndex(s, rank, &num_local);
  const int mbs = s.microbatches_per_chain();
  // Per local stage x microbatch: where its activation is created and last used.
  std::vector<int32_t> created(static_cast<size_t>(num_local) * mbs, kNone);
  std::vector<int32_t> last_use(created.size(), kNone);
  for (int32_t p = 0; p < static_cast<int32_t>(program.size()); ++p) {
    ForEachComputePart(program[p], [&](const Action& part) {
      const size_t key = static_cast<size_t>(local[part.stage]) * mbs + part.microbatch;
      (part.kind == ActionKind::kForward ? created : last_use)[key] = p;
    });
  }
  // live(p) = activations created at or before p and not last used before p.
  std::vector<int64_t> delta(program.size() + 1, 0);
  for (size_t k = 0; k < created.size(); ++k) {
    if (created[k] == kNone) continue;
    ++delta[created[k]];
    const int32_t end = std::max(created[k], last_use[k]);
    --delta[end + 1];
  }
  int64_t live = 0, peak = 0;
  for (int64_t d : delta) {
    live += d;
    peak = std::max(peak, live);
  }
  return peak;
}

// Evaluates a rank's peak with a candidate program, through the caller's
// function on a probe copy of the schedule, or in activation units.
class PeakProbe {
 public:
  PeakProbe(const Schedule& in, const RankPeakFunction& f) : in_(in), f_(f) {}

  absl::StatusOr<int64_t> Peak(int rank, RankProgram& program) {
    if (!f_) return UnitPeak(in_, rank, program);
    if (!probe_.has_value()) probe_ = in_;
    std::swap(probe_->ranks[rank], program);
    absl::StatusOr<int64_t> peak = f_(*probe_, rank);
    std::swap(probe_->ranks[rank], program);
    return peak;
  }

 private:
  const Schedule& in_;
  const RankPeakFunction& f_;
  std::optional<Schedule> probe_;
};

// Rank r's output program: the full reordering if the peak allows it, else
// the reordering of the shortest suffix of W slots that keeps the peak.
absl::StatusOr<RankProgram> OverlapRank(const Schedule& in, int rank, PeakProbe& probe) {
  int num_local = 0;
  const std::vector<int32_t> local = LocalIndex(in, rank, &num_local);
  ASSIGN_OR_RETURN(RankAnalysis analysis, Analyze(in, rank, local, num_local));
  const RankProgram& program = in.ranks[rank];
  auto candidate = [&](size_t keep) -> absl::StatusOr<RankProgram> {
    ASSIGN_OR_RETURN(std::vector<int32_t> assignment, AssignSlots(analysis, keep));
    return Emit(program, analysis, assignment, local);
  };
  ASSIGN_OR_RETURN(RankProgram full, candidate(0));
  if (full == program) return full;
  RankProgram original = program;
  ASSIGN_OR_RETURN(const int64_t limit, probe.Peak(rank, original));
  ASSIGN_OR_RETURN(const int64_t peak, probe.Peak(rank, full));
  if (peak <= limit) return full;
  // Bisection over the number of W slots kept as in the input: `lo` slots
  // are known to raise the peak, `hi` (n + 1: none found yet) keep it.
  size_t lo = 0, hi = analysis.slots.size() + 1;
  std::optional<RankProgram> best;
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    ASSIGN_OR_RETURN(RankProgram p, candidate(mid));
    ASSIGN_OR_RETURN(const int64_t mid_peak, probe.Peak(rank, p));
    if (mid_peak <= limit) {
      best = std::move(p);
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return best.has_value() ? *std::move(best) : original;
}

}  // namespace

absl::StatusOr<OverlapReduceResult> OverlapReduceWithReport(const Schedule& in,
                                                            const OverlapReduceOptions& options) {
  if (!in.lowered) {
    return absl::FailedPreconditionError(
        "overlap_reduce needs a lowered program with REDUCE_GRAD; lower with reduce_grad first");
  }
  RETURN_IF_ERROR(CheckIndices(in));
  if (!HasAnyKind(in, {ActionKind::kReduceGrad})) {
    return absl::FailedPreconditionError(
        "overlap_reduce needs REDUCE_GRAD actions; lower with reduce_grad first");
  }
  PeakProbe probe(in, options.rank_peak);
  std::vector<RankProgram> ranks;
  ranks.reserve(in.pp);
  for (int r = 0; r < in.pp; ++r) {
    ASSIGN_OR_RETURN(RankProgram program, OverlapRank(in, r, probe));
    ranks.push_back(std::move(program));
  }
  Schedule out = WithPrograms(in, std::move(ranks), /*lowered=*/true);
  if (!options.step_time) return OverlapReduceResult{std::move(out), {}};
  // The memory limit of every rank is its input peak, as above.
  auto peak = [&](const Schedule& s, int rank) -> absl::StatusOr<int64_t> {
    if (options.rank_peak) return options.rank_peak(s, rank);
    return ActivationUnitPeak(s, rank);
  };
  std::vector<int64_t> limit(in.pp);
  for (int r = 0; r < in.pp; ++r) {
    ASSIGN_OR_RETURN(limit[r], peak(in, r));
    ASSIGN_OR_RETURN(const int64_t now, peak(out, r));
    limit[r] = std::max(limit[r], now);
  }
  ASSIGN_OR_RETURN(out, HoistWeightGradients(std::move(out), options.step_time, peak, limit));
  if (options.last_backward == LastBackward::kKeepSplit) {
    return OverlapReduceResult{std::move(out), {}};
  }
  ASSIGN_OR_RETURN(BackwardMergeResult merged,
                   MergeLastBackwards(std::move(out), options.step_time, peak, limit));
  return OverlapReduceResult{std::move(merged.schedule), std::move(merged.decisions)};
}

absl::StatusOr<Schedule> OverlapReduce(const Schedule& in, const OverlapReduceOptions& options) {
  ASSIGN_OR_RETURN(OverlapReduceResult result, OverlapReduceWithReport(in, options));
  return std::move(result.schedule);
}

int64_t ActivationUnitPeak(const Schedule& schedule, int rank) {
  return UnitPeak(schedule, rank, schedule.ranks[rank]);
}

}  // namespace jitpipe
