#include "stages/exec/stage.h"

#include "base/status_macros.h"

namespace jitpipe {

absl::Status Stage::Backward(const ExecutionContext& ctx, int microbatch, ConstBytes input,
                             ConstBytes output_grad, MutableBytes stash, MutableBytes input_grad,
                             MutableBytes param_grad) {
  RETURN_IF_ERROR(BackwardInput(ctx, microbatch, output_grad, stash, input_grad));
  return BackwardWeight(ctx, microbatch, input, output_grad, stash, param_grad);
}

}  // namespace jitpipe
