#include "planning/pytorch_memory.h"

#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/parallel_for.h"
#include "base/status_macros.h"
#include "memory/liveness.h"
#include "scheduler/passes/add_wait_send.h"
#include "scheduler/passes/add_wait_send_budget.h"
#include "scheduler/analysis/pass_utils.h"

namespace jitpipe {
namespace {

bool HasWaitSends(const Schedule& s) {
  for (const RankProgram& program : s.ranks) {
    for (const Action& a : program) {
      if (IsWaitSend(a.kind)) return true;
    }
  }
  return false;
}

// The program without its WAIT_SENDs.
Schedule WithoutWaitSends(const Schedule& s) {
  std::vector<RankProgram> ranks(s.ranks.size());
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    ranks[r].reserve(s.ranks[r].size());
    for (const Action& a : s.ranks[r]) {
      if (!IsWaitSend(a.kind)) ranks[r].push_back(a);
    }
  }
  return WithPrograms(s, std::move(ranks), s.lowered);  // one copy of the actions, not two
}

// Rank r's jit peak when sent buffers without a WAIT_SEND go as `release`
// says.
absl::StatusOr<int64_t> PeakOfRank(const Schedule& s, const ProgramIndex& index,
                                   const Model& model, int r, SendRelease release) {
  LifetimeOptions options;
  options.send_release = release;
  ASSIGN_OR_RETURN(const RankBuffers buffers,
                   ComputeBufferLifetimes(s, index, model, r, options));
  return PeakOf(LiveBytes(buffers)).bytes;
}
absl::StatusOr<int64_t> PeakOfRank(const Schedule& s, const Model& model, int r,
                                   SendRelease release) {
  return PeakOfRank(s, ProgramIndex::BuildForRank(s, r), model, r, release);
}

// Rank r's pools and peaks under each send release (a policy whose program
// is an error has no peak).
absl::StatusOr<PyTorchMemoryRank> PlanRank(const Schedule& base,
                                           const absl::StatusOr<Schedule>& waits,
                                           const absl::StatusOr<Schedule>& budgeted,
                                           const Model& model, double arena_slack, int r) {
  PyTorchMemoryRank rank;
  rank.rank = r;
  const ProgramIndex base_index = ProgramIndex::BuildForRank(base, r);  // for both below
  ASSIGN_OR_RETURN(const RankBuffers received,
                   ComputeBufferLifetimes(base, base_index, model, r, LifetimeOptions{}));
  rank.pools = ComputeRecvPools(received, arena_slack);
  rank.peaks.poll = PeakOf(LiveBytes(received)).bytes;
  ASSIGN_OR_RETURN(rank.peaks.drain,
                   PeakOfRank(base, base_index, model, r, SendRelease::kStepEnd));
  if (waits.ok()) {
    ASSIGN_OR_RETURN(rank.peaks.wait_send, PeakOfRank(*waits, model, r, SendRelease::kStepEnd));
  }
  if (budgeted.ok()) {
    ASSIGN_OR_RETURN(rank.peaks.budget, PeakOfRank(*budgeted, model, r, SendRelease::kStepEnd));
  }
  return rank;
}

}  // namespace

absl::StatusOr<PyTorchMemory> PlanPyTorchMemory(const Schedule& lowered, const Model& model,
                                                const PyTorchMemoryOptions& options) {
  if (options.send_budget < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the send budget must be at least 1, not ", options.send_budget));
  }
  if (!(options.arena_slack >= 0) || std::isinf(options.arena_slack)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the arena slack must be a finite number >= 0, got ", options.arena_slack));
  }
  if (!lowered.lowered) {
    return absl::FailedPreconditionError("plan needs a lowered program; run jitpipe lower first");
  }
  RETURN_IF_ERROR(ValidateHeader(lowered));  // what the per-rank indexes below require
  // The usual lowering has no WAIT_SENDs: then the input is the base, not a
  // copy of it (a pp 128 program is 75 MB of actions).
  std::optional<Schedule> stripped;
  if (HasWaitSends(lowered)) stripped = WithoutWaitSends(lowered);
  const Schedule& base = stripped.has_value() ? *stripped : lowered;
  PyTorchMemory out;
  // The two placements of WAIT_SENDs are independent whole-program passes:
  // side by side.
  absl::StatusOr<Schedule> waits = absl::UnknownError("not run");
  absl::StatusOr<BudgetedProgram> at_budget = absl::UnknownError("not run");
  ParallelFor(2, options.threads, [&](int pass) {
    if (pass == 0) {
      waits = AddWaitSend(base);
    } else {
      at_budget = AddWaitSendAtSmallestBudget(base, {.budget = options.send_budget});
    }
  });
  if (!waits.ok()) out.wait_send_error = std::string(waits.status().message());
  absl::StatusOr<Schedule> budgeted = absl::UnknownError("not run");
  if (at_budget.ok()) {
    out.send_budget = at_budget->budget;
    budgeted = std::move(at_budget->program);
  } else {
    budgeted = at_budget.status();
  }
  if (!budgeted.ok()) out.budget_error = std::string(budgeted.status().message());
  // Ranks side by side; the first failing rank's error, as rank order
  // would give it.
  ASSIGN_OR_RETURN(out.ranks,
                   ParallelMap<PyTorchMemoryRank>(lowered.pp, options.threads, [&](int r) {
                     return PlanRank(base, waits, budgeted, model, options.arena_slack, r);
                   }));
  return out;
}

}  // namespace jitpipe
