// Helpers shared by the lowering passes: entry-invariant checks, building an
// output schedule, and dense (stage, microbatch) indexing.
//
// All functions are pure and thread-compatible.
#ifndef JITPIPE_SCHEDULER_ANALYSIS_PASS_UTILS_H_
#define JITPIPE_SCHEDULER_ANALYSIS_PASS_UTILS_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "scheduler/analysis/action_error.h"  // Where: how messages name an action
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// The checks every pass starts with: ValidateHeader(), then every action
// (and sub-action) names a stage this rank holds and, where its kind has one,
// a microbatch in [0, microbatches per chain). This is what a pass needs to
// index its tables safely; ordering is ValidateStructure()'s job.
// Errors: InvalidArgument naming the rank, index and action, e.g.
//   rank 1, index 3 (0F1): stage 0 lives on rank 0, not on this rank
absl::Status CheckIndices(const Schedule& schedule);

// The per-action part of CheckIndices(), for passes that fold it into their
// own sweep over the programs. A bubble passes.
// REQUIRES: ValidateHeader(schedule) passed.
absl::Status CheckActionIndices(const Schedule& schedule, int rank, size_t index,
                                const Action& action);

// The common case of CheckActionIndices(), inline for hot loops: a simple
// (not compound, not bubble) action whose stage this rank holds and whose
// microbatch, where its kind has one, is below `microbatches` (per chain).
// False means "ask CheckActionIndices()", not necessarily an error.
inline bool SimpleActionInRange(const Schedule& schedule, int rank, const Action& a,
                                uint32_t microbatches) {
  return !a.is_compound() && !a.is_bubble() &&
         static_cast<size_t>(a.stage) < schedule.stage_to_rank.size() &&
         schedule.stage_to_rank[a.stage] == rank &&
         (!HasMicrobatch(a.kind) || static_cast<uint32_t>(a.microbatch) < microbatches);
}

// CheckIndices() and, in the same sweep, a pass's entry invariant: the first
// action (bubbles included) for which `violates` holds is FailedPrecondition
//   rank 1, index 4 (1SEND_F0): expected <expectation>
template <typename Predicate>
absl::Status CheckProgram(const Schedule& schedule, absl::string_view expectation,
                          Predicate&& violates);

// Whether any action of the schedule has one of `kinds` (sub-actions included).
bool HasAnyKind(const Schedule& schedule, std::initializer_list<ActionKind> kinds);

// A copy of `in` with every field but the programs, which are `ranks`.
Schedule WithPrograms(const Schedule& in, std::vector<RankProgram> ranks, bool lowered);

// Index of (stage, microbatch) in dense per-(stage, microbatch) tables of
// num_stages() * microbatches_per_chain() entries.
inline size_t PhaseKey(const Schedule& s, int stage, int microbatch) {
  return static_cast<size_t>(stage) * static_cast<size_t>(s.microbatches_per_chain()) +
         static_cast<size_t>(microbatch);
}
inline size_t PhaseTableSize(const Schedule& s) {
  return static_cast<size_t>(s.num_stages()) * static_cast<size_t>(s.microbatches_per_chain());
}

// Copies of actions for the hot loops of passes over millions of actions:
// inline, and without the sub-action vector's out-of-line copy for the
// common simple action. Equal to the copy constructor / Action::Make.
inline Action CopyOf(const Action& a) {
  if (a.is_compound()) return a;
  Action copy;
  copy.kind = a.kind;
  copy.stage = a.stage;
  copy.microbatch = a.microbatch;
  return copy;
}
inline Action SimpleAction(ActionKind kind, int32_t stage, int32_t microbatch) {
  Action a;
  a.kind = kind;
  a.stage = stage;
  a.microbatch = microbatch;
  return a;
}

// --- implementation ---------------------------------------------------------

template <typename Predicate>
absl::Status CheckProgram(const Schedule& schedule, absl::string_view expectation,
                          Predicate&& violates) {
  if (absl::Status header = ValidateHeader(schedule); !header.ok()) return header;
  const auto microbatches = static_cast<uint32_t>(schedule.microbatches_per_chain());
  for (int r = 0; r < schedule.pp; ++r) {
    const RankProgram& program = schedule.ranks[r];
    for (size_t i = 0; i < program.size(); ++i) {
      const Action& a = program[i];
      if (violates(a)) {
        return absl::FailedPreconditionError(Where(r, i, a) + ": expected " +
                                             std::string(expectation));
      }
      if (SimpleActionInRange(schedule, r, a, microbatches)) continue;
      if (absl::Status s = CheckActionIndices(schedule, r, i, a); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_ANALYSIS_PASS_UTILS_H_
