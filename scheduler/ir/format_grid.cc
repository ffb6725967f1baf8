#include "scheduler/ir/format_grid.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace jitpipe {
namespace {

void AppendPadded(std::string& out, const std::string& text, size_t width) {
  out += text;
  if (text.size() < width) out.append(width - text.size(), ' ');
}

}  // namespace

std::string FormatPipelineOrder(const std::vector<RankProgram>& ranks,
                                std::optional<int> error_step) {
  const size_t num_ranks = ranks.size();
  size_t num_steps = 0;
  for (const RankProgram& p : ranks) num_steps = std::max(num_steps, p.size());
  const size_t digits = absl::StrCat(num_steps == 0 ? 0 : num_steps - 1).size();

  auto step_label = [&](size_t i) {
    std::string n = absl::StrCat(i);
    return absl::StrCat("Step ", std::string(digits > n.size() ? digits - n.size() : 0, '0'), n);
  };
  // Cell text per (rank, step); "" past the end of a rank's program.
  std::vector<std::vector<std::string>> cells(num_ranks, std::vector<std::string>(num_steps));
  for (size_t r = 0; r < num_ranks; ++r) {
    for (size_t i = 0; i < ranks[r].size(); ++i) cells[r][i] = ranks[r][i].ToString();
  }
  // PyTorch zips the step labels with the rank columns, so rank i's width
  // also counts the label of step i (where that step exists).
  std::vector<size_t> width(num_ranks, 0);
  for (size_t r = 0; r < num_ranks; ++r) {
    if (r < num_steps) width[r] = step_label(r).size();
    for (const std::string& c : cells[r]) width[r] = std::max(width[r], c.size());
  }

  std::string out(step_label(0).size() + 2, ' ');
  for (size_t r = 0; r < num_ranks; ++r) {
    if (r > 0) out += ' ';
    AppendPadded(out, absl::StrCat("Rank ", r), width[r]);
  }
  out += '\n';
  for (size_t i = 0; i < num_steps; ++i) {
    absl::StrAppend(&out, step_label(i), ": ");
    for (size_t r = 0; r < num_ranks; ++r) {
      if (r > 0) out += ' ';
      AppendPadded(out, cells[r][i], width[r]);
    }
    if (error_step.has_value() && static_cast<size_t>(*error_step) == i) out += " <-- ERROR HERE";
    out += '\n';
  }
  return out;
}

}  // namespace jitpipe
