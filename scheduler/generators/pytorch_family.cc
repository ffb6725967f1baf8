#include "scheduler/generators/generator_families.h"

namespace jitpipe {

std::vector<GeneratorInfo> PytorchFamily() { return {}; }

}  // namespace jitpipe
