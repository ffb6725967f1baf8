#include "scheduler/passes/deadlock.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/passes/grid_report.h"
#include "scheduler/passes/lock_step.h"

namespace jitpipe {
namespace {

// Runs every rank as far as it can go (see deadlock.h). Index spaces: ranks,
// each rank's program indices (pc_), and for each rank the ranks parked on it.
class Executor {
 public:
  Executor(const Schedule& s, const CommPositions& positions, WaitModel model)
      : s_(s), positions_(positions), model_(model), pc_(s.pp, 0), blocked_on_(s.pp),
        parked_(s.pp) {}

  void Run() {
    std::vector<int> ready;
    for (int r = s_.pp - 1; r >= 0; --r) ready.push_back(r);
    while (!ready.empty()) {
      const int r = ready.back();
      ready.pop_back();
      Advance(r);
      // Resume the ranks parked on r whose wait now holds.
      std::vector<int>& parked = parked_[r];
      size_t kept = 0;
      for (int q : parked) {
        if (pc_[r] >= blocked_on_[q].threshold) {
          ready.push_back(q);
        } else {
          parked[kept++] = q;
        }
      }
      parked.resize(kept);
    }
  }

  bool Finished(int r) const { return pc_[r] == Size(r); }
  int32_t pc(int r) const { return pc_[r]; }
  const Wait& blocked_on(int r) const { return blocked_on_[r]; }

 private:
  int32_t Size(int r) const { return static_cast<int32_t>(s_.ranks[r].size()); }

  // Runs rank r until it finishes or meets a wait that does not hold, on
  // which it is then parked. The hot loop: no allocation, dense reads only.
  void Advance(int r) {
    const RankProgram& program = s_.ranks[r];
    const int32_t size = Size(r);
    int32_t pc = pc_[r];
    bool blocked = false;
    while (pc < size) {
      ForEachWait(positions_, model_, program[pc], [&](const Wait& w) {
        if (!blocked && pc_[w.rank] < w.threshold) {
          blocked = true;
          blocked_on_[r] = w;
        }
      });
      if (blocked) break;
      ++pc;
    }
    pc_[r] = pc;
    if (blocked) parked_[blocked_on_[r].rank].push_back(r);
  }

  const Schedule& s_;
  const CommPositions& positions_;
  const WaitModel model_;
  std::vector<int32_t> pc_;
  std::vector<Wait> blocked_on_;         // valid while the rank is parked
  std::vector<std::vector<int>> parked_;  // ranks parked on each rank
};

std::string DescribeStuck(const Schedule& s, const Executor& e, int r) {
  const Wait& w = e.blocked_on(r);
  return absl::StrCat("rank ", r, " at index ", e.pc(r), " (", s.ranks[r][e.pc(r)].ToString(),
                      ") waits for rank ", w.rank, " to post ",
                      s.ranks[w.rank][w.index].ToString(), " (index ", w.index, ")");
}

// The report of deadlock.h. Follows the waits from the lowest stuck rank
// until a rank repeats; the repeated part is the cycle.
absl::Status DeadlockError(const Schedule& s, const Executor& e, WaitModel model) {
  std::vector<bool> on_path(s.pp, false);
  std::vector<int> path;
  int r = 0;
  while (e.Finished(r)) ++r;
  while (!on_path[r]) {
    on_path[r] = true;
    path.push_back(r);
    r = e.blocked_on(r).rank;
    if (e.Finished(r)) {
      return absl::InternalError(absl::StrCat("rank ", path.back(), " is stuck waiting for rank ",
                                              r, ", which finished"));
    }
  }
  std::vector<int> cycle(std::find(path.begin(), path.end(), r), path.end());
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());

  std::vector<std::string> in_cycle, others;
  for (int q : cycle) in_cycle.push_back(DescribeStuck(s, e, q));
  for (int q = 0; q < s.pp; ++q) {
    if (!e.Finished(q) && std::find(cycle.begin(), cycle.end(), q) == cycle.end()) {
      others.push_back(DescribeStuck(s, e, q));
    }
  }
  std::string message =
      absl::StrCat("deadlock under ", WaitModelName(model), ": wait cycle ",
                   absl::StrJoin(cycle, " -> "), " -> ", cycle.front(), ": ",
                   absl::StrJoin(in_cycle, "; "));
  if (!others.empty()) absl::StrAppend(&message, "; also stuck: ", absl::StrJoin(others, "; "));
  return absl::InvalidArgumentError(message);
}

}  // namespace

absl::Status CheckDeadlockFree(const Schedule& schedule, const CommPositions& positions,
                               WaitModel model, int grid_rows) {
  Executor executor(schedule, positions, model);
  executor.Run();
  bool stuck = false;
  for (int r = 0; r < schedule.pp; ++r) stuck = stuck || !executor.Finished(r);
  if (!stuck) return absl::OkStatus();
  absl::Status status = DeadlockError(schedule, executor, model);
  if (grid_rows <= 0 || status.code() != absl::StatusCode::kInvalidArgument) return status;
  return WithGrid(std::move(status),
                  FormatStuckGrid(schedule, ReplayLockStep(schedule, positions, model), grid_rows));
}

}  // namespace jitpipe
