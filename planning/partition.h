// Partitions: which layers of a layered model (scheduler/ir/layered_model.h)
// each stage of a schedule holds, and the per-stage cost model that results.
// Every schedule then runs the same layers, whatever its stage count: a
// stage of a v-stage schedule holds about 1/v of what a rank holds, and
// DualPipe's two chains each hold a whole copy of the model (twice the
// parameters, the same compute: each chain runs half the microbatches).
//
// Stages of one chain hold consecutive layers, in model order:
//
//   layers  E t t t t t t t t L        (embedding, 8 layers, loss)
//   even, 4 stages:   E t t | t t | t t | t t L      boundaries 0 3 5 7 10
//   layout "Et*3|t*2|t*2|tL"                         boundaries 0 4 6 8 10
//
// Three ways to cut:
//   even      the body layers as evenly as the count allows, the remainder
//             one each to the middle stages; the embedding on the first
//             stage, the loss on the last (Megatron's default when the
//             counts divide);
//   layout    Megatron's --pipeline-model-parallel-layout string: E
//             (embedding), t (a body layer), L (loss), "|" between stages,
//             X*n repeats a symbol, (...)*n a group, commas are ignored,
//             empty stages are allowed: "Et*3|(tt|)*29,t|L";
//   balanced  planning/balance.h: the cut with the smallest simulated step.
//
// Pure functions; thread-compatible.
#ifndef JITPIPE_PLANNING_PARTITION_H_
#define JITPIPE_PLANNING_PARTITION_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/layered_model.h"
#include "scheduler/ir/model.h"

namespace jitpipe {

// The layers of one chain's stages: stage k holds model layers
// [boundaries[k], boundaries[k + 1]). boundaries.front() == 0,
// boundaries.back() == the number of layers, non-decreasing.
struct Partition {
  std::vector<int> boundaries = {};

  int num_stages() const { return static_cast<int>(boundaries.size()) - 1; }
  int begin(int stage) const { return boundaries[stage]; }
  int end(int stage) const { return boundaries[stage + 1]; }

  // The layout string of this partition (E, t*n, L, "|"), which ParseLayout
  // reads back: "Et*3|t*2|t*2|tL".
  std::string ToLayout(const LayeredModel& model) const;

  friend bool operator==(const Partition&, const Partition&) = default;
};

// The even partition into `stages` stages. Errors: InvalidArgument when
// stages < 1. REQUIRES: ValidateLayeredModel(model) is ok.
absl::StatusOr<Partition> EvenPartition(const LayeredModel& model, int stages);

// Parses a Megatron-style layout for a chain of `stages` stages.
// Errors: InvalidArgument naming the character or the count, e.g.
//   layout "Et*3|t": unexpected "x" at character 4
//   layout "E|t|L" has 3 stages; the schedule has 4 per chain
//   layout "Et*3|t|L" places 4 layers; the model has 8
//   layout "t|Et|L": the embedding must open the first stage
//   layout "Etm|L": m (multi-token prediction) is not a layer kind of version 2 models
// REQUIRES: ValidateLayeredModel(model) is ok.
absl::StatusOr<Partition> ParseLayout(absl::string_view layout, const LayeredModel& model,
                                      int stages);

// The layout with its repetitions unrolled and commas dropped: one symbol
// (E, t, m, L) per layer and "|" per boundary, "Et*2|(t|)*2L" -> "Ett|t|tL".
// It checks only the grammar, not the stages. Errors: InvalidArgument naming
// the character (as ParseLayout), or an expansion beyond 2^20 symbols.
absl::StatusOr<std::string> ExpandLayout(absl::string_view layout);

// Checks a partition built in code against the model (boundaries as above,
// the embedding in stage 0, the loss in the last stage).
// Errors: InvalidArgument.
absl::Status ValidatePartition(const Partition& partition, const LayeredModel& model);

// The per-stage cost model of a schedule with `chains` chains whose every
// chain is cut by `partition` (stage c * partition.num_stages() + k holds
// layer range k of chain c): each stage's times, stash and parameters are
// its layers' sums; its input is the output of the layer before it (the
// model's input_bytes for the first), its output that of its last layer
// (its input when empty). p2p and dp are the model's.
// Errors: InvalidArgument from ValidatePartition, or from ValidateModel
// when a stage's sums exceed a model's per-buffer limit (kMaxModelBytes).
absl::StatusOr<Model> StageModel(const LayeredModel& model, const Partition& partition,
                                 int chains = 1);

}  // namespace jitpipe

#endif  // JITPIPE_PLANNING_PARTITION_H_
