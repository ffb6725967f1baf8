// Text IR for the lowering-pass tests: a schedule as one string per rank,
// actions separated by spaces, "." for a bubble:
//
//   Rows(s) == {"0F0 0SEND_F0 0F1", "1RECV_F0 . 1F0"}
//
// Schedules are read through PyTorch's CSV reader, which infers the
// placement from which rank holds which stage (as PyTorch does).
#ifndef JITPIPE_TESTS_SCHEDULER_PASSES_PASS_TEST_UTIL_H_
#define JITPIPE_TESTS_SCHEDULER_PASSES_PASS_TEST_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "scheduler/ir/schedule.h"
#include "scheduler/ir/schedule_csv.h"

namespace jitpipe::testing {

inline absl::StatusOr<Schedule> FromRows(const std::vector<std::string>& rows) {
  std::string csv;
  for (const std::string& row : rows) {
    std::vector<std::string> cells = absl::StrSplit(row, ' ', absl::SkipEmpty());
    for (std::string& cell : cells) {
      if (cell == ".") cell.clear();
    }
    csv += absl::StrJoin(cells, ",") + "\n";
  }
  return ParseScheduleCsv(csv);
}

// A DualPipe-shaped schedule of two chains: the rows as FromRows reads them,
// each chain running the inferred microbatch count.
inline absl::StatusOr<Schedule> TwoChainsFromRows(const std::vector<std::string>& rows) {
  absl::StatusOr<Schedule> s = FromRows(rows);
  if (!s.ok()) return s;
  s->chains = 2;
  s->microbatches *= 2;
  return s;
}

inline std::vector<std::string> Rows(const Schedule& s) {
  std::vector<std::string> rows;
  for (const RankProgram& program : s.ranks) {
    std::vector<std::string> cells;
    for (const Action& a : program) cells.push_back(a.is_bubble() ? "." : a.ToString());
    rows.push_back(absl::StrJoin(cells, " "));
  }
  return rows;
}

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_SCHEDULER_PASSES_PASS_TEST_UTIL_H_
