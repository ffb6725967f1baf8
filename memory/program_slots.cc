#include "memory/program_slots.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "scheduler/analysis/action_error.h"

namespace jitpipe {

ProgramSlots::ProgramSlots(const Schedule& schedule, const ProgramIndex& index, int rank)
    : schedule_(&schedule), index_(&index), rank_(rank),
      stages_(StagesOfRank(schedule.stage_to_rank, rank)),
      local_(schedule.num_stages(), kNoSlot) {
  for (size_t l = 0; l < stages_.size(); ++l) local_[stages_[l]] = static_cast<int>(l);
  stage_slots_.reserve(stages_.size());
  for (int stage : stages_) {
    StageSlots st;
    st.reduce = index.reduce_grad[stage];
    st.wait_reduce = index.wait_reduce_grad[stage];
    st.shards.assign(index.shards[stage].begin(), index.shards[stage].end());
    const size_t base = index.Key(stage, 0);
    for (size_t k = base; k < base + static_cast<size_t>(index.microbatches); ++k) {
      for (int32_t at : {ProgramIndex::Get(index.backward, k),
                         ProgramIndex::Get(index.backward_weight, k)}) {
        if (at != kAbsent && (st.first_grad == kNoSlot || at < st.first_grad)) st.first_grad = at;
      }
    }
    stage_slots_.push_back(std::move(st));
  }
}

absl::StatusOr<ProgramSlots> ProgramSlots::Build(const Schedule& schedule,
                                                 const ProgramIndex& index, int rank) {
  RETURN_IF_ERROR(index.FaultStatus(schedule, rank));
  ProgramSlots slots(schedule, index, rank);
  RETURN_IF_ERROR(slots.WalkProgram());
  for (int stage : slots.stages_) {
    for (int mb = 0; mb < index.microbatches; ++mb) RETURN_IF_ERROR(slots.CheckOrder(stage, mb));
  }
  return slots;
}

MicrobatchSlots ProgramSlots::At(int stage, int mb) const {
  const ProgramIndex& x = *index_;
  const size_t k = x.Key(stage, mb);
  MicrobatchSlots sl;
  sl.f = x.forward[k];
  sl.i = ProgramIndex::Get(x.backward_input, k);
  sl.w = ProgramIndex::Get(x.backward_weight, k);
  sl.b = ProgramIndex::Get(x.backward, k);
  sl.recv_f = x.recv_f[k];
  sl.recv_b = x.recv_b[k];
  sl.send_f = x.send_f[k];
  sl.send_b = x.send_b[k];
  sl.wait_send_f = ProgramIndex::Get(x.wait_send_f, k);
  sl.wait_send_b = ProgramIndex::Get(x.wait_send_b, k);
  return sl;
}

bool ProgramSlots::PrevRemote(int stage) const {
  const StageLink& link = index_->stages[stage];
  return link.prev_rank != kAbsent && link.prev_rank != rank_;
}
bool ProgramSlots::PrevLocal(int stage) const { return index_->stages[stage].prev_rank == rank_; }
bool ProgramSlots::NextRemote(int stage) const {
  const StageLink& link = index_->stages[stage];
  return link.next_rank != kAbsent && link.next_rank != rank_;
}
bool ProgramSlots::NextLocal(int stage) const { return index_->stages[stage].next_rank == rank_; }

int ProgramSlots::ComputeActionBefore(int index, int k) const {
  const auto before =
      std::lower_bound(computes_.begin(), computes_.end(), index) - computes_.begin();
  return before >= k ? computes_[before - k] : 0;
}

absl::Status ProgramSlots::Error(int index, absl::string_view what) const {
  return ActionError(rank_, index, schedule_->ranks[rank_][index], what);
}

// One walk of the rank's program: where its compute actions are, and that
// every SEND and RECV talks to a neighbour stage on another rank.
absl::Status ProgramSlots::WalkProgram() {
  const RankProgram& program = schedule_->ranks[rank_];
  for (int index = 0; index < static_cast<int>(program.size()); ++index) {
    const Action& action = program[index];
    if (IsCompute(action.kind)) {
      computes_.push_back(index);
      continue;
    }
    if (!IsSendRecv(action.kind)) continue;
    // RECV_F and SEND_B talk to the previous stage, SEND_F and RECV_B to the next.
    const bool previous = action.kind == ActionKind::kRecvF || action.kind == ActionKind::kSendB;
    if (!(previous ? PrevRemote(action.stage) : NextRemote(action.stage))) {
      return Error(index, absl::StrCat("stage ", action.stage, " has no ",
                                       previous ? "previous" : "next", " stage on another rank to ",
                                       IsSend(action.kind) ? "send to" : "receive from"));
    }
  }
  return absl::OkStatus();
}

// Checks the orderings the lifetimes rely on for one (stage, microbatch).
absl::Status ProgramSlots::CheckOrder(int stage, int mb) const {
  const MicrobatchSlots sl = At(stage, mb);
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
