// ParseScheduleJson on arbitrary bytes. Properties (schedule_json.h): what
// parses has a valid header and round-trips exactly through ScheduleToJson.
// A schedule that parses is also validated, which must not crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "scheduler/ir/schedule.h"
#include "scheduler/ir/schedule_json.h"
#include "scheduler/analysis/validate.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using jitpipe::fuzz::Check;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<jitpipe::Schedule> schedule = jitpipe::ParseScheduleJson(text);
  if (!schedule.ok()) {
    Check(schedule.status().code() == absl::StatusCode::kInvalidArgument,
          "ParseScheduleJson's code", schedule.status().ToString());
    return 0;
  }
  const absl::Status header = jitpipe::ValidateHeader(*schedule);
  Check(header.ok(), "a parsed schedule has a valid header", header.ToString());
  const std::string json = jitpipe::ScheduleToJson(*schedule);
  absl::StatusOr<jitpipe::Schedule> again = jitpipe::ParseScheduleJson(json);
  Check(again.ok(), "written JSON parses", again.status().ToString());
  Check(*again == *schedule, "JSON round trip returns an equal schedule", json);
  if (jitpipe::fuzz::SmallEnough(*schedule)) {
    jitpipe::fuzz::CheckNotInternal(jitpipe::Validate(*schedule), "Validate");
  }
  return 0;
}
