// The transformer's shape from the flags `jitpipe model` takes (--layers,
// --hidden, ... defined in cmd_model.cc), shared by `model` and by `replay
// --stage transformer`, which needs the shape a model file was written from.
#ifndef JITPIPE_TOOLS_TRANSFORMER_FLAGS_H_
#define JITPIPE_TOOLS_TRANSFORMER_FLAGS_H_

#include <optional>

#include "absl/status/statusor.h"
#include "planning/transformer.h"

namespace jitpipe::cli {

// The shape the flags describe; `tflops`, when set, stands in for --tflops
// (a replay measures times instead of modelling them). Errors:
// InvalidArgument naming the flag ("--hidden 1000 is not a multiple of heads
// 64").
absl::StatusOr<TransformerShape> TransformerShapeFromFlags(std::optional<double> tflops = {});

}  // namespace jitpipe::cli

#endif  // JITPIPE_TOOLS_TRANSFORMER_FLAGS_H_
