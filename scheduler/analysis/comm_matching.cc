#include "scheduler/analysis/comm_matching.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "scheduler/analysis/action_error.h"
#include "scheduler/analysis/grid_report.h"

namespace jitpipe {
namespace {

// The text of the part of `top` that is `kind` (or, for kBackward, I or B)
// of (stage, microbatch); `top` itself when it is not a compound.
std::string PartText(const Action& top, int stage, int microbatch, ActionKind kind) {
  std::string text = top.ToString();
  ForEachComputePart(top, [&](const Action& part) {
    const bool backward = kind == ActionKind::kBackward &&
                          (part.kind == ActionKind::kBackwardInput || part.kind == kind);
    if (part.stage == stage && part.microbatch == microbatch && (part.kind == kind || backward)) {
      text = part.ToString();
    }
  });
  return text;
}

// Runs the checks of comm_matching.h over one lowered schedule. Pass 1
// records where everything is; pass 2 checks the rules over the tables and,
// only when they fail, each action in (rank, index) order.
class Matcher {
 public:
  Matcher(const Schedule& s, ProgramIndex index, int grid_rows)
      : s_(s), grid_rows_(grid_rows), mbs_(s.microbatches_per_chain()), pos_(std::move(index)) {}

  // The fast path: the rules checked over the index's dense tables. When
  // the index has a fault or a rule fails there, the exact checker runs over
  // the same tables to name the first violation in (rank, index) order; it
  // alone decides.
  absl::StatusOr<CommPositions> Run() {
    if (pos_.clean && TablesConsistent()) return std::move(pos_);
    return CheckEachAction();
  }

  // The exact checker alone (MatchSendRecvPerAction).
  absl::StatusOr<CommPositions> RunPerAction() { return CheckEachAction(); }

 private:
  // Every action in (rank, index) order. REQUIRES: Record() ran.
  absl::StatusOr<CommPositions> CheckEachAction() {
    for (int r = 0; r < s_.pp; ++r) {
      const RankProgram& program = s_.ranks[r];
      for (int32_t i = 0; i < static_cast<int32_t>(program.size()); ++i) {
        RETURN_IF_ERROR(Check(r, i, program[i]));
      }
    }
    return std::move(pos_);
  }

  size_t Key(int stage, int mb) const { return pos_.Key(stage, mb); }
  const std::vector<int32_t>& TableOf(ActionKind kind) const { return pos_.TableOf(kind); }

  // The rules of Check(), stated over the tables: per (stage, microbatch),
  // each transfer end crosses a link to another rank, has its partner, and a
  // SEND follows its producer; each compute input arrives earlier (a RECV
  // when the neighbour is remote, the neighbour's compute when it is here).
  // Key(s + 1, mb) is k + mbs_, Key(s - 1, mb) is k - mbs_.
  bool TablesConsistent() const {
    const size_t mbs = static_cast<size_t>(mbs_);
    for (int stage = 0; stage < s_.num_stages(); ++stage) {
      const StageLink& link = pos_.stages[stage];
      const bool has_prev = link.prev_rank != kAbsent;
      const bool has_next = link.next_rank != kAbsent;
      const bool prev_remote = has_prev && link.prev_rank != link.rank;
      const bool next_remote = has_next && link.next_rank != link.rank;
      const size_t base = Key(stage, 0);
      for (size_t k = base; k < base + mbs; ++k) {
        const int32_t send_f = pos_.send_f[k], recv_f = pos_.recv_f[k];
        const int32_t send_b = pos_.send_b[k], recv_b = pos_.recv_b[k];
        const int32_t f = pos_.forward[k], b = pos_.BackwardAt(k);
        const int32_t wait_f = ProgramIndex::Get(pos_.wait_send_f, k);
        const int32_t wait_b = ProgramIndex::Get(pos_.wait_send_b, k);
        bool ok = true;
        if (wait_f != kAbsent) ok &= send_f != kAbsent && send_f < wait_f;
        if (wait_b != kAbsent) ok &= send_b != kAbsent && send_b < wait_b;
        if (send_f != kAbsent) ok &= next_remote && f <= send_f && pos_.recv_f[k + mbs] != kAbsent;
        if (recv_f != kAbsent) ok &= prev_remote && pos_.send_f[k - mbs] != kAbsent;
        if (send_b != kAbsent) ok &= prev_remote && b <= send_b && pos_.recv_b[k - mbs] != kAbsent;
        if (recv_b != kAbsent) ok &= next_remote && pos_.send_b[k + mbs] != kAbsent;
        if (prev_remote) {
          ok &= recv_f != kAbsent && recv_f < f;
        } else if (has_prev) {
          ok &= pos_.forward[k - mbs] < f;
        }
        if (next_remote) {
          ok &= recv_b != kAbsent && recv_b < b;
        } else if (has_next) {
          ok &= pos_.BackwardAt(k + mbs) < b;
        }
        if (!ok) return false;
      }
    }
    return true;
  }

  absl::Status Error(int rank, int32_t index, absl::string_view what) const {
    absl::Status status = ActionError(rank, index, s_.ranks[rank][index], what);
    if (grid_rows_ <= 0) return status;
    return WithGrid(std::move(status), FormatGridExcerpt(s_.ranks, index, grid_rows_));
  }

  absl::Status Check(int r, int32_t i, const Action& a) {
    if (IsTransfer(a.kind)) return CheckTransferEnd(r, i, a);
    if (IsWaitSend(a.kind)) return CheckWaitSend(r, i, a);
    absl::Status status;
    ForEachComputePartFast(a, [&](const Action& part) {
      if (status.ok()) status = CheckInput(r, i, part);
    });
    return status;
  }

  // A SEND or RECV: a neighbour that exists on another rank, one of each,
  // a SEND after its producer, and a partner on the peer.
  absl::Status CheckTransferEnd(int r, int32_t i, const Action& a) {
    const bool forward = a.kind == ActionKind::kSendF || a.kind == ActionKind::kRecvF;
    const bool send = a.kind == ActionKind::kSendF || a.kind == ActionKind::kSendB;
    const int s = a.stage, mb = a.microbatch;
    // A forward transfer goes from stage s to s+1, a backward one from s to
    // s-1: the peer of a SEND_F or a RECV_B is the next stage.
    const bool peer_is_next = forward == send;
    const StageLink& link = pos_.stages[s];
    const int peer = peer_is_next ? link.next_rank : link.prev_rank;
    if (peer == kAbsent) {
      return Error(r, i, absl::StrCat("stage ", s, " is the ", peer_is_next ? "last" : "first",
                                      " stage of its chain; it has no ",
                                      peer_is_next ? "next" : "previous", " stage to ",
                                      send ? "send to" : "receive from"));
    }
    const int peer_stage = peer_is_next ? s + 1 : s - 1;
    if (peer == r) {
      return Error(r, i, absl::StrCat("stages ", std::min(s, peer_stage), " and ",
                                      std::max(s, peer_stage), " are both on rank ", r,
                                      "; the V turn hands over locally, without SEND/RECV"));
    }
    const int32_t first = TableOf(a.kind)[Key(s, mb)];
    if (first != i) {
      return Error(r, i, RepeatWhat(a, first));
    }
    if (send) {
      const ActionKind producer = forward ? ActionKind::kForward : ActionKind::kBackward;
      const size_t key = Key(s, mb);
      const int32_t at = forward ? pos_.forward[key] : pos_.BackwardAt(key);
      if (at > i) {
        return Error(r, i, absl::StrCat("its data is produced later, at index ", at, " (",
                                        PartText(s_.ranks[r][at], s, mb, producer), ")"));
      }
    }
    const ActionKind partner_kind =
        send ? (forward ? ActionKind::kRecvF : ActionKind::kRecvB)
             : (forward ? ActionKind::kSendF : ActionKind::kSendB);
    if (TableOf(partner_kind)[Key(peer_stage, mb)] == kAbsent) {
      return Error(r, i, absl::StrCat("no matching ",
                                      Action::Make(partner_kind, peer_stage, mb).ToString(),
                                      " on rank ", peer));
    }
    return absl::OkStatus();
  }

  // A WAIT_SEND: once, after the SEND it waits for on this rank.
  absl::Status CheckWaitSend(int r, int32_t i, const Action& a) {
    const int32_t first = TableOf(a.kind)[Key(a.stage, a.microbatch)];
    if (first != i) {
      return Error(r, i, RepeatWhat(a, first));
    }
    const ActionKind send_kind = WaitedSendKind(a.kind);
    const Action send = Action::Make(send_kind, a.stage, a.microbatch);
    const int32_t at = TableOf(send_kind)[Key(a.stage, a.microbatch)];
    if (at == kAbsent) {
      return Error(r, i, absl::StrCat("waits for ", send.ToString(),
                                      ", which this rank never posts"));
    }
    if (at > i) {
      return Error(r, i, absl::StrCat("waits for ", send.ToString(), ", which comes later, at index ",
                                      at));
    }
    return absl::OkStatus();
  }

  // A compute part's input from the neighbouring stage: through a RECV
  // earlier in this program when that stage is remote, else the
  // neighbour's own compute earlier on this rank.
  absl::Status CheckInput(int r, int32_t i, const Action& part) {
    const int s = part.stage, mb = part.microbatch;
    const bool forward = part.kind == ActionKind::kForward;
    if (!forward && part.kind != ActionKind::kBackward &&
        part.kind != ActionKind::kBackwardInput) {
      return absl::OkStatus();  // W reads only what its own I left behind
    }
    const int from_rank = forward ? pos_.stages[s].prev_rank : pos_.stages[s].next_rank;
    if (from_rank == kAbsent) return absl::OkStatus();  // a chain's end
    const int from_stage = forward ? s - 1 : s + 1;
    if (from_rank != r) {
      const ActionKind recv = forward ? ActionKind::kRecvF : ActionKind::kRecvB;
      const int32_t at = TableOf(recv)[Key(s, mb)];
      if (at != kAbsent && at < i) return absl::OkStatus();
      std::string what = absl::StrCat("needs ", Action::Make(recv, s, mb).ToString(),
                                      " earlier in this rank's program");
      if (at == kAbsent) {
        absl::StrAppend(&what, " (stage ", from_stage, " is on rank ", from_rank, ")");
      } else {
        absl::StrAppend(&what, "; it is at index ", at);
      }
      return Error(r, i, what);
    }
    const size_t from_key = Key(from_stage, mb);
    const int32_t at = forward ? pos_.forward[from_key] : pos_.BackwardAt(from_key);
    if (at < i) return absl::OkStatus();
    const ActionKind kind = forward ? ActionKind::kForward : ActionKind::kBackward;
    return Error(r, i, absl::StrCat("needs ", PartText(s_.ranks[r][at], from_stage, mb, kind),
                                    " earlier on this rank (stages ", std::min(s, from_stage),
                                    " and ", std::max(s, from_stage), " are both on rank ", r,
                                    "); it is at index ", at));
  }

  const Schedule& s_;
  const int grid_rows_;
  const int mbs_;
  CommPositions pos_;
};

absl::Status RequireLowered(const Schedule& schedule) {
  if (schedule.lowered) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "send/receive matching needs a lowered schedule; this one is compute-only");
}

}  // namespace

absl::StatusOr<CommPositions> MatchSendRecv(const Schedule& schedule, int grid_rows) {
  RETURN_IF_ERROR(RequireLowered(schedule));
  return Matcher(schedule, ProgramIndex::Build(schedule), grid_rows).Run();
}

absl::StatusOr<CommPositions> MatchSendRecvPerAction(const Schedule& schedule, int grid_rows) {
  RETURN_IF_ERROR(RequireLowered(schedule));
  return Matcher(schedule, ProgramIndex::Build(schedule), grid_rows).RunPerAction();
}

}  // namespace jitpipe
