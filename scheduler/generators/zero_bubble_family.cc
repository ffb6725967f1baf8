#include "scheduler/generators/dual_pipe.h"
#include "scheduler/generators/generator_families.h"
#include "scheduler/generators/v_half_min.h"
#include "scheduler/generators/zero_bubble_h.h"

namespace jitpipe {

// Aliases: ZBH1/ZBH2, and ZB-1P/ZB-2P as the zero-bubble paper calls the two
// memory settings; VHalf, VMin. "ZB1P" is left out: PyTorch's artifacts use
// it for the interleaved zero-bubble schedule (interleaved-zb).
std::vector<GeneratorInfo> ZeroBubbleFamily() {
  return {
      {"zb-h1", {"ZBH1", "ZB-1P"}, 1,
       "zero bubble H1: I/W split, W fills bubbles, 1F1B's memory (p units)",
       &GenerateZeroBubbleH1},
      {"zb-h2", {"ZBH2", "ZB-2P"}, 1,
       "zero bubble H2: I/W split, no bubble within a rank's span, 2p units of memory",
       &GenerateZeroBubbleH2},
      {"v-half", {"VHalf"}, 2,
       "V-Half: V placement, I/W split, (p+2)//2 units of memory (half of 1F1B)",
       &GenerateVHalf},
      {"v-min", {"VMin"}, 2,
       "V-Min: V placement, I/W split, about (p+4)//3 units of memory (a third of 1F1B)",
       &GenerateVMin},
      {"dualpipe", {}, 2,
       "DualPipe: two directions over the same ranks, overlapped F&B, 2x parameters",
       &GenerateDualPipe},
  };
}

}  // namespace jitpipe
