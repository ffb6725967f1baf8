#include "scheduler/analysis/validate_structure.h"

#include "absl/strings/string_view.h"
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "scheduler/analysis/action_error.h"
#include "scheduler/analysis/pass_utils.h"

namespace jitpipe {
namespace {

constexpr int32_t kUnseen = -1;

// Where each phase of one (stage, microbatch) was seen: the program index, or
// kUnseen. One record per pair, so a check touches one cache line.
struct PhaseSlots {
  int32_t forward = kUnseen;
  int32_t backward_input = kUnseen;
  int32_t full_backward = kUnseen;
  int32_t backward_weight = kUnseen;
};

class StructureChecker {
 public:
  explicit StructureChecker(const Schedule& s)
      : s_(s), mbs_(s.microbatches_per_chain()),
        table_(static_cast<size_t>(s.num_stages()) * s.microbatches_per_chain()),
        reduced_at_(s.num_stages(), kUnseen), reduce_waited_at_(s.num_stages(), kUnseen),
        unsharded_at_(s.num_stages(), kUnseen) {}

  absl::Status Run() {
    for (int r = 0; r < s_.pp; ++r) {
      const RankProgram& program = s_.ranks[r];
      for (size_t i = 0; i < program.size(); ++i) {
        RETURN_IF_ERROR(CheckAction(r, static_cast<int32_t>(i), program[i]));
      }
    }
    return CheckComplete();
  }

 private:
  absl::Status Error(int rank, int32_t index, const Action& action, absl::string_view what) const {
    return ActionError(rank, index, action, what);
  }

  absl::Status CheckAction(int rank, int32_t index, const Action& a) {
    if (a.is_bubble()) {
      if (s_.lowered) return Error(rank, index, a, "a bubble in a lowered program");
      return absl::OkStatus();
    }
    if (!IsCompute(a.kind)) {
      if (!s_.lowered) {
        return Error(rank, index, a,
                     absl::StrCat(KindName(a.kind),
                                  " in a compute-only program (lowered is false)"));
      }
      RETURN_IF_ERROR(CheckPartIndices(s_, rank, index, a, a));
      if (HasMicrobatch(a.kind)) return absl::OkStatus();
      return CheckStageWide(rank, index, a);
    }
    if (a.is_compound() && a.sub_actions.empty()) {
      return Error(rank, index, a, "an OVERLAP_F_B without sub-actions");
    }
    absl::Status status;
    ForEachComputePart(a, [&](const Action& part) {
      if (status.ok()) status = CheckPhase(rank, index, a, part);
    });
    return status;
  }

  // REDUCE_GRAD at most once per stage, its WAIT_REDUCE_GRAD at most once
  // and after it; UNSHARD and RESHARD as action_error.h's ShardOrderWhat says.
  absl::Status CheckStageWide(int rank, int32_t index, const Action& a) {
    int32_t& reduced = reduced_at_[a.stage];
    int32_t& waited = reduce_waited_at_[a.stage];
    int32_t& unsharded = unsharded_at_[a.stage];
    switch (a.kind) {
      case ActionKind::kReduceGrad:
        if (reduced != kUnseen) {
          return Error(rank, index, a, RepeatWhat(a, reduced));
        }
        reduced = index;
        return absl::OkStatus();
      case ActionKind::kWaitReduceGrad:
        if (reduced == kUnseen) {
          return Error(rank, index, a,
                       absl::StrCat("waits for the gradient reduction of stage ", a.stage,
                                    ", which has not started (no REDUCE_GRAD before it)"));
        }
        if (waited != kUnseen) {
          return Error(rank, index, a, RepeatWhat(a, waited));
        }
        waited = index;
        return absl::OkStatus();
      case ActionKind::kUnshard:
      case ActionKind::kReshard:
        if (std::string what = ShardOrderWhat(a, unsharded); !what.empty()) {
          return Error(rank, index, a, what);
        }
        unsharded = ShardNext(a.kind, unsharded, index);
        return absl::OkStatus();
      default:
        return absl::OkStatus();
    }
  }

  absl::Status CheckPhase(int rank, int32_t index, const Action& top, const Action& part) {
    RETURN_IF_ERROR(CheckPartIndices(s_, rank, index, top, part));
    const size_t key = static_cast<size_t>(part.stage) * mbs_ + part.microbatch;
    // Messages are built only on failure: this runs once per compute action.
    auto subject = [&] {
      return absl::StrCat(PhaseName(part.kind), " of stage ", part.stage, " microbatch ",
                          part.microbatch);
    };
    auto duplicate = [&](int32_t first) { return Error(rank, index, top, RepeatWhat(part, first)); };
    PhaseSlots& slots = table_[key];
    const int32_t f = slots.forward;
    const int32_t i = slots.backward_input;
    const int32_t b = slots.full_backward;
    const int32_t w = slots.backward_weight;
    switch (part.kind) {
      case ActionKind::kForward:
        if (f != kUnseen) return duplicate(f);
        slots.forward = index;
        return absl::OkStatus();
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
        if (f == kUnseen) {
          return Error(rank, index, top, absl::StrCat(subject(), " comes before its forward"));
        }
        if (b != kUnseen) return duplicate(b);
        if (i != kUnseen) return duplicate(i);
        (part.kind == ActionKind::kBackward ? slots.full_backward : slots.backward_input) = index;
        return absl::OkStatus();
      case ActionKind::kBackwardWeight:
        if (w != kUnseen) return duplicate(w);
        if (b != kUnseen) {
          return Error(rank, index, top,
                       absl::StrCat(subject(), " after the full backward at index ", b,
                                    "; B already computes weight gradients (W needs an I) (files from "
                                    "the zero-bubble repository use B for the input backward: "
                                    "pass --legacy-names)"));
        }
        if (i == kUnseen) {
          return Error(rank, index, top,
                       absl::StrCat(subject(), " comes before its input backward (I)"));
        }
        slots.backward_weight = index;
        return absl::OkStatus();
      default:
        return Error(rank, index, top, "is not a compute action");
    }
  }

  absl::Status CheckComplete() const {
    for (int stage = 0; stage < s_.num_stages(); ++stage) {
      for (int mb = 0; mb < mbs_; ++mb) {
        const PhaseSlots& slots = table_[static_cast<size_t>(stage) * mbs_ + mb];
        const bool complete = slots.forward != kUnseen &&
                              (slots.full_backward != kUnseen || slots.backward_input != kUnseen) &&
                              (slots.backward_input == kUnseen || slots.backward_weight != kUnseen);
        if (!complete) return IncompleteError(stage, mb, slots);
      }
    }
    return absl::OkStatus();
  }

  absl::Status IncompleteError(int stage, int mb, const PhaseSlots& slots) const {
    std::string where = absl::StrCat("rank ", s_.RankOf(stage), ": stage ", stage);
    if (slots.forward == kUnseen) {
      return absl::InvalidArgumentError(absl::StrCat(where, " has no forward for microbatch ", mb));
    }
    if (slots.full_backward == kUnseen && slots.backward_input == kUnseen) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " has no backward (B or I) for microbatch ", mb));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        where, " has an input backward (I) but no weight backward (W) for microbatch ", mb,
        " (I at index ", slots.backward_input, ")"));
  }

  const Schedule& s_;
  const int mbs_;
  std::vector<PhaseSlots> table_;  // by stage * mbs_ + microbatch
  std::vector<int32_t> reduced_at_;        // per stage: its REDUCE_GRAD's index
  std::vector<int32_t> reduce_waited_at_;  // per stage: its WAIT_REDUCE_GRAD's index
  std::vector<int32_t> unsharded_at_;      // per stage: the open UNSHARD's index
};

// The fast path: the same rules, with one byte of state per (stage,
// microbatch) and per stage instead of the indices messages need, and no
// message. True when the schedule breaks no rule; on false, StructureChecker
// runs from the start to name the first violation. REQUIRES: ValidateHeader.
class FastStructureCheck {
 public:
  explicit FastStructureCheck(const Schedule& s)
      : s_(s), mbs_(static_cast<uint32_t>(s.microbatches_per_chain())),
        phases_(static_cast<size_t>(s.num_stages()) * mbs_, 0), stages_(s.num_stages(), 0) {}

  bool Run() {
    for (int r = 0; r < s_.pp; ++r) {
      for (const Action& a : s_.ranks[r]) {
        if (!Accept(r, a)) return false;
      }
    }
    for (uint8_t phases : phases_) {
      const bool complete =
          (phases & kF) && (phases & (kB | kI)) && (!(phases & kI) || (phases & kW));
      if (!complete) return false;
    }
    return true;
  }

 private:
  static constexpr uint8_t kF = 1, kI = 2, kB = 4, kW = 8;  // phases_ bits
  static constexpr uint8_t kReduced = 1, kUnsharded = 2, kReduceWaited = 4;  // stages_ bits

  // One rule: sets `bit` in `state` when every bit of `needs` is set and
  // none of `forbids`; returns whether it did (false: the action breaks it).
  static bool Advance(uint8_t& state, uint8_t bit, uint8_t needs, uint8_t forbids) {
    if ((state & needs) != needs || (state & forbids) != 0) return false;
    state |= bit;
    return true;
  }

  bool Accept(int rank, const Action& a) {
    switch (a.kind) {
      case ActionKind::kForward:
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
      case ActionKind::kBackwardWeight:
        return AcceptPhase(rank, a);
      case ActionKind::kOverlapFB:
        if (a.sub_actions.empty()) return false;
        for (const Action& part : a.sub_actions) {
          if (!IsCompute(part.kind) || part.is_compound() || !AcceptPhase(rank, part)) {
            return false;
          }
        }
        return true;
      case ActionKind::kBubble:
        return !s_.lowered;
      case ActionKind::kReduceGrad:
      case ActionKind::kWaitReduceGrad:
      case ActionKind::kUnshard:
      case ActionKind::kReshard:
        return s_.lowered && SimpleActionInRange(s_, rank, a, mbs_) && AcceptStageWide(a);
      default:  // SEND_F, RECV_F, SEND_B, RECV_B, WAIT_SEND_F, WAIT_SEND_B
        return s_.lowered && SimpleActionInRange(s_, rank, a, mbs_);
    }
  }

  bool AcceptPhase(int rank, const Action& part) {
    if (!SimpleActionInRange(s_, rank, part, mbs_)) return false;
    uint8_t& phases = phases_[static_cast<size_t>(part.stage) * mbs_ + part.microbatch];
    switch (part.kind) {
      case ActionKind::kForward:
        return Advance(phases, kF, /*needs=*/0, /*forbids=*/kF);
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
        return Advance(phases, part.kind == ActionKind::kBackward ? kB : kI, kF, kB | kI);
      default:  // kBackwardWeight
        return Advance(phases, kW, kI, kW | kB);
    }
  }

  bool AcceptStageWide(const Action& a) {
    uint8_t& state = stages_[a.stage];
    switch (a.kind) {
      case ActionKind::kReduceGrad:
        return Advance(state, kReduced, /*needs=*/0, /*forbids=*/kReduced);
      case ActionKind::kWaitReduceGrad:
        return Advance(state, kReduceWaited, /*needs=*/kReduced, /*forbids=*/kReduceWaited);
      case ActionKind::kUnshard:
        return Advance(state, kUnsharded, /*needs=*/0, /*forbids=*/kUnsharded);
      default:  // kReshard
        if (!(state & kUnsharded)) return false;
        state &= ~kUnsharded;
        return true;
    }
  }

  const Schedule& s_;
  const uint32_t mbs_;
  std::vector<uint8_t> phases_;  // by stage * mbs_ + microbatch: kF | kI | kB | kW
  std::vector<uint8_t> stages_;  // by stage: kReduced | kUnsharded | kReduceWaited
};

}  // namespace

absl::Status ValidateStructure(const Schedule& schedule) {
  RETURN_IF_ERROR(ValidateHeader(schedule));
  if (FastStructureCheck(schedule).Run()) return absl::OkStatus();
  return StructureChecker(schedule).Run();
}

absl::Status ValidateStructurePerAction(const Schedule& schedule) {
  RETURN_IF_ERROR(ValidateHeader(schedule));
  return StructureChecker(schedule).Run();
}

}  // namespace jitpipe
