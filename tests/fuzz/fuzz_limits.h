// Bounds on what the fuzz targets hand to the passes. Validation, lowering,
// planning and simulation are linear in the program, but a header may claim
// far more stages and microbatches than the program holds; those inputs
// still go through parsing and validation (which must refuse them without
// allocating for the claim), only the expensive passes are skipped, so one
// execution stays in the milliseconds and libFuzzer explores.
#ifndef JITPIPE_TESTS_FUZZ_FUZZ_LIMITS_H_
#define JITPIPE_TESTS_FUZZ_FUZZ_LIMITS_H_

#include <cstdint>

#include "scheduler/ir/schedule.h"

namespace jitpipe::fuzz {

inline constexpr int64_t kMaxActions = 4096;
inline constexpr int64_t kMaxStageMicrobatches = 4096;

inline bool SmallEnough(const Schedule& schedule) {
  return static_cast<int64_t>(schedule.TotalActions()) <= kMaxActions &&
         int64_t{schedule.num_stages()} * schedule.microbatches <= kMaxStageMicrobatches;
}

}  // namespace jitpipe::fuzz

#endif  // JITPIPE_TESTS_FUZZ_FUZZ_LIMITS_H_
