#include "tests/testing/unit_cost_replay.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

namespace jitpipe::testing {
namespace {

constexpr double kUnscheduled = -1;

double Cost(ActionKind kind) { return kind == ActionKind::kBackward ? 2 : 1; }

// End times per (stage, microbatch) and phase.
struct Ends {
  int mbs;
  std::vector<double> f, ib, w;
  Ends(int stages, int microbatches)
      : mbs(microbatches), f(stages * microbatches, kUnscheduled),
        ib(stages * microbatches, kUnscheduled), w(stages * microbatches, kUnscheduled) {}
  size_t Key(const Action& a) const { return static_cast<size_t>(a.stage) * mbs + a.microbatch; }
};

// When `part` may start, or kUnscheduled if a dependency has not run yet.
double ReadyTime(const Schedule& s, const Ends& e, const Action& part) {
  const int mbs = s.microbatches_per_chain();
  auto key = [&](int stage) { return static_cast<size_t>(stage) * mbs + part.microbatch; };
  switch (part.kind) {
    case ActionKind::kForward:
      return s.IsFirstStage(part.stage) ? 0 : e.f[key(part.stage - 1)];
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
      return s.IsLastStage(part.stage) ? e.f[key(part.stage)] : e.ib[key(part.stage + 1)];
    case ActionKind::kBackwardWeight:
      return e.ib[key(part.stage)];
    default:
      return 0;
  }
}

}  // namespace

double UnitCostResult::max_span() const {
  return span.empty() ? 0 : *std::max_element(span.begin(), span.end());
}

absl::StatusOr<UnitCostResult> ReplayUnitCosts(const Schedule& s) {
  const int pp = s.pp;
  Ends ends(s.num_stages(), s.microbatches_per_chain());
  std::vector<size_t> next(pp, 0);
  std::vector<double> free_at(pp, 0), first(pp, kUnscheduled);
  std::vector<int> live(pp, 0);
  UnitCostResult r;
  r.busy.assign(pp, 0);
  r.span.assign(pp, 0);
  r.peak_stage_units.assign(pp, 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int rank = 0; rank < pp; ++rank) {
      const RankProgram& program = s.ranks[rank];
      while (next[rank] < program.size()) {
        const Action& a = program[next[rank]];
        if (a.is_bubble() || !IsCompute(a.kind)) {
          ++next[rank];
          continue;
        }
        double start = free_at[rank];
        bool ready = true;
        double duration = 0;
        ForEachComputePart(a, [&](const Action& part) {
          double t = ReadyTime(s, ends, part);
          if (t == kUnscheduled) ready = false;
          start = std::max(start, t);
          duration += Cost(part.kind);
        });
        if (!ready) break;
        // Parts of a compound finish together at its end.
        double end = start + duration;
        ForEachComputePart(a, [&](const Action& part) {
          size_t k = ends.Key(part);
          if (part.kind == ActionKind::kForward) {
            ends.f[k] = end;
            ++live[rank];
          } else if (part.kind == ActionKind::kBackwardWeight) {
            ends.w[k] = end;
            --live[rank];
          } else {
            ends.ib[k] = end;
            if (part.kind == ActionKind::kBackward) --live[rank];
          }
          r.peak_stage_units[rank] = std::max(r.peak_stage_units[rank], live[rank]);
        });
        if (first[rank] == kUnscheduled) first[rank] = start;
        free_at[rank] = end;
        r.busy[rank] += duration;
        r.span[rank] = end - first[rank];
        r.makespan = std::max(r.makespan, end);
        ++next[rank];
        progress = true;
      }
    }
  }
  std::string stuck;
  for (int rank = 0; rank < pp; ++rank) {
    if (next[rank] < s.ranks[rank].size()) {
      absl::StrAppend(&stuck, " rank ", rank, " at index ", next[rank], " (",
                      s.ranks[rank][next[rank]].ToString(), ");");
    }
  }
  if (!stuck.empty()) return absl::FailedPreconditionError(absl::StrCat("no progress:", stuck));
  return r;
}

}  // namespace jitpipe::testing
