// A test-only list-scheduling replay of a compute-only schedule under unit
// costs, the model behind the anchors' "our_sim_unit_costs": each rank runs
// its program strictly in order (bubbles skipped); an action starts once its
// rank is free and its dependencies have finished; communication is free.
//   F = I = W = 1, B = 2, OVERLAP_F_B = the sum of its parts.
//   F(s,m) after F(s-1,m); I/B(s,m) after I/B(s+1,m) (the chain's last stage:
//   after its own F); W(s,m) after I(s,m).
// Peak memory is counted as the anchors do: an F adds one stage-unit, the
// matching W or B releases it.
#ifndef JITPIPE_TESTS_TESTING_UNIT_COST_REPLAY_H_
#define JITPIPE_TESTS_TESTING_UNIT_COST_REPLAY_H_

#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe::testing {

struct UnitCostResult {
  double makespan = 0;
  std::vector<double> busy;              // per rank
  std::vector<double> span;              // per rank, first start to last end
  std::vector<int> peak_stage_units;     // per rank
  double max_span() const;
};

// Errors: FailedPrecondition when no rank can make progress (a dependency
// cycle), naming each rank's stuck action.
absl::StatusOr<UnitCostResult> ReplayUnitCosts(const Schedule& compute_only);

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_TESTING_UNIT_COST_REPLAY_H_
