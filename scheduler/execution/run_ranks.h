// Runs the cursors of every rank of a program in one thread, each as far as
// its waits allow in program order (wait_rules.h): the engine of the drivers
// that need no real transport -- the deadlock check (no clock) and the
// simulator (a virtual clock the visitor keeps).
//
// A rank that meets a wait that does not hold is parked on the rank the wait
// names and resumed once that rank's pc() has reached the wait's threshold.
// Ranks start in ascending order and a resumed rank runs before the others
// waiting to run, so the order is deterministic; as conditions only ever
// become true, who finishes and who is stuck where does not depend on it.
// Cost: every instruction once, plus, each time a rank moves, a look at the
// ranks parked on it (its pipeline neighbours); no allocation per
// instruction.
#ifndef JITPIPE_SCHEDULER_EXECUTION_RUN_RANKS_H_
#define JITPIPE_SCHEDULER_EXECUTION_RUN_RANKS_H_

#include <vector>

#include "absl/types/span.h"
#include "scheduler/execution/rank_cursor.h"

namespace jitpipe {

// Calls visit(rank, instruction) for every instruction a rank passes -- a
// kWait once it holds -- right before advancing its cursor. Returns true
// when every cursor is done; otherwise each cursor that is not stands at a
// kWait that does not hold, and the waits form at least one cycle
// (DeadlockStatus, deadlock.h, reports it). REQUIRES: cursors[r].rank() == r.
template <typename Visit>
bool RunRanks(absl::Span<RankCursor> cursors, Visit&& visit) {
  const int n = static_cast<int>(cursors.size());
  std::vector<std::vector<int>> parked(n);  // ranks parked on each rank
  std::vector<int> ready;
  ready.reserve(n);
  for (int r = n - 1; r >= 0; --r) ready.push_back(r);
  int done = 0;
  while (!ready.empty()) {
    const int r = ready.back();
    ready.pop_back();
    RankCursor& c = cursors[r];
    // The hot loop: runs rank r until it is done or blocked.
    while (true) {
      const Instruction& in = c.current();
      if (in.step == Step::kDone) {
        ++done;
        break;
      }
      if (in.step == Step::kWait && cursors[in.wait.rank].pc() < in.wait.threshold) {
        parked[in.wait.rank].push_back(r);
        break;
      }
      visit(r, in);
      c.Advance();
    }
    // Resume the ranks parked on r whose wait now holds.
    std::vector<int>& on_r = parked[r];
    size_t kept = 0;
    for (int q : on_r) {
      if (c.pc() >= cursors[q].current().wait.threshold) {
        ready.push_back(q);
      } else {
        on_r[kept++] = q;
      }
    }
    on_r.resize(kept);
  }
  return done == n;
}

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_EXECUTION_RUN_RANKS_H_
