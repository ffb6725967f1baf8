// The jitpipe JSON schedule file (format "jitpipe.schedule", version 1).
// The format is documented in docs/file_formats.md:
//
//   {"format": "jitpipe.schedule", "version": 1, "schedule": "interleaved-1f1b",
//    "pp": 4, "stages_per_rank": 2, "microbatches": 8, "placement": "loop",
//    "stage_to_rank": [0, 1, 2, 3, 0, 1, 2, 3], "lowered": false,
//    "ranks": [["0F0", "0F1", null, ...], ...]}
//
// "chains" (default 1) is written only when it differs from 1. Unknown keys
// are ignored: keys may be added within a version, none is renamed.
#ifndef JITPIPE_SCHEDULER_IR_SCHEDULE_JSON_H_
#define JITPIPE_SCHEDULER_IR_SCHEDULE_JSON_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

inline constexpr absl::string_view kScheduleFormat = "jitpipe.schedule";
inline constexpr int kScheduleVersion = 1;

// Parses a schedule document and checks its header (ValidateHeader), but not
// the programs' ordering (that is validation's job). Bubbles (null) are
// refused in a lowered program.
// Errors: InvalidArgument naming the field, or the rank and index of a bad
// action, e.g. `rank 2, index 17 ("0F1x"): cannot parse action ...`.
absl::StatusOr<Schedule> ParseScheduleJson(absl::string_view text);

// Serialises a schedule: the header on the first lines, one line per rank.
std::string ScheduleToJson(const Schedule& schedule);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_IR_SCHEDULE_JSON_H_
