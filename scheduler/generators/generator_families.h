// The families of built-in generators, each defined in its own file and
// concatenated by AllGenerators() (generate.cc).
#ifndef JITPIPE_SCHEDULER_GENERATORS_GENERATOR_FAMILIES_H_
#define JITPIPE_SCHEDULER_GENERATORS_GENERATOR_FAMILIES_H_

#include <vector>

#include "scheduler/generators/generate.h"

namespace jitpipe {

// PyTorch's seven (pytorch_family.cc).
std::vector<GeneratorInfo> PytorchFamily();
// Zero-bubble and DualPipe work: zb-h1, zb-h2, v-half, v-min, dualpipe
// (zero_bubble_family.cc).
std::vector<GeneratorInfo> ZeroBubbleFamily();

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_GENERATORS_GENERATOR_FAMILIES_H_
