// The fast path of the JSON schedule reader (schedule_json.h): one pass over
// a well-formed document that reads "ranks" straight into programs, without
// building a JSON value per action (nlohmann::json did: 44 MB/s on a 10.7 MB
// lowered pp64 file, issue 19; this path reads it at several hundred MB/s).
//
// It decides nothing about the document's validity. It returns the header
// -- every top-level field but "ranks", each parsed by nlohmann::json on
// its own -- and the programs only when the document is one it reads
// exactly as ParseJsonDocument + the reader's per-action code would:
//   - a top-level object, JSON whitespace only, nothing after it;
//   - keys of printable ASCII without escapes, none twice;
//   - "ranks": an array of arrays whose items are null or strings of
//     printable ASCII without escapes, each a valid action (ParseAction);
//   - other values nested at most kMaxHeaderDepth deep, each accepted by
//     nlohmann::json::parse.
// Anything else -- every error, and shapes it does not take (escapes,
// non-ASCII text, a duplicate key, a byte-order mark) -- returns nullopt,
// and the caller reads the document the exact way, which says what is
// wrong (so error messages are the exact reader's, byte for byte).
#ifndef JITPIPE_SCHEDULER_IR_SCHEDULE_JSON_SCAN_H_
#define JITPIPE_SCHEDULER_IR_SCHEDULE_JSON_SCAN_H_

#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

struct ScannedScheduleJson {
  nlohmann::json header;            // an object: every field but "ranks"
  std::vector<RankProgram> ranks;   // as the file lists them
};

// Deeper header values (no valid schedule has any) take the exact path,
// which applies the document's depth limit.
inline constexpr int kMaxHeaderDepth = 8;

std::optional<ScannedScheduleJson> ScanScheduleJson(absl::string_view text);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_IR_SCHEDULE_JSON_SCAN_H_
