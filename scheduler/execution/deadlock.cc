#include "scheduler/execution/deadlock.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/analysis/grid_report.h"
#include "scheduler/execution/lock_step.h"
#include "scheduler/execution/run_ranks.h"

namespace jitpipe {
namespace {

std::string DescribeStuck(const Schedule& s, const RankCursor& c) {
  const Instruction& in = c.current();
  const Wait& w = in.wait;
  return absl::StrCat("rank ", c.rank(), " at index ", in.index, " (",
                      s.ranks[c.rank()][in.index].ToString(), ") waits for rank ", w.rank,
                      " to post ", s.ranks[w.rank][w.index].ToString(), " (index ", w.index, ")");
}

}  // namespace

absl::Status DeadlockStatus(const Schedule& s, const CommPositions& positions,
                            absl::Span<const RankCursor> cursors, int grid_rows) {
  const int n = static_cast<int>(cursors.size());
  // Follows the waits from the lowest stuck rank until a rank repeats; the
  // repeated part is the cycle.
  std::vector<bool> on_path(n, false);
  std::vector<int> path;
  int r = 0;
  while (r < n && cursors[r].done()) ++r;
  if (r == n) return absl::InternalError("a deadlock report without a stuck rank");
  while (!on_path[r]) {
    on_path[r] = true;
    path.push_back(r);
    r = cursors[r].current().wait.rank;
    if (cursors[r].done()) {
      return absl::InternalError(absl::StrCat("rank ", path.back(), " is stuck waiting for rank ",
                                              r, ", which finished"));
    }
  }
  std::vector<int> cycle(std::find(path.begin(), path.end(), r), path.end());
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());

  std::vector<std::string> in_cycle, others;
  for (int q : cycle) in_cycle.push_back(DescribeStuck(s, cursors[q]));
  for (int q = 0; q < n; ++q) {
    if (!cursors[q].done() && std::find(cycle.begin(), cycle.end(), q) == cycle.end()) {
      others.push_back(DescribeStuck(s, cursors[q]));
    }
  }
  const WaitModel model = cursors[cycle.front()].model();
  std::string message =
      absl::StrCat("deadlock under ", WaitModelName(model), ": wait cycle ",
                   absl::StrJoin(cycle, " -> "), " -> ", cycle.front(), ": ",
                   absl::StrJoin(in_cycle, "; "));
  if (!others.empty()) absl::StrAppend(&message, "; also stuck: ", absl::StrJoin(others, "; "));
  absl::Status status = absl::InvalidArgumentError(message);
  if (grid_rows <= 0) return status;
  return WithGrid(std::move(status),
                  FormatStuckGrid(s, ReplayLockStep(s, positions, model), grid_rows));
}

absl::Status CheckDeadlockFree(const Schedule& schedule, const CommPositions& positions,
                               WaitModel model, int grid_rows) {
  std::vector<RankCursor> cursors = MakeCursors(schedule, positions, model);
  if (RunRanks(absl::MakeSpan(cursors), [](int, const Instruction&) {})) {
    return absl::OkStatus();
  }
  return DeadlockStatus(schedule, positions, cursors, grid_rows);
}

}  // namespace jitpipe
