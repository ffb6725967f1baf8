#include "scheduler/generators/generator_families.h"

namespace jitpipe {

std::vector<GeneratorInfo> ZeroBubbleFamily() { return {}; }

}  // namespace jitpipe
