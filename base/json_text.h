// Hand-written JSON text: the one JSON string escaper (JsonQuote in
// json_document.h is this), and numbers for the streaming writers.
//
// nlohmann::json builds a tree per value; a trace of millions of events is
// formatted straight into a byte buffer instead, with these helpers. Every
// function appends to `out` and never fails: the caller checks numbers for
// finiteness and range first (see chrome_trace_writer.h).
//
// Thread safety: pure functions.
#ifndef JITPIPE_BASE_JSON_TEXT_H_
#define JITPIPE_BASE_JSON_TEXT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace jitpipe {

// Appends `s` as a quoted JSON string. '"', '\\' and control characters are
// escaped (\n, \t, ... or \u00XX); valid UTF-8 is copied as is; every byte
// that does not start a valid UTF-8 sequence (stray continuation bytes,
// overlong forms, surrogates, code points above U+10FFFF, truncated
// sequences) is replaced by U+FFFD, so the output is always valid JSON.
void AppendJsonString(std::string* out, absl::string_view s);

// Appends the shortest decimal text that reads back as exactly `value`
// ("3", "0.1", "1e+21").
// REQUIRES: std::isfinite(value); JSON has no NaN or infinity.
void AppendJsonDouble(std::string* out, double value);

// Appends an integer.
void AppendJsonInt(std::string* out, int64_t value);

// Appends a whole number of nanoseconds as exact decimal microseconds with
// at most three decimals: 1500 -> "1.5", 2000 -> "2", -1 -> "-0.001".
void AppendMicrosFromNanos(std::string* out, int64_t nanos);

// The same as a string (for error messages).
std::string MicrosFromNanos(int64_t nanos);

}  // namespace jitpipe

#endif  // JITPIPE_BASE_JSON_TEXT_H_
