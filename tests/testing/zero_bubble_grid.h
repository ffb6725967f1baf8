// The cost grid of issues 18 and 38 (the zero-bubble paper's settings) as a
// layered model, shared by the heuristic's tests, `zb_grid` and
// `auto_schedule_bench` so that all three judge the same problem.
//
// GridModel(c, pp): 2·pp layers, two per rank at one stage per rank, a
// rank's two together costing c.f / c.i / c.w and stashing kGridUnit per
// microbatch; transfers cost c.latency and no bandwidth; no parameters or
// optimizer, so a memory limit of k·kGridUnit is a cap of k live
// microbatches. Header-only (no test framework): benchmarks include it too.
#ifndef JITPIPE_TESTS_TESTING_ZERO_BUBBLE_GRID_H_
#define JITPIPE_TESTS_TESTING_ZERO_BUBBLE_GRID_H_

#include <cstdint>

#include "scheduler/ir/layered_model.h"
#include "scheduler/ir/model.h"
#include "scheduler/ir/model_file.h"

namespace jitpipe::testing {

inline constexpr int64_t kGridUnit = int64_t{1} << 20;  // one microbatch's stash on a rank

struct GridCosts {
  const char* name;
  double f, i, w, latency;
};
inline constexpr GridCosts kGridBalanced = {"balanced", 1, 1, 1, 0};
inline constexpr GridCosts kGridTypical = {"typical", 1, 1.1, 0.7, 0.05};
inline constexpr GridCosts kGridHeavyBackward = {"heavy-backward", 1, 1.6, 1.2, 0.1};

inline ModelFile GridModel(const GridCosts& c, int pp) {
  LayeredModel m;
  for (int l = 0; l < 2 * pp; ++l) {
    m.layers.push_back({.kind = LayerKind::kLayer, .forward_us = c.f / 2,
                        .backward_input_us = c.i / 2, .backward_weight_us = c.w / 2,
                        .stash_bytes = kGridUnit / 2});
  }
  m.p2p.latency_us = c.latency;
  m.optimizer.kind = OptimizerKind::kNone;
  return ModelFile{.version = kLayeredModelVersion, .stages = {}, .layers = m};
}

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_TESTING_ZERO_BUBBLE_GRID_H_
