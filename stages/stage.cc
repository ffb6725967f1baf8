#include "stages/stage.h"

#include "base/status_macros.h"

namespace jitpipe {

absl::Status Stage::Backward(int microbatch, ConstBytes input, ConstBytes output_grad,
                             MutableBytes stash, MutableBytes input_grad,
                             MutableBytes param_grad) {
  RETURN_IF_ERROR(BackwardInput(microbatch, output_grad, stash, input_grad));
  return BackwardWeight(microbatch, input, output_grad, stash, param_grad);
}

}  // namespace jitpipe
