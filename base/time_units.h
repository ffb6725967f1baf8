// Durations as people read them in tables and explanations: the unit that
// keeps the number short (JSON output keeps raw microseconds).
#ifndef JITPIPE_BASE_TIME_UNITS_H_
#define JITPIPE_BASE_TIME_UNITS_H_

#include <string>

namespace jitpipe {

// Microseconds in us, ms or s, four significant digits: "850 us",
// "12.35 ms", "6.170 s"; "0 us"; a non-finite value as "inf us" / "nan us".
std::string FormatMicros(double us);

}  // namespace jitpipe

#endif  // JITPIPE_BASE_TIME_UNITS_H_
