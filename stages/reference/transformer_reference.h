// The single-process, unpipelined reference for the `transformer` stage: the
// same model and data (transformer_stage.h), trained one microbatch at a time
// through the whole model, each layer's backward run as I then W at once, in
// buffers of its own (no stash shared between layers, no gradients carried
// between calls). Its gradients, per part of the chain, are summed over every
// replica, chain and microbatch -- what a replayed step's reduced gradients
// hold -- so mlp_reference.h's CompareWithReference checks a replay against
// it. Both run the same layer functions (transformer_layer.h), so they agree
// to float rounding (the order of the sums).
//
// Pure function; thread-compatible.
#ifndef JITPIPE_STAGES_REFERENCE_TRANSFORMER_REFERENCE_H_
#define JITPIPE_STAGES_REFERENCE_TRANSFORMER_REFERENCE_H_

#include "stages/reference/mlp_reference.h"
#include "stages/reference/transformer_stage.h"

namespace jitpipe {

// loss: the mean over microbatches and replicas; block_grads: per part.
// REQUIRES: ValidateTransformerOptions(options) is ok.
MlpReference RunTransformerReference(const TransformerOptions& options, const MlpLayout& layout);

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_REFERENCE_TRANSFORMER_REFERENCE_H_
