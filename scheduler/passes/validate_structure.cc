#include "scheduler/passes/validate_structure.h"

#include "absl/strings/string_view.h"
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "scheduler/analysis/action_error.h"
#include "scheduler/passes/pass_utils.h"

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
  // and after it; UNSHARD and RESHARD alternate, starting with UNSHARD (an
  // UNSHARD may stay open to the end of the step).
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
        if (unsharded != kUnseen) {
          return Error(rank, index, a,
                       absl::StrCat("stage ", a.stage, " is already unsharded (UNSHARD at index ",
                                    unsharded, ", no RESHARD since)"));
        }
        unsharded = index;
        return absl::OkStatus();
      case ActionKind::kReshard:
        if (unsharded == kUnseen) {
          return Error(rank, index, a,
                       absl::StrCat("stage ", a.stage, " is not unsharded (no UNSHARD before it)"));
        }
        unsharded = kUnseen;
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

// The fast path: the rules over the program index's tables. True when the
// schedule breaks no rule; false when it may (the index has a fault, or two
// phases share a compound's index, whose order within the compound the
// tables do not keep): StructureChecker then decides and names the first
// violation. The index's sweep already enforced the stage-wide rules.
bool StructureHolds(const ProgramIndex& x) {
  if (!x.clean) return false;
  for (size_t k = 0; k < x.forward.size(); ++k) {
    const int32_t f = x.forward[k], b = x.backward[k];
    const int32_t i = x.backward_input[k], w = x.backward_weight[k];
    if (f == kAbsent) return false;
    if (b != kAbsent) {
      if (i != kAbsent || w != kAbsent || b <= f) return false;
    } else if (i == kAbsent || w == kAbsent || i <= f || w <= i) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::Status ValidateStructure(const Schedule& schedule) {
  RETURN_IF_ERROR(ValidateHeader(schedule));
  return ValidateStructure(schedule, ProgramIndex::Build(schedule));
}

absl::Status ValidateStructure(const Schedule& schedule, const ProgramIndex& index) {
  if (StructureHolds(index)) return absl::OkStatus();
  return StructureChecker(schedule).Run();
}

absl::Status ValidateStructurePerAction(const Schedule& schedule) {
  RETURN_IF_ERROR(ValidateHeader(schedule));
  return StructureChecker(schedule).Run();
}

}  // namespace jitpipe
