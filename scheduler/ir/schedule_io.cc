#include "scheduler/ir/schedule_io.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "scheduler/ir/schedule_json.h"

namespace jitpipe {
namespace {

absl::Status Prefixed(const std::string& path, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(path, ": ", status.message()));
}

bool LooksLikeJson(const std::string& text) {
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    return c == '{';
  }
  return false;
}

}  // namespace

absl::StatusOr<ScheduleFileFormat> FormatForOutput(const std::string& path) {
  if (absl::EndsWithIgnoreCase(path, ".json")) return ScheduleFileFormat::kJson;
  if (absl::EndsWithIgnoreCase(path, ".csv")) return ScheduleFileFormat::kCsv;
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": the output name must end in .json or .csv"));
}

absl::StatusOr<Schedule> LoadSchedule(const std::string& path,
                                      const CsvReadOptions& csv_options,
                                      std::uint64_t max_bytes) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path, max_bytes));
  bool json = absl::EndsWithIgnoreCase(path, ".json") ||
              (!absl::EndsWithIgnoreCase(path, ".csv") && LooksLikeJson(text));
  absl::StatusOr<Schedule> schedule =
      json ? ParseScheduleJson(text) : ParseScheduleCsv(text, csv_options);
  if (!schedule.ok()) return Prefixed(path, schedule.status());
  return schedule;
}

absl::Status SaveSchedule(const std::string& path, const Schedule& schedule) {
  ASSIGN_OR_RETURN(ScheduleFileFormat format, FormatForOutput(path));
  if (format == ScheduleFileFormat::kCsv) {
    return WriteFileAtomically(path, ScheduleToCsv(schedule));
  }
  // Streamed: the document is never whole in memory.
  ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::Create(path));
  WriteScheduleJson(schedule, [&file](absl::string_view piece) { file.Write(piece); });
  return file.Commit();
}

}  // namespace jitpipe
