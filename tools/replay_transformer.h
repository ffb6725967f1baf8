// `jitpipe replay --stage transformer`: the reference transformer's stages
// (stages/reference/transformer_stage.h) for a lowered schedule and the
// version 2 model `jitpipe model` wrote, and the check of the replayed step
// against the unpipelined reference.
//
// The model file holds sizes, not the shape, so the shape comes from the
// flags `jitpipe model` was given (tools/transformer_flags.h); the model the
// flags build must be the file's, layer by layer (kind, output, stash and
// parameter bytes), else the replay would check a different block than the
// one the file plans. The stage is the fp32 block of the kernels (--dtype
// fp32) in process, the bf16 one (stages/reference/cuda_transformer_stage.h,
// --dtype bf16) on the one-GPU backend, run in the device module
// (runtime/gpu/replay.h): --swiglu, --rmsnorm, --attention fused, --recompute none, no
// --dropout, --tp 1, --loss-dtype fp32. Each stage holds the layers the
// partition gives its place in the chain.
#ifndef JITPIPE_TOOLS_REPLAY_TRANSFORMER_H_
#define JITPIPE_TOOLS_REPLAY_TRANSFORMER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "planning/partition.h"
#include "planning/transformer.h"
#include "scheduler/ir/layered_model.h"
#include "scheduler/ir/schedule.h"
#include "stages/exec/stage.h"
#include "stages/reference/mlp_reference.h"
#include "stages/reference/transformer_stage.h"

namespace jitpipe::cli {

// Whether this build has the transformer stage (OpenBLAS was found).
bool HaveTransformerStage();

// Where the stages run: the cpu ones in this process, or the cuda ones in
// the device module.
enum class TransformerTarget { kHost, kCuda };

struct TransformerReplay {
  // The stages' options: the partition's parts of the flags' shape.
  TransformerOptions options;
  // kHost only (kCuda: the module makes the device stages from `options`).
  std::unique_ptr<StageFactory> factory;
  // A step's loss and the stages' last gradients against the reference
  // (computed on the first call). REQUIRES: the run has ended. kHost only.
  std::function<absl::StatusOr<MlpComparison>(double loss, ReduceKind reduce)> check;
};

// Errors: InvalidArgument naming the model file (`model_path`) or the flag
// that does not fit (a shape option the target's stage does not run, a layer whose
// bytes differ from the flags' model, a missing partition); Unavailable when
// the build has no OpenBLAS.
absl::StatusOr<TransformerReplay> MakeTransformerReplay(const std::string& model_path,
                                                        const TransformerShape& shape,
                                                        const LayeredModel& file_model,
                                                        const Partition& partition,
                                                        const Schedule& lowered, int dp,
                                                        TransformerTarget target);

}  // namespace jitpipe::cli

#endif  // JITPIPE_TOOLS_REPLAY_TRANSFORMER_H_
