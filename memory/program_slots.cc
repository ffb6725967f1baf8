#include "memory/program_slots.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

int* SlotFor(MicrobatchSlots& s, ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward: return &s.f;
    case ActionKind::kBackwardInput: return &s.i;
    case ActionKind::kBackwardWeight: return &s.w;
    case ActionKind::kBackward: return &s.b;
    case ActionKind::kRecvF: return &s.recv_f;
    case ActionKind::kRecvB: return &s.recv_b;
    case ActionKind::kSendF: return &s.send_f;
    case ActionKind::kSendB: return &s.send_b;
    case ActionKind::kWaitSendF: return &s.wait_send_f;
    case ActionKind::kWaitSendB: return &s.wait_send_b;
    default: return nullptr;
  }
}

}  // namespace

ProgramSlots::ProgramSlots(const Schedule& schedule, int rank)
    : schedule_(&schedule), program_(&schedule.ranks[rank]), rank_(rank),
      m_(schedule.microbatches_per_chain()),
      stages_(RankToStages(schedule.stage_to_rank, schedule.pp)[rank]),
      local_(schedule.num_stages(), kNoSlot) {
  for (size_t l = 0; l < stages_.size(); ++l) local_[stages_[l]] = static_cast<int>(l);
  slots_.assign(stages_.size() * m_, MicrobatchSlots{});
  stage_slots_.assign(stages_.size(), StageSlots{});
}

absl::StatusOr<ProgramSlots> ProgramSlots::Build(const Schedule& schedule, int rank) {
  ProgramSlots slots(schedule, rank);
  RETURN_IF_ERROR(slots.Index());
  for (int stage : slots.stages_) {
    for (int mb = 0; mb < slots.m_; ++mb) RETURN_IF_ERROR(slots.CheckOrder(stage, mb));
  }
  return slots;
}

bool ProgramSlots::PrevRemote(int stage) const {
  return !schedule_->IsFirstStage(stage) && schedule_->RankOf(stage - 1) != rank_;
}
bool ProgramSlots::PrevLocal(int stage) const {
  return !schedule_->IsFirstStage(stage) && schedule_->RankOf(stage - 1) == rank_;
}
bool ProgramSlots::NextRemote(int stage) const {
  return !schedule_->IsLastStage(stage) && schedule_->RankOf(stage + 1) != rank_;
}
bool ProgramSlots::NextLocal(int stage) const {
  return !schedule_->IsLastStage(stage) && schedule_->RankOf(stage + 1) == rank_;
}

int ProgramSlots::ComputeActionBefore(int index, int k) const {
  const int before = computes_before_[index];
  return before >= k ? compute_index_[before - k] : 0;
}

absl::Status ProgramSlots::Error(int index, absl::string_view what) const {
  return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, ", index ", index, " (",
                                                 (*program_)[index].ToString(), "): ", what));
}

absl::Status ProgramSlots::Index() {
  const int n = num_actions();
  computes_before_.resize(n);
  for (int index = 0; index < n; ++index) {
    const Action& action = (*program_)[index];
    computes_before_[index] = static_cast<int>(compute_index_.size());
    if (IsCompute(action.kind)) compute_index_.push_back(index);
    if (action.is_bubble()) return Error(index, "a bubble in a lowered program");
    if (action.is_compound()) {
      for (const Action& part : action.sub_actions) RETURN_IF_ERROR(Record(part, index));
    } else {
      RETURN_IF_ERROR(Record(action, index));
    }
  }
  return absl::OkStatus();
}

absl::Status ProgramSlots::Record(const Action& action, int index) {
  const int stage = action.stage;
  if (stage < 0 || stage >= schedule_->num_stages()) {
    return Error(index, absl::StrCat("stage ", stage, " does not exist (the schedule has ",
                                     schedule_->num_stages(), " stages)"));
  }
  if (local_[stage] == kNoSlot) {
    return Error(index, absl::StrCat("stage ", stage, " is on rank ", schedule_->RankOf(stage),
                                     ", not on rank ", rank_));
  }
  if (!HasMicrobatch(action.kind)) return RecordStageWide(action, index);
  if (action.microbatch < 0 || action.microbatch >= m_) {
    return Error(index, absl::StrCat("microbatch ", action.microbatch, " is out of range (",
                                     m_, " microbatches per chain)"));
  }
  int* slot = SlotFor(MutableAt(stage, action.microbatch), action.kind);
  if (*slot != kNoSlot) {
    return Error(index, absl::StrCat(action.ToString(), " already ran at index ", *slot));
  }
  *slot = index;
  if (IsSendRecv(action.kind)) {
    // RECV_F and SEND_B talk to the previous stage, SEND_F and RECV_B to the next.
    const bool previous = action.kind == ActionKind::kRecvF || action.kind == ActionKind::kSendB;
    if (!(previous ? PrevRemote(stage) : NextRemote(stage))) {
      return Error(index, absl::StrCat("stage ", stage, " has no ", previous ? "previous" : "next",
                                       " stage on another rank to ",
                                       IsSend(action.kind) ? "send to" : "receive from"));
    }
  }
  if (action.kind == ActionKind::kBackward || action.kind == ActionKind::kBackwardWeight) {
    int& first = stage_slots_[local_[stage]].first_grad;
    if (first == kNoSlot) first = index;
  }
  return absl::OkStatus();
}

absl::Status ProgramSlots::RecordStageWide(const Action& action, int index) {
  StageSlots& st = stage_slots_[local_[action.stage]];
  if (action.kind == ActionKind::kReduceGrad) {
    if (st.reduce != kNoSlot) {
      return Error(index, absl::StrCat(action.ToString(), " already ran at index ", st.reduce));
    }
    st.reduce = index;
    return absl::OkStatus();
  }
  if (action.kind == ActionKind::kWaitReduceGrad) {
    if (st.reduce == kNoSlot) {
      return Error(index, absl::StrCat("no REDUCE_GRAD of stage ", action.stage, " before it"));
    }
    if (st.wait_reduce != kNoSlot) {
      return Error(index,
                   absl::StrCat(action.ToString(), " already ran at index ", st.wait_reduce));
    }
    st.wait_reduce = index;
    return absl::OkStatus();
  }
  const bool open = !st.shards.empty() && st.shards.back().second == kNoSlot;
  if (action.kind == ActionKind::kUnshard) {
    if (open) {
      return Error(index, absl::StrCat("stage ", action.stage, " is already unsharded (at index ",
                                       st.shards.back().first, ")"));
    }
    st.shards.push_back({index, kNoSlot});
  } else {  // kReshard
    if (!open) return Error(index, absl::StrCat("stage ", action.stage, " is not unsharded"));
    st.shards.back().second = index;
  }
  return absl::OkStatus();
}

// Checks the orderings the lifetimes rely on for one (stage, microbatch).
absl::Status ProgramSlots::CheckOrder(int stage, int mb) const {
  const MicrobatchSlots& sl = At(stage, mb);
  auto id = [&] { return absl::StrCat("stage ", stage, " microbatch ", mb); };
  if (sl.wait_send_f != kNoSlot && (sl.send_f == kNoSlot || sl.send_f > sl.wait_send_f)) {
    return Error(sl.wait_send_f, absl::StrCat("no SEND_F of ", id(), " before it"));
  }
  if (sl.wait_send_b != kNoSlot && (sl.send_b == kNoSlot || sl.send_b > sl.wait_send_b)) {
    return Error(sl.wait_send_b, absl::StrCat("no SEND_B of ", id(), " before it"));
  }
  for (int later : {sl.i, sl.w, sl.b, sl.send_f, sl.send_b}) {
    if (later != kNoSlot && (sl.f == kNoSlot || later < sl.f)) {
      return Error(later, absl::StrCat("no F of ", id(), " before it"));
    }
  }
  if (sl.f == kNoSlot) {
    if (sl.recv_f != kNoSlot) return Error(sl.recv_f, absl::StrCat("no F of ", id(), " after it"));
    return absl::OkStatus();
  }
  if (PrevRemote(stage) && (sl.recv_f == kNoSlot || sl.recv_f > sl.f)) {
    return Error(sl.f, absl::StrCat("no RECV_F of ", id(), " before it"));
  }
  if (NextRemote(stage) && sl.send_f == kNoSlot) {
    return Error(sl.f, absl::StrCat("the output of ", id(), " is never sent (no SEND_F)"));
  }
  const int bw = sl.Backward();
  if (sl.send_b != kNoSlot && (bw == kNoSlot || sl.send_b < bw)) {
    return Error(sl.send_b, absl::StrCat("no I or B of ", id(), " before it"));
  }
  if (bw == kNoSlot) {
    if (sl.recv_b != kNoSlot) {
      return Error(sl.recv_b, absl::StrCat("no I or B of ", id(), " after it"));
    }
    return absl::OkStatus();
  }
  if (NextRemote(stage) && (sl.recv_b == kNoSlot || sl.recv_b > bw)) {
    return Error(bw, absl::StrCat("no RECV_B of ", id(), " before it"));
  }
  if (PrevRemote(stage) && sl.send_b == kNoSlot) {
    return Error(bw, absl::StrCat("the input gradient of ", id(), " is never sent (no SEND_B)"));
  }
  return absl::OkStatus();
}

}  // namespace jitpipe
