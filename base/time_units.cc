#include "base/time_units.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace jitpipe {

std::string FormatMicros(double us) {
  if (!std::isfinite(us)) return absl::StrFormat("%g us", us);
  const double magnitude = std::fabs(us);
  if (magnitude < 1e3) return absl::StrFormat("%.4g us", us);
  if (magnitude < 1e6) return absl::StrFormat("%.4g ms", us / 1e3);
  return absl::StrFormat("%.4g s", us / 1e6);
}

}  // namespace jitpipe
