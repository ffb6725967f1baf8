#include "scheduler/analysis/grid_report.h"

#include <algorithm>

#include "absl/strings/cord.h"
#include "absl/types/optional.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "scheduler/ir/format_grid.h"

namespace jitpipe {
namespace {

size_t LongestProgram(const std::vector<RankProgram>& ranks) {
  size_t n = 0;
  for (const RankProgram& p : ranks) n = std::max(n, p.size());
  return n;
}

// "Step 007" for step 7 of a grid whose step numbers have `digits` digits.
std::string StepLabel(size_t step, size_t digits) {
  std::string n = absl::StrCat(step);
  return absl::StrCat("Step ", std::string(digits > n.size() ? digits - n.size() : 0, '0'), n);
}

size_t Digits(size_t num_steps) { return absl::StrCat(num_steps == 0 ? 0 : num_steps - 1).size(); }

}  // namespace

absl::Status WithGrid(absl::Status status, absl::string_view grid) {
  status.SetPayload(kGridPayloadUrl, absl::Cord(grid));
  return status;
}

std::optional<std::string> GridOf(const absl::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(kGridPayloadUrl);
  if (!payload.has_value()) return std::nullopt;
  return std::string(*payload);
}

std::string FormatGridExcerpt(const std::vector<RankProgram>& ranks, int error_step,
                              int max_rows) {
  const size_t num_steps = LongestProgram(ranks);
  const size_t rows = static_cast<size_t>(max_rows);
  if (num_steps <= rows) return FormatPipelineOrder(ranks, error_step);

  // The window [lo, hi) of steps shown, centred on error_step where possible.
  const size_t centred = static_cast<size_t>(std::max(0, error_step - max_rows / 2));
  const size_t lo = std::min(centred, num_steps - rows);
  const size_t hi = lo + rows;
  std::vector<RankProgram> window(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    const size_t begin = std::min(lo, ranks[r].size()), end = std::min(hi, ranks[r].size());
    window[r].assign(ranks[r].begin() + begin, ranks[r].begin() + end);
  }
  const std::string text = FormatPipelineOrder(window, error_step - static_cast<int>(lo));

  // Renumber the window's rows ("Step 0" ...) with the grid's step numbers.
  const size_t window_label = StepLabel(0, Digits(rows)).size();
  const size_t digits = Digits(num_steps);
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  std::string out(StepLabel(0, digits).size() + 2, ' ');
  absl::StrAppend(&out, lines[0].substr(window_label + 2), "\n");
  if (lo > 0) absl::StrAppend(&out, "  (steps 0-", lo - 1, " not shown)\n");
  for (size_t k = 0; k < rows; ++k) {
    absl::StrAppend(&out, StepLabel(lo + k, digits), lines[k + 1].substr(window_label), "\n");
  }
  if (hi < num_steps) absl::StrAppend(&out, "  (steps ", hi, "-", num_steps - 1, " not shown)\n");
  return out;
}

}  // namespace jitpipe
