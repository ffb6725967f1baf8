// Defensive JSON parsing for every jitpipe file format.
//
// nlohmann::json throws; these helpers catch at the boundary and return
// absl::Status with a line and column, and refuse documents nested deeper
// than a fixed limit before parsing (destroying a deeply nested value
// recurses). Invalid UTF-8 inside strings is a parse error.
#ifndef JITPIPE_BASE_JSON_DOCUMENT_H_
#define JITPIPE_BASE_JSON_DOCUMENT_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace jitpipe {

inline constexpr int kMaxJsonDepth = 64;

// Parses `text`. Errors: InvalidArgument "line L, column C: <what>" for
// syntax errors, invalid UTF-8 and nesting deeper than kMaxJsonDepth.
absl::StatusOr<nlohmann::json> ParseJsonDocument(absl::string_view text);

// Checks "format" and "version" of a jitpipe file: the format must equal
// `format`, the version must be an integer in [1, max_version]. A newer
// version is refused as written by a newer jitpipe.
// Errors: InvalidArgument naming the field.
absl::Status CheckFormatAndVersion(const nlohmann::json& doc, absl::string_view format,
                                   int max_version);

// Typed field access with errors that name the field (and its parent path,
// e.g. "dp.size"). Integers must be integral JSON numbers in range.
absl::StatusOr<int64_t> GetInt(const nlohmann::json& obj, absl::string_view key,
                               absl::string_view path, int64_t min, int64_t max);
absl::StatusOr<std::string> GetString(const nlohmann::json& obj, absl::string_view key,
                                      absl::string_view path);
absl::StatusOr<bool> GetBool(const nlohmann::json& obj, absl::string_view key,
                             absl::string_view path);
absl::StatusOr<double> GetNumber(const nlohmann::json& obj, absl::string_view key,
                                 absl::string_view path);

// Converts a JSON value to an int64 in [min, max]; `what` names it in errors.
absl::StatusOr<int64_t> AsInt(const nlohmann::json& value, absl::string_view what, int64_t min,
                              int64_t max);

// The JSON text of a string (with quotes and escapes), for hand-written output.
std::string JsonQuote(absl::string_view s);

// A piece of input quoted for an error message: JsonQuote'd when at most
// kMaxQuotedBytes long; longer, its first 48 and last 12 bytes around "..."
// followed by its length, so that a 3 MB token makes a short message:
//   "0F11111111111111111111111111111111111111111111111...111111111111" (3000002 bytes)
inline constexpr size_t kMaxQuotedBytes = 64;
std::string QuoteForMessage(absl::string_view s);
// The same cut without the quotes, for text that is already JSON (a value's
// dump): 1e+999 stays 1e+999, a long array is abbreviated.
std::string AbbreviateForMessage(absl::string_view s);

}  // namespace jitpipe

#endif  // JITPIPE_BASE_JSON_DOCUMENT_H_
