// A program from PyTorch CSV text with its send/receive matching: what the
// state-machine tests drive (rank_cursor_test.cc, comm_fifo_test.cc).
#ifndef JITPIPE_TESTS_SCHEDULER_EXECUTION_MATCHED_PROGRAM_H_
#define JITPIPE_TESTS_SCHEDULER_EXECUTION_MATCHED_PROGRAM_H_

#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "scheduler/analysis/comm_matching.h"
#include "scheduler/ir/schedule_csv.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::testing {

struct MatchedProgram {
  Schedule schedule;
  CommPositions positions;
};

// Parses `csv` and matches it; a parse or matching error fails the test
// (and leaves the result empty).
inline MatchedProgram ParseMatched(const std::string& csv) {
  absl::StatusOr<Schedule> s = ParseScheduleCsv(csv);
  EXPECT_OK(s.status());
  if (!s.ok()) return {};
  absl::StatusOr<CommPositions> p = MatchSendRecv(*s);
  EXPECT_OK(p.status());
  if (!p.ok()) return {*s, {}};
  return {*s, *p};
}

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_SCHEDULER_EXECUTION_MATCHED_PROGRAM_H_
