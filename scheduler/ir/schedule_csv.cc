#include "scheduler/ir/schedule_csv.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/json_document.h"
#include "base/status_macros.h"
#include "scheduler/ir/program_facts.h"

namespace jitpipe {
namespace {

struct Cell {
  std::string text;
  bool quoted = false;  // `""` is one empty cell, an empty line is no cell
};
using Row = std::vector<Cell>;

std::string Where(size_t rank, size_t index) {
  return absl::StrCat("line ", rank + 1, ", cell ", index + 1, " (rank ", rank, ", index ",
                      index, ")");
}

// Splits CSV text into rows of cells (RFC 4180 quoting). A final line break
// does not start a new row.
absl::StatusOr<std::vector<Row>> SplitCsv(absl::string_view text) {
  std::vector<Row> rows;
  Row row;
  std::string cell;
  bool quoted = false;
  bool was_quoted = false;
  bool row_open = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cell += c;
      }
      continue;
    }
    row_open = true;
    if (c == '"') {
      quoted = true;
      was_quoted = true;
    } else if (c == ',') {
      row.push_back({std::move(cell), was_quoted});
      cell.clear();
      was_quoted = false;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      row.push_back({std::move(cell), was_quoted});
      cell.clear();
      was_quoted = false;
      rows.push_back(std::move(row));
      row.clear();
      row_open = false;
    } else {
      cell += c;
    }
  }
  if (quoted) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", rows.size() + 1, ": a quoted cell is not closed"));
  }
  if (row_open) {
    row.push_back({std::move(cell), was_quoted});
    rows.push_back(std::move(row));
  }
  return rows;
}

bool IsBlank(absl::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); });
}

// Rewrites legacy B (input backward) as I where the same rank later runs the
// matching W. Indices: (stage, microbatch) pairs seen as W on the rank.
void ApplyLegacyNames(RankProgram& program) {
  absl::flat_hash_set<std::pair<int, int>> has_w;
  for (const Action& a : program) {
    ForEachComputePart(a, [&](const Action& part) {
      if (part.kind == ActionKind::kBackwardWeight) has_w.insert({part.stage, part.microbatch});
    });
  }
  auto rename = [&](Action& part) {
    if (part.kind == ActionKind::kBackward && has_w.contains({part.stage, part.microbatch})) {
      part.kind = ActionKind::kBackwardInput;
    }
  };
  for (Action& a : program) {
    if (a.is_compound()) {
      for (Action& sub : a.sub_actions) rename(sub);
    } else {
      rename(a);
    }
  }
}

// Fills the header fields from the programs, as PyTorch's _validate_schedule
// infers them (ScanPrograms, shared with the JSON reader).
absl::Status InferHeader(Schedule& s) {
  s.pp = static_cast<int>(s.ranks.size());
  ASSIGN_OR_RETURN(ProgramFacts facts,
                   ScanPrograms(s.ranks, ScanOptions{}, [&](ActionPosition at) {
                     return absl::StrCat(Where(at.rank, at.index), " \"",
                                         s.ranks[at.rank][at.index].ToString(), "\"");
                   }));
  if (facts.stage_to_rank.empty()) return absl::InvalidArgumentError("the CSV holds no actions");
  s.lowered = facts.first_comm.has_value();
  s.stage_to_rank = std::move(facts.stage_to_rank);
  const int max_mb = facts.max_microbatch;
  const int num_stages = s.num_stages();
  if (num_stages % s.pp != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        num_stages, " stages cannot be spread evenly over ", s.pp, " ranks (rows)"));
  }
  s.stages_per_rank = num_stages / s.pp;
  std::vector<int> per_rank(s.pp, 0);
  for (int r : s.stage_to_rank) ++per_rank[r];
  for (int r = 0; r < s.pp; ++r) {
    if (per_rank[r] != s.stages_per_rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", r, " (line ", r + 1, ") holds ", per_rank[r], " stages; every rank must hold ",
          s.stages_per_rank, " (", num_stages, " stages over ", s.pp, " ranks)"));
    }
  }
  if (max_mb == std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "microbatch ", max_mb, " implies more microbatches than fit in 31 bits"));
  }
  s.microbatches = std::max(max_mb + 1, 1);
  s.placement = DetectPlacement(s.stage_to_rank, s.pp);
  if (s.lowered) {
    for (int r = 0; r < s.pp; ++r) {
      for (size_t i = 0; i < s.ranks[r].size(); ++i) {
        if (s.ranks[r][i].is_bubble()) {
          return absl::InvalidArgumentError(absl::StrCat(
              Where(r, i), ": an empty cell (a bubble) in a lowered program; PyTorch's "
              "compute_comms format has none"));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Schedule> ParseScheduleCsv(absl::string_view text, const CsvReadOptions& options) {
  ASSIGN_OR_RETURN(std::vector<Row> rows, SplitCsv(text));
  if (rows.empty()) return absl::InvalidArgumentError("the CSV is empty: expected one row per rank");
  Schedule s;
  for (size_t r = 0; r < rows.size(); ++r) {
    RankProgram program;
    // A line with nothing on it is a rank with an empty program.
    if (!(rows[r].size() == 1 && rows[r][0].text.empty() && !rows[r][0].quoted)) {
      program.reserve(rows[r].size());
      for (size_t i = 0; i < rows[r].size(); ++i) {
        const std::string& cell = rows[r][i].text;
        if (IsBlank(cell)) {
          program.push_back(Action::Bubble());
          continue;
        }
        auto action = ParseAction(cell);
        if (!action.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(Where(r, i), " ", JsonQuote(cell), ": ",
                                                         action.status().message()));
        }
        program.push_back(*std::move(action));
      }
    }
    if (options.legacy_backward_names) ApplyLegacyNames(program);
    s.ranks.push_back(std::move(program));
  }
  RETURN_IF_ERROR(InferHeader(s));
  RETURN_IF_ERROR(ValidateHeader(s));
  return s;
}

std::string ScheduleToCsv(const Schedule& s) {
  std::string out;
  out.reserve(s.TotalActions() * 8 + s.ranks.size());
  for (const RankProgram& program : s.ranks) {
    // As Python's csv module: a lone empty cell is quoted, or it would read
    // back as an empty line (a rank with no actions).
    if (program.size() == 1 && program[0].is_bubble()) {
      out += "\"\"\n";
      continue;
    }
    for (size_t i = 0; i < program.size(); ++i) {
      if (i > 0) out += ',';
      out += program[i].ToString();
    }
    out += '\n';
  }
  return out;
}

}  // namespace jitpipe
