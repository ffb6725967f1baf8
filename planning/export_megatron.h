// Export of a schedule to Megatron-LM: the command-line arguments that fix
// what Megatron can take from a jitpipe schedule.
//
// Target: Megatron-LM main d98e8a64 (2026-08-22). Megatron takes no custom
// order: get_forward_backward_func (megatron/core/pipeline_parallel/
// schedules.py) runs no pipelining, 1F1B, or interleaved 1F1B, chosen by
// the pipeline and virtual-pipeline sizes. So an export carries:
//  - --pipeline-model-parallel-size p;
//  - the cut, as --pipeline-model-parallel-layout (E embedding, t decoder
//    layer, L loss, "|" between stages, (..)*n and t*n repetition; stage
//    s = vpp*p + pp_rank, Megatron's loop order) and --num-layers; the
//    virtual-stage count then comes from the layout (stages / p), and
//    Megatron refuses --num-virtual-stages-per-pipeline-rank beside it
//    (arguments.py asserts at most one of the two and the layout);
//  - without a cut, --num-virtual-stages-per-pipeline-rank v (v > 1), so
//    that Megatron cuts its layers evenly into p*v stages;
//  - the name of the built-in schedule closest to the program;
//  - notes on what is not carried: the order itself, a split backward
//    (I/W), the microbatch count (Megatron derives it from the batch sizes).
//
// Refused (FailedPrecondition, naming the schedule and why): V placement and
// any other non-loop placement (Megatron's stage order is loop only), several
// chains (DualPipe), and an interleaved program whose microbatches Megatron's
// interleaved schedule refuses (fewer than p, or not a multiple of p: its
// default microbatch group is p).
//
// Pure functions; thread-compatible.
#ifndef JITPIPE_PLANNING_EXPORT_MEGATRON_H_
#define JITPIPE_PLANNING_EXPORT_MEGATRON_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planning/layer_cut.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

struct MegatronExport {
  std::vector<std::string> args;   // "--pipeline-model-parallel-size", "4", ...
  std::string layout;              // "" without a cut
  int virtual_stages = 1;          // per pipeline rank (= v)
  std::string closest_schedule;    // "1F1B", "interleaved 1F1B" or "no pipelining"
  std::string megatron_function;   // forward_backward_pipelining_with_interleaving, ...
  std::vector<std::string> notes;  // what is not carried, one sentence each
  std::string text;                // a bash fragment: comments, then MEGATRON_PIPELINE_ARGS=(...)
};

// Exports `schedule` with `cut` (one entry per stage of a chain) when known.
// Errors: FailedPrecondition for what Megatron cannot run (above);
// InvalidArgument when the cut's stage count is not the schedule's.
// REQUIRES: ValidateStructure(schedule) is ok.
absl::StatusOr<MegatronExport> ExportMegatron(const Schedule& schedule,
                                              const std::optional<LayerCut>& cut,
                                              const std::string& source = "");

// The layout string Megatron is given for a cut: the cut's own layout, with
// E and L added on the end stages when the cut lacks them (Megatron's models
// always hold both, and its layout check wants each exactly once).
std::string MegatronLayout(const LayerCut& cut);

}  // namespace jitpipe

#endif  // JITPIPE_PLANNING_EXPORT_MEGATRON_H_
