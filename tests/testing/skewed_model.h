// A model whose stage sizes differ from stage to stage, for the memory
// planner's tests: the arena's start-order sweep then often misses the peak
// by a little, so the ordered searches run on some ranks.
#ifndef JITPIPE_TESTS_TESTING_SKEWED_MODEL_H_
#define JITPIPE_TESTS_TESTING_SKEWED_MODEL_H_

#include <cstdint>

#include "scheduler/ir/model.h"

namespace jitpipe::testing {

// Stash 2, 4, 6, 3 MiB and outputs 1, 2, 3 MiB in turn; each stage's input
// is its predecessor's output.
inline Model SkewedModel(int num_stages) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  constexpr int64_t kStash[] = {2, 4, 6, 3};
  constexpr int64_t kOutput[] = {1, 2, 3};
  Model m;
  for (int stage = 0; stage < num_stages; ++stage) {
    StageOverride o;
    o.index = stage;
    o.spec.stash_bytes = kStash[stage % 4] * kMiB;
    o.spec.output_bytes = kOutput[stage % 3] * kMiB;
    o.spec.input_bytes = kOutput[(stage + 2) % 3] * kMiB;
    m.stages.push_back(o);
  }
  return m;
}

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_TESTING_SKEWED_MODEL_H_
