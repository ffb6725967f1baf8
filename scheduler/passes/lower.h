// Lowering: from a compute-only program to one with every send, receive and
// reduction explicit, through a pipeline of passes (pass_pipeline.h):
//
//   [split/merge backward] -> [unshard/reshard] -> [reduce_grad]
//     -> send/recv (early, PyTorch's _add_send_recv) -> [just-in-time receives]
//
// With recv = kEarly, fsdp and reduce_grad the result equals PyTorch's
// _PipelineScheduleRuntime lowering (its pipeline_order_with_comms) exactly.
#ifndef JITPIPE_SCHEDULER_PASSES_LOWER_H_
#define JITPIPE_SCHEDULER_PASSES_LOWER_H_

#include <string>

#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

enum class RecvPlacement {
  kEarly,  // where PyTorch's _add_send_recv puts them: when the sender sends
  kJit,    // just before the consumer, ordered so no two ranks wait on each other
};

enum class BackwardForm {
  kKeep,   // as given
  kSplit,  // every B becomes I then W
  kMerge,  // an I immediately followed by its W becomes B (PyTorch's _merge_bw)
};

struct LowerOptions {
  RecvPlacement recv = RecvPlacement::kJit;
  BackwardForm backward = BackwardForm::kKeep;
  bool fsdp = false;         // UNSHARD/RESHARD with PyTorch's 3-stage lookahead
  bool reduce_grad = false;  // REDUCE_GRAD right after each stage's last B or W
  std::string dump_after;    // pass name whose output the pipeline records ("" = none)
};

// Lowers a compute-only schedule. Errors: FailedPrecondition if `schedule` is
// already lowered; InvalidArgument if it fails validation, naming the pass
// and the rank, index and action.
absl::StatusOr<Schedule> Lower(const Schedule& schedule, const LowerOptions& options = {});

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_LOWER_H_
