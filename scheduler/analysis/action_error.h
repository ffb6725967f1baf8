// How every checker names an action that breaks a rule: one wording for the
// structure checker, the send/receive matcher, the planner's program slots
// and the lowering passes, so a program gets the same message from whichever
// of them meets the fault first.
//
//   rank 1, index 4 (1SEND_F0): <what>
//
// The "what" of the faults that ProgramIndex (program_index.h) flags while
// indexing — an action it cannot place in a table or one that repeats a
// slot — is worded here too.
#ifndef JITPIPE_SCHEDULER_ANALYSIS_ACTION_ERROR_H_
#define JITPIPE_SCHEDULER_ANALYSIS_ACTION_ERROR_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// "rank 1, index 4 (1SEND_F0)".
std::string Where(int rank, size_t index, const Action& action);

// InvalidArgument "rank R, index I (ACTION): what".
absl::Status ActionError(int rank, size_t index, const Action& action, absl::string_view what);

// The index checks of one simple action (or one part of a compound `top`,
// named in the message): its stage exists and lives on `rank`, and its
// microbatch, where its kind has one, is in [0, microbatches per chain).
// Errors: ActionError, e.g.
//   rank 1, index 3 (0F1): stage 0 lives on rank 0, not on this rank
absl::Status CheckPartIndices(const Schedule& schedule, int rank, size_t index,
                              const Action& top, const Action& part);

// A phase's name in messages: "forward", "full backward", "input backward",
// "weight backward".
absl::string_view PhaseName(ActionKind kind);

// The "what" of an action that repeats (kind, stage, microbatch) — or
// (kind, stage) for REDUCE_GRAD and WAIT_REDUCE_GRAD — first seen at
// `first`: "a second forward of stage 0 microbatch 1; the first is at index
// 3", "a second 1SEND_F2; the first is at index 5", "a second gradient
// reduction of stage 2; ...".
std::string RepeatWhat(const Action& part, int32_t first);

// The UNSHARD/RESHARD rule, for every checker: per stage, UNSHARD and
// RESHARD alternate, starting with UNSHARD (an UNSHARD may stay open to the
// end of the step). `open` is the index of the stage's open UNSHARD, or -1.
// The "what" of an UNSHARD or RESHARD at `index` that breaks it, or empty
// when it keeps it; then ShardNext gives the new `open`.
std::string ShardOrderWhat(const Action& shard, int32_t open);
inline int32_t ShardNext(ActionKind kind, int32_t open, int32_t index) {
  return kind == ActionKind::kUnshard ? index : (kind == ActionKind::kReshard ? -1 : open);
}

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_ANALYSIS_ACTION_ERROR_H_
