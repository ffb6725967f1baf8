#include "scheduler/analysis/message_index.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "scheduler/analysis/comm_matching.h"  // ForEachComputePartFast

namespace jitpipe {

MessageIndex::MessageIndex(const Schedule& s, const ProgramIndex& x)
    : s_(&s),
      links_(x.stages),
      mbs_(static_cast<size_t>(s.microbatches_per_chain())),
      table_(PhaseTableSize(s)),
      info_(2 * table_),
      pair_index_(s.pp), late_recv_(s.pp, false) {}

absl::StatusOr<MessageIndex> MessageIndex::Build(const Schedule& schedule) {
  RETURN_IF_ERROR(ValidateHeader(schedule));
  if (!schedule.lowered) {
    return absl::FailedPreconditionError(
        "expected a lowered program (sends and receives placed, e.g. by "
        "LowerSendRecvEarly); this one is compute-only");
  }
  const ProgramIndex x = ProgramIndex::Build(schedule);
  if (!x.clean) {
    for (int r = 0; r < schedule.pp; ++r) RETURN_IF_ERROR(x.FaultStatus(schedule, r));
  }
  MessageIndex index(schedule, x);
  RETURN_IF_ERROR(index.Index());
  return index;
}

Action MessageIndex::RecvAction(int32_t m) const {
  const bool forward = static_cast<size_t>(m) < table_;
  const size_t key = static_cast<size_t>(m) - (forward ? 0 : table_);
  return SimpleAction(forward ? ActionKind::kRecvF : ActionKind::kRecvB,
                      static_cast<int32_t>(key / mbs_), static_cast<int32_t>(key % mbs_));
}

absl::Status MessageIndex::IndexRecv(int rank, int32_t index, const Action& a) {
  const bool forward = a.kind == ActionKind::kRecvF;
  const StageLink& link = links_[a.stage];
  if ((forward ? link.prev_rank : link.next_rank) == kAbsent) {
    return absl::FailedPreconditionError(absl::StrCat(
        Where(rank, index, a), ": nothing sends to this stage in that direction"));
  }
  const int32_t m = Id(forward, a.stage, a.microbatch);
  info_[m].receiver = rank;
  // Only the stage's own rank consumes m, so a consumer already seen stands
  // before this RECV.
  if (info_[m].consumer != kAbsent) late_recv_[rank] = true;
  return absl::OkStatus();
}

absl::Status MessageIndex::IndexSend(int rank, int32_t index, const Action& a) {
  auto fail = [&](absl::string_view what) {
    return absl::FailedPreconditionError(absl::StrCat(Where(rank, index, a), ": ", what));
  };
  const bool forward = a.kind == ActionKind::kSendF;
  const int to = forward ? links_[a.stage].next_rank : links_[a.stage].prev_rank;
  if (to == kAbsent) return fail("the stage has no neighbour in that direction");
  if (to == rank) return fail("a send between two stages of one rank");
  Info& info = info_[OfSend(a)];
  info.sender = rank;
  PairSlot& p = pair_index_(rank, to);
  if (p.id == kAbsent) {
    p.id = static_cast<int32_t>(pair_sizes_.size());
    pair_sizes_.push_back(0);
  }
  info.pair = p.id;
  info.order = pair_sizes_[p.id]++;
  return absl::OkStatus();
}

absl::Status MessageIndex::Index() {
  // A walk of every rank's program: the index has checked every action, so
  // only the transfers and consumers are looked at (errors in (rank, index)
  // order; pairs numbered in order of first SEND).
  for (int r = 0; r < s_->pp; ++r) {
    const RankProgram& program = s_->ranks[r];
    int32_t non_recvs = 0;  // non-RECV actions before index i
    for (int32_t i = 0; i < static_cast<int32_t>(program.size()); ++i) {
      const Action& a = program[i];
      if (IsRecv(a.kind)) {
        RETURN_IF_ERROR(IndexRecv(r, i, a));
        continue;
      }
      if (IsSend(a.kind)) {
        RETURN_IF_ERROR(IndexSend(r, i, a));
      } else {
        ForEachComputePartFast(a, [&](const Action& leaf) {
          const int32_t m = Consumes(leaf);
          if (m != kNoMessage && info_[m].consumer == kAbsent) info_[m].consumer = non_recvs;
        });
      }
      ++non_recvs;
    }
  }
  RETURN_IF_ERROR(CheckMatched());
  BuildSequences();
  return absl::OkStatus();
}

void MessageIndex::BuildSequences() {
  pair_offsets_.assign(pair_sizes_.size() + 1, 0);
  for (size_t p = 0; p < pair_sizes_.size(); ++p) {
    pair_offsets_[p + 1] = pair_offsets_[p] + static_cast<size_t>(pair_sizes_[p]);
  }
  sequence_data_.assign(pair_offsets_.back(), kNoMessage);
  for (size_t m = 0; m < info_.size(); ++m) {
    const Info& info = info_[m];
    if (info.sender == kAbsent) continue;
    sequence_data_[pair_offsets_[info.pair] + static_cast<size_t>(info.order)] =
        static_cast<int32_t>(m);
  }
}

absl::Status MessageIndex::CheckMatched() const {
  for (size_t m = 0; m < info_.size(); ++m) {
    const Info& info = info_[m];
    if (info.receiver == kAbsent && info.sender == kAbsent) continue;
    if (info.receiver != kAbsent && info.sender != kAbsent && info.consumer != kAbsent) continue;
    const Action recv = RecvAction(static_cast<int32_t>(m));
    if (info.sender == kAbsent) {
      return absl::FailedPreconditionError(
          absl::StrCat("rank ", info.receiver, ": ", recv.ToString(), " has no matching send"));
    }
    if (info.receiver == kAbsent) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", info.sender, ": a send to stage ", recv.stage, " has no matching ",
          recv.ToString(), " on rank ", s_->RankOf(recv.stage)));
    }
    // A stage's actions all live on its rank, so the consumer is on the RECV's rank.
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", info.receiver, ": ", recv.ToString(), " has no consumer on that rank"));
  }
  return absl::OkStatus();
}

}  // namespace jitpipe
