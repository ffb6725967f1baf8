#include "scheduler/passes/add_wait_send.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "scheduler/analysis/comm_matching.h"
#include "scheduler/analysis/pass_utils.h"
#include "scheduler/analysis/validate_structure.h"

namespace jitpipe {
namespace {

// Index spaces: rank; program index; (stage, microbatch) keys of the
// matcher's dense tables.
class WaitPlacer {
 public:
  WaitPlacer(const Schedule& s, const CommPositions& positions) : s_(s), pos_(positions) {
    waited_.assign(PhaseTableSize(s), false);
    for (int r = 0; r < s.pp; ++r) {
      for (const Action& a : s.ranks[r]) {
        if (a.kind == ActionKind::kWaitSendF) waited_[PhaseKey(s, a.stage, a.microbatch)] = true;
      }
    }
  }

  // Rank r's program with a WAIT_SEND_F after the action holding the
  // backward of each sent activation that has none yet.
  absl::StatusOr<RankProgram> Place(int r) const {
    const RankProgram& program = s_.ranks[r];
    RankProgram out;
    out.reserve(program.size() + program.size() / 4);
    int32_t open = 0;  // SEND_Fs seen whose wait is still to come
    for (size_t i = 0; i < program.size(); ++i) {
      const Action& a = program[i];
      out.push_back(a);
      if (a.kind == ActionKind::kSendF && !waited_[PhaseKey(s_, a.stage, a.microbatch)]) ++open;
      ForEachComputePart(a, [&](const Action& part) {
        if (part.kind != ActionKind::kBackward && part.kind != ActionKind::kBackwardInput) return;
        const int32_t send = pos_.At(pos_.send_f, part.stage, part.microbatch);
        if (send == kAbsent || send > static_cast<int32_t>(i)) return;
        if (waited_[PhaseKey(s_, part.stage, part.microbatch)]) return;
        out.push_back(Action::Make(ActionKind::kWaitSendF, part.stage, part.microbatch));
        --open;
      });
    }
    if (open > 0) return Unplaced(r);
    return out;
  }

 private:
  // The first SEND_F of rank r with no backward after it to wait behind.
  absl::Status Unplaced(int r) const {
    const RankProgram& program = s_.ranks[r];
    for (size_t i = 0; i < program.size(); ++i) {
      const Action& a = program[i];
      if (a.kind != ActionKind::kSendF || waited_[PhaseKey(s_, a.stage, a.microbatch)]) continue;
      bool backward_after = false;
      for (size_t j = i + 1; j < program.size() && !backward_after; ++j) {
        ForEachComputePart(program[j], [&](const Action& part) {
          backward_after |= part.stage == a.stage && part.microbatch == a.microbatch &&
                            (part.kind == ActionKind::kBackward ||
                             part.kind == ActionKind::kBackwardInput);
        });
      }
      if (!backward_after) {
        return absl::InvalidArgumentError(absl::StrCat(
            Where(r, i, a), ": no backward of stage ", a.stage, " microbatch ", a.microbatch,
            " after it on this rank, so no point proves the send complete"));
      }
    }
    return absl::InternalError(absl::StrCat("rank ", r, ": a SEND_F left without its wait"));
  }

  const Schedule& s_;
  const CommPositions& pos_;
  std::vector<bool> waited_;  // per (stage, microbatch): a WAIT_SEND_F exists already
};

}  // namespace

absl::StatusOr<Schedule> AddWaitSend(const Schedule& in) {
  if (!in.lowered) {
    return absl::FailedPreconditionError(
        "add_wait_send needs a lowered program (its sends placed); this one is compute-only");
  }
  RETURN_IF_ERROR(ValidateStructure(in));
  ASSIGN_OR_RETURN(const CommPositions positions, MatchSendRecv(in));
  const WaitPlacer placer(in, positions);
  std::vector<RankProgram> ranks;
  ranks.reserve(in.pp);
  for (int r = 0; r < in.pp; ++r) {
    ASSIGN_OR_RETURN(RankProgram program, placer.Place(r));
    ranks.push_back(std::move(program));
  }
  return WithPrograms(in, std::move(ranks), /*lowered=*/true);
}

}  // namespace jitpipe
