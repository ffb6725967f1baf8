// The jitpipe JSON schedule file (format "jitpipe.schedule", version 1).
// The format is documented in schedule_format.md, next to this file:
//
//   {"format": "jitpipe.schedule", "version": 1, "schedule": "interleaved-1f1b",
//    "pp": 4, "stages_per_rank": 2, "microbatches": 8, "placement": "loop",
//    "stage_to_rank": [0, 1, 2, 3, 0, 1, 2, 3], "lowered": false,
//    "ranks": [["0F0", "0F1", null, ...], ...]}
//
// "chains" (default 1) is written only when it differs from 1, "layout" (the
// layer cut, a Megatron-style string) only when known. Unknown keys
// are ignored: keys may be added within a version, none is renamed.
// "schedule", "placement", "stage_to_rank" and "lowered" may be left out (a
// hand-written file); they are then inferred from the programs as the CSV
// reader infers them (program_facts.h). The writer always writes them.
#ifndef JITPIPE_SCHEDULER_IR_SCHEDULE_JSON_H_
#define JITPIPE_SCHEDULER_IR_SCHEDULE_JSON_H_

#include <string>
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

inline constexpr absl::string_view kScheduleFormat = "jitpipe.schedule";
inline constexpr int kScheduleVersion = 1;

// Parses a schedule document and checks its header (ValidateHeader) and the
// header against the programs, but not the programs' ordering (that is
// validation's job). Left-out fields are inferred:
// - "lowered": true when any action communicates (SEND/RECV, UNSHARD,
//   RESHARD, REDUCE_GRAD);
// - "stage_to_rank": from a written "loop" or "v" placement; otherwise from
//   where each stage's actions are, with the placement detected (or kept
//   "custom"); the loop placement when some stage appears in no program
//   or a rank's program holds more than stages_per_rank stages;
// - "placement": detected from stage_to_rank.
// Errors: InvalidArgument naming the field, or the rank and index of a bad
// action, e.g. `rank 2, index 17 ("0F1x"): cannot parse action ...`; a
// written field the programs contradict, e.g.
//   "lowered" is false but rank 1, index 3 ("1SEND_F0") is a SEND_F; ...
//   rank 0, index 0 ("0F0"): stage 0 appears on rank 0, but "stage_to_rank" puts it on rank 1
// a bubble (null) in a lowered program, a stage on two ranks (inferred map).
absl::StatusOr<Schedule> ParseScheduleJson(absl::string_view text);

// Serialises a schedule: the header on the first lines, one line per rank.
std::string ScheduleToJson(const Schedule& schedule);

// The same bytes, handed to `sink` in pieces of at most a few tens of KiB and
// in order, so that a file is written without the whole document in memory
// (at pp 128 a lowered document is 75 MB of fresh pages: issue 19).
void WriteScheduleJson(const Schedule& schedule,
                       absl::FunctionRef<void(absl::string_view)> sink);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_IR_SCHEDULE_JSON_H_
