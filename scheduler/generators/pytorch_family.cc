// PyTorch's seven schedules (torch.distributed.pipelining), one generator
// file pair each; the aliases are PyTorch's class names.
#include "scheduler/generators/dual_pipe_v.h"
#include "scheduler/generators/generator_families.h"
#include "scheduler/generators/gpipe.h"
#include "scheduler/generators/interleaved_1f1b.h"
#include "scheduler/generators/interleaved_zero_bubble.h"
#include "scheduler/generators/looped_bfs.h"
#include "scheduler/generators/one_f_one_b.h"
#include "scheduler/generators/zbv_zero_bubble.h"

namespace jitpipe {

std::vector<GeneratorInfo> PytorchFamily() {
  return {
      {.name = "gpipe",
       .aliases = {"GPipe"},
       .default_stages_per_rank = 1,
       .summary = "all forwards, then all backwards (fill-drain)",
       .generate = GenerateGPipe},
      {.name = "1f1b",
       .aliases = {"1F1B"},
       .default_stages_per_rank = 1,
       .summary = "one forward, one backward in the steady state (PyTorch's runtime order)",
       .generate = GenerateOneFOneB},
      {.name = "interleaved-1f1b",
       .aliases = {"Interleaved1F1B"},
       .default_stages_per_rank = 2,
       .summary = "depth-first interleaved 1F1B over v stages per rank (Megatron, flexible rounds)",
       .generate = GenerateInterleaved1F1B},
      {.name = "looped-bfs",
       .aliases = {"LoopedBFS"},
       .default_stages_per_rank = 2,
       .summary = "breadth first: all microbatches of a local stage before the next",
       .generate = GenerateLoopedBfs},
      {.name = "interleaved-zb",
       .aliases = {"InterleavedZeroBubble"},
       .default_stages_per_rank = 2,
       .summary = "interleaved 1F1B with split backwards, W filling the bubbles (ZB1P)",
       .generate = GenerateInterleavedZeroBubble},
      {.name = "zbv",
       .aliases = {"ZBVZeroBubble"},
       .default_stages_per_rank = 2,
       .summary = "zero-bubble V schedule, 2 stages per rank in V placement (ZB-V)",
       .generate = GenerateZbvZeroBubble},
      {.name = "dualpipev",
       .aliases = {"DualPipeV"},
       .default_stages_per_rank = 2,
       .summary = "DualPipe cut in half: overlapped forward/backward pairs, V placement",
       .generate = GenerateDualPipeV},
  };
}

}  // namespace jitpipe
