// ParseScheduleCsv on arbitrary bytes. Properties (schedule_csv.h): what
// parses has a valid header, and writing it back out is a fixed point (the
// CSV written from the re-read schedule is the same text). A schedule that
// parses is also validated, which must not crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "scheduler/ir/schedule.h"
#include "scheduler/ir/schedule_csv.h"
#include "scheduler/analysis/validate.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using jitpipe::fuzz::Check;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  // The first byte's low bit picks the legacy backward names.
  const jitpipe::CsvReadOptions options{.legacy_backward_names = size > 0 && (data[0] & 1)};
  absl::StatusOr<jitpipe::Schedule> schedule = jitpipe::ParseScheduleCsv(text, options);
  if (!schedule.ok()) {
    Check(schedule.status().code() == absl::StatusCode::kInvalidArgument,
          "ParseScheduleCsv's code", schedule.status().ToString());
    return 0;
  }
  const absl::Status header = jitpipe::ValidateHeader(*schedule);
  Check(header.ok(), "a parsed CSV has a valid header", header.ToString());
  const std::string csv = jitpipe::ScheduleToCsv(*schedule);
  absl::StatusOr<jitpipe::Schedule> again = jitpipe::ParseScheduleCsv(csv);
  Check(again.ok(), "written CSV parses", again.status().ToString());
  Check(jitpipe::ScheduleToCsv(*again) == csv, "CSV round trip is a fixed point", csv);
  if (jitpipe::fuzz::SmallEnough(*schedule)) {
    jitpipe::fuzz::CheckNotInternal(jitpipe::Validate(*schedule), "Validate");
  }
  return 0;
}
