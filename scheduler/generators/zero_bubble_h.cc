#include "scheduler/generators/zero_bubble_h.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "scheduler/generators/zb_manual_order.h"

namespace jitpipe {
namespace {

absl::StatusOr<Schedule> GenerateWithCap(absl::string_view name, int pp, int microbatches,
                                         int stages_per_rank, int max_memory) {
  if (stages_per_rank != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": stages per rank must be 1 (one stage per rank), got ", stages_per_rank));
  }
  // Upstream's unit-cost figures: F = I = W = 1, free communication, an F
  // holding one activation unit until its W.
  ASSIGN_OR_RETURN(ZbOrder order,
                   ZbInitialSolution(UniformZbGraph(pp, 1, 1, 1, 0, max_memory), pp, microbatches));
  Schedule s;
  s.name = std::string(name);
  s.pp = pp;
  s.stages_per_rank = 1;
  s.microbatches = microbatches;
  s.placement = Placement::kLoop;
  s.stage_to_rank = StageToRank(Placement::kLoop, pp, 1);
  s.ranks = std::move(order.stages);
  return s;
}

}  // namespace

absl::StatusOr<Schedule> GenerateZeroBubbleH1(int pp, int microbatches, int stages_per_rank) {
  return GenerateWithCap("zb-h1", pp, microbatches, stages_per_rank, pp);
}

absl::StatusOr<Schedule> GenerateZeroBubbleH2(int pp, int microbatches, int stages_per_rank) {
  return GenerateWithCap("zb-h2", pp, microbatches, stages_per_rank, 2 * pp);
}

}  // namespace jitpipe
