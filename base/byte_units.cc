#include "base/byte_units.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace jitpipe {

std::string FormatBytes(int64_t bytes) {
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 0) return absl::StrCat("-", FormatBytes(-bytes));
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.2f %s", value, kUnits[unit]);
}

std::string FormatSignedBytes(int64_t bytes) {
  return bytes >= 0 ? absl::StrCat("+", FormatBytes(bytes)) : FormatBytes(bytes);
}

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  const absl::string_view input = absl::StripAsciiWhitespace(text);
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\" is not a byte size (a number with an optional unit: B, KiB, MiB, GiB, "
        "TiB, KB, MB, GB, TB)"));
  };
  size_t digits = 0;
  while (digits < input.size() &&
         (absl::ascii_isdigit(input[digits]) || input[digits] == '.')) {
    ++digits;
  }
  const absl::string_view number = input.substr(0, digits);
  const absl::string_view unit = absl::StripAsciiWhitespace(input.substr(digits));
  static const std::pair<absl::string_view, double> kUnits[] = {
      {"", 1},          {"B", 1},         {"KiB", 1024.0},   {"MiB", 1048576.0},
      {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}, {"KB", 1e3}, {"MB", 1e6},
      {"GB", 1e9},      {"TB", 1e12}};
  double scale = 0;
  for (const auto& [name, factor] : kUnits) {
    if (unit == name) scale = factor;
  }
  double value = 0;
  if (number.empty() || scale == 0 || !absl::SimpleAtod(number, &value)) return bad();
  if (unit.empty() || unit == "B") {
    int64_t whole = 0;
    if (!absl::SimpleAtoi(number, &whole)) return bad();
    return whole;
  }
  const double bytes = std::floor(value * scale);
  if (!(bytes >= 0 && bytes < 9.2e18)) return bad();
  return static_cast<int64_t>(bytes);
}

}  // namespace jitpipe
