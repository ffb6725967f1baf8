// Schedule files on disk: jitpipe JSON or PyTorch CSV, chosen by extension
// (".json", ".csv") or, for other names, by content (a leading "{" is JSON).
#ifndef JITPIPE_SCHEDULER_IR_SCHEDULE_IO_H_
#define JITPIPE_SCHEDULER_IR_SCHEDULE_IO_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/atomic_file.h"
#include "scheduler/ir/schedule.h"
#include "scheduler/ir/schedule_csv.h"

namespace jitpipe {

enum class ScheduleFileFormat { kJson, kCsv };

// The format for an output path by its extension. Errors: InvalidArgument
// when the extension is neither .json nor .csv.
absl::StatusOr<ScheduleFileFormat> FormatForOutput(const std::string& path);

// Reads and parses a schedule file. Every error message starts with the
// path: "sched.csv: line 3, cell 18 (rank 2, index 17) ...".
// Errors: NotFound / Unavailable for I/O, InvalidArgument for content,
// ResourceExhausted for a file longer than `max_bytes` (base/atomic_file.h).
absl::StatusOr<Schedule> LoadSchedule(const std::string& path,
                                      const CsvReadOptions& csv_options = {},
                                      std::uint64_t max_bytes = kDefaultMaxInputBytes);

// Writes the schedule atomically in the format the extension names.
absl::Status SaveSchedule(const std::string& path, const Schedule& schedule);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_IR_SCHEDULE_IO_H_
