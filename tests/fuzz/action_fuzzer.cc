// ParseAction on arbitrary text. Property (action.h): an action that parses
// formats to text that parses back to the same action, and that text is the
// input without its surrounding whitespace.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/action.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using jitpipe::fuzz::Check;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<jitpipe::Action> action = jitpipe::ParseAction(text);
  if (!action.ok()) {
    Check(action.status().code() == absl::StatusCode::kInvalidArgument, "ParseAction's code",
          action.status().ToString());
    return 0;
  }
  const std::string formatted = action->ToString();
  Check(formatted == absl::StripAsciiWhitespace(text), "ToString(ParseAction(text)) == text",
        formatted);
  absl::StatusOr<jitpipe::Action> again = jitpipe::ParseAction(formatted);
  Check(again.ok() && *again == *action, "ParseAction(ToString(a)) == a", formatted);
  return 0;
}
