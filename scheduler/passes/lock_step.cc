#include "scheduler/passes/lock_step.h"

#include <algorithm>

#include "scheduler/passes/grid_report.h"

namespace jitpipe {
namespace {

class LockStepRunner {
 public:
  LockStepRunner(const Schedule& s, const CommPositions& positions, WaitModel model)
      : s_(s), positions_(positions), model_(model), pc_(s.pp, 0) {
    replay_.steps.resize(s.pp);
    for (int r = 0; r < s.pp; ++r) {
      if (!s.ranks[r].empty()) active_.push_back(r);
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
          replay_.steps[r].push_back(s_.ranks[r][pc_[r]++]);
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
        if (TryRun(r)) replay_.steps[r].back() = s_.ranks[r][pc_[r]++];
      }
      std::erase_if(active_, [&](int r) { return pc_[r] == Size(r); });
    }
    replay_.stuck_at.assign(s_.pp, kAbsent);
    for (int r : active_) replay_.stuck_at[r] = pc_[r];
    return std::move(replay_);
  }

 private:
  int32_t Size(int r) const { return static_cast<int32_t>(s_.ranks[r].size()); }

  bool TryRun(int r) const {
    if (pc_[r] == Size(r)) return false;
    bool ready = true;
    ForEachWait(positions_, model_, s_.ranks[r][pc_[r]],
                [&](const Wait& w) { ready = ready && pc_[w.rank] >= w.threshold; });
    return ready;
  }

  const Schedule& s_;
  const CommPositions& positions_;
  const WaitModel model_;
  std::vector<int32_t> pc_;
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
