#include "scheduler/execution/lock_step.h"

#include <algorithm>
#include <utility>

#include "scheduler/analysis/grid_report.h"
#include "scheduler/execution/rank_cursor.h"

namespace jitpipe {
namespace {

// Index spaces: ranks; each rank's cursor over its program.
class LockStepRunner {
 public:
  LockStepRunner(const Schedule& s, const CommPositions& positions, WaitModel model)
      : s_(s), cursors_(MakeCursors(s, positions, model)) {
    replay_.steps.resize(s.pp);
    for (int r = 0; r < s.pp; ++r) {
      Skip(cursors_[r]);
      if (!cursors_[r].finished()) active_.push_back(r);
    }
  }

  LockStepReplay Run() {
    std::vector<int> idle;
    while (!active_.empty()) {
      // First pass: every active rank runs or idles.
      idle.clear();
      bool progress = false;
      for (int r : active_) {
        if (TryRun(r)) {
          progress = true;
        } else {
          replay_.steps[r].push_back(Action::Bubble());
          idle.push_back(r);
        }
      }
      if (!progress) {
        for (int r : idle) replay_.steps[r].pop_back();  // the step that ran nothing
        break;
      }
      // Second pass: a rank that idled may have been unblocked by a later one.
      for (int r : idle) {
        if (TryRun(r)) {  // the action takes the bubble's place
          RankProgram& row = replay_.steps[r];
          row[row.size() - 2] = std::move(row.back());
          row.pop_back();
        }
      }
      std::erase_if(active_, [&](int r) { return cursors_[r].finished(); });
    }
    replay_.stuck_at.assign(s_.pp, kAbsent);
    for (int r : active_) replay_.stuck_at[r] = cursors_[r].pc();
    return std::move(replay_);
  }

 private:
  // Passes what takes no step: the step's begin, allocations and releases.
  static void Skip(RankCursor& c) {
    while (true) {
      const Step step = c.current().step;
      if (step != Step::kBegin && step != Step::kAllocate && step != Step::kRelease) return;
      c.Advance();
    }
  }

  // Runs rank r's next action if its waits hold (appending it to the
  // rank's row); false otherwise. Waits that hold are passed even when a
  // later one does not: conditions only ever become true.
  bool TryRun(int r) {
    RankCursor& c = cursors_[r];
    while (c.current().step == Step::kWait) {
      const Wait& w = c.current().wait;
      if (cursors_[w.rank].pc() < w.threshold) return false;
      c.Advance();
    }
    Skip(c);
    if (c.current().step != Step::kRun) return false;
    replay_.steps[r].push_back(c.action(c.current().index));
    c.Advance();
    Skip(c);
    return true;
  }

  const Schedule& s_;
  std::vector<RankCursor> cursors_;
  std::vector<int> active_;  // ranks not finished, ascending
  LockStepReplay replay_;
};

}  // namespace

bool LockStepReplay::deadlocked() const {
  return std::any_of(stuck_at.begin(), stuck_at.end(), [](int32_t i) { return i != kAbsent; });
}

int LockStepReplay::num_steps() const {
  size_t n = 0;
  for (const RankProgram& row : steps) n = std::max(n, row.size());
  return static_cast<int>(n);
}

LockStepReplay ReplayLockStep(const Schedule& schedule, const CommPositions& positions,
                              WaitModel model) {
  return LockStepRunner(schedule, positions, model).Run();
}

std::string FormatStuckGrid(const Schedule& schedule, const LockStepReplay& replay,
                            int max_rows) {
  const size_t error_row = static_cast<size_t>(replay.num_steps());
  std::vector<RankProgram> grid = replay.steps;
  for (int r = 0; r < schedule.pp; ++r) {
    if (replay.stuck_at[r] == kAbsent) continue;
    grid[r].resize(error_row, Action::Bubble());
    grid[r].push_back(schedule.ranks[r][replay.stuck_at[r]]);
  }
  return FormatGridExcerpt(grid, static_cast<int>(error_row), max_rows);
}

}  // namespace jitpipe
