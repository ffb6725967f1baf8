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

std::string Where(size_t rank, size_t index) {
  return absl::StrCat("line ", rank + 1, ", cell ", index + 1, " (rank ", rank, ", index ",
                      index, ")");
}

// Reads CSV text (RFC 4180 quoting) one cell at a time, so that nothing but
// the programs grows with the input: an unquoted cell is a view of the text,
// a quoted one is unescaped into one scratch string (valid until the next
// call). A final line break does not start a new row.
class CsvCells {
 public:
  struct Cell {
    absl::string_view text;
    bool quoted = false;  // `""` is one empty cell, an empty line is no cell
    bool ends_row = false;
  };

  explicit CsvCells(absl::string_view text) : text_(text) {}

  // The next cell, or false past the last one. Errors: InvalidArgument for a
  // quoted cell that is not closed (naming its line).
  absl::StatusOr<bool> Next(Cell& cell) {
    if (pending_empty_) {  // the text ended right after a comma
      pending_empty_ = false;
      cell = Cell{"", false, true};
      return true;
    }
    if (pos_ >= text_.size()) return false;
    const size_t start = pos_;
    bool quoted = false, was_quoted = false;
    scratch_.clear();
    for (; pos_ < text_.size(); ++pos_) {
      const char c = text_[pos_];
      if (quoted) {
        if (c == '"' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '"') {
          scratch_ += '"';
          ++pos_;
        } else if (c == '"') {
          quoted = false;
        } else {
          scratch_ += c;
        }
        continue;
      }
      if (c == '"') {
        if (!was_quoted) scratch_.assign(text_.data() + start, pos_ - start);
        quoted = was_quoted = true;
      } else if (c == ',' || c == '\n' || c == '\r') {
        cell = Finish(start, pos_, was_quoted, c != ',');
        if (c == '\r' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n') ++pos_;
        ++pos_;
        if (c != ',') ++line_;
        if (c == ',' && pos_ == text_.size()) pending_empty_ = true;
        return true;
      } else if (was_quoted) {
        scratch_ += c;
      }
    }
    if (quoted) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_ + 1, ": a quoted cell is not closed"));
    }
    cell = Finish(start, pos_, was_quoted, true);
    return true;
  }

  // Where the next cell starts.
  size_t pos() const { return pos_; }

 private:
  Cell Finish(size_t start, size_t end, bool was_quoted, bool ends_row) const {
    Cell cell;
    cell.text = was_quoted ? absl::string_view(scratch_) : text_.substr(start, end - start);
    cell.quoted = was_quoted;
    cell.ends_row = ends_row;
    return cell;
  }

  absl::string_view text_;
  size_t pos_ = 0;
  size_t line_ = 0;
  bool pending_empty_ = false;
  std::string scratch_;
};

// The number of cells on the line starting at `pos` (commas + 1, quotes not
// considered): what a row's program reserves.
size_t CellsOnLine(absl::string_view text, size_t pos) {
  size_t end = text.find_first_of("\r\n", pos);
  if (end == absl::string_view::npos) end = text.size();
  return static_cast<size_t>(std::count(text.begin() + static_cast<ptrdiff_t>(pos),
                                        text.begin() + static_cast<ptrdiff_t>(end), ',')) + 1;
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
  Schedule s;
  CsvCells cells(text);
  CsvCells::Cell cell;
  RankProgram program;
  bool row_started = false;
  size_t row_start = 0;  // where the current row's text starts
  while (true) {
    ASSIGN_OR_RETURN(bool more, cells.Next(cell));
    if (!more) break;
    const size_t r = s.ranks.size();
    const bool first = !row_started;
    row_started = true;
    // A line with nothing on it is a rank with an empty program.
    const bool empty_line = first && cell.ends_row && cell.text.empty() && !cell.quoted;
    if (first && !empty_line) program.reserve(CellsOnLine(text, row_start));
    if (empty_line) {
    } else if (IsBlank(cell.text)) {
      program.push_back(Action::Bubble());
    } else {
      absl::StatusOr<Action> action = ParseAction(cell.text);
      if (!action.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(Where(r, program.size()), " ",
                                                       QuoteForMessage(cell.text), ": ",
                                                       action.status().message()));
      }
      program.push_back(*std::move(action));
    }
    if (cell.ends_row) {
      if (options.legacy_backward_names) ApplyLegacyNames(program);
      s.ranks.push_back(std::move(program));
      program = RankProgram();
      row_started = false;
      row_start = cells.pos();
    }
  }
  if (s.ranks.empty()) return absl::InvalidArgumentError("the CSV is empty: expected one row per rank");
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
