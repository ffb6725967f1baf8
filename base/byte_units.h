// Byte sizes as people write them: on the command line, in tables and in
// explanations (the CLI, planning).
#ifndef JITPIPE_BASE_BYTE_UNITS_H_
#define JITPIPE_BASE_BYTE_UNITS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace jitpipe {

// "1023 B", "1.50 KiB", "80.00 GiB" (binary units, two decimals).
std::string FormatBytes(int64_t bytes);
// FormatBytes with a sign: "-3.20 GiB", "+512 B".
std::string FormatSignedBytes(int64_t bytes);

// A byte count: a whole number, optionally with a unit, binary (KiB, MiB,
// GiB, TiB) or decimal (KB, MB, GB, TB); a fraction is allowed with a unit
// ("1.5GiB"). Errors: InvalidArgument
//   "80XB" is not a byte size (a number with an optional unit: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);

}  // namespace jitpipe

#endif  // JITPIPE_BASE_BYTE_UNITS_H_
