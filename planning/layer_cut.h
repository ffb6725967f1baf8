// The layer cut an export writes: for each stage of one chain, whether it
// holds the embedding, which body layers (the "t" of a layout, numbered
// from 0 as torchtitan's layers.N and Megatron's decoder layers are) and
// whether it holds the loss head.
//
//   layout "Et*3|t*4|t*4|t*3L"   stage 0: E + layers 0..2
//                                stage 1: layers 3..6
//                                stage 2: layers 7..10
//                                stage 3: layers 11..13 + L
//
// A cut comes from a layout string alone (no model needed: the string
// carries every layer) or from a partition of a version 2 model. It prints
// back as a layout that ParseLayout and Megatron both read, with runs of
// equal middle stages folded: "Et*3|(t*4|)*2,t*3L".
//
// Pure functions; thread-compatible.
#ifndef JITPIPE_PLANNING_LAYER_CUT_H_
#define JITPIPE_PLANNING_LAYER_CUT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "planning/partition.h"
#include "scheduler/ir/layered_model.h"

namespace jitpipe {

struct StageLayers {
  bool embedding = false;
  int first_layer = 0;  // index of its first body layer
  int num_layers = 0;   // body layers [first_layer, first_layer + num_layers)
  bool loss = false;

  friend bool operator==(const StageLayers&, const StageLayers&) = default;
};

struct LayerCut {
  std::vector<StageLayers> stages = {};  // one per stage of a chain

  int num_stages() const { return static_cast<int>(stages.size()); }
  // Body layers over all stages.
  int NumLayers() const;
  bool HasEmbedding() const { return !stages.empty() && stages.front().embedding; }
  bool HasLoss() const { return !stages.empty() && stages.back().loss; }

  // The layout string, equal middle stages folded into "(...|)*n"; stages
  // with no layer are empty ("E||tL"). CutFromLayout(ToLayout()) == *this.
  std::string ToLayout() const;
  // One readable line per stage: "stage 0: E, layers 0-2".
  std::string ToString() const;

  friend bool operator==(const LayerCut&, const LayerCut&) = default;
};

// The cut a layout string gives `stages` stages, checked as ParseLayout
// checks it (against a model with exactly the layout's own layers).
// Errors: InvalidArgument from ExpandLayout / ParseLayout, e.g.
//   layout "E|t|L" has 3 stages; the schedule has 4 per chain
//   layout "t|Et|L": the embedding must open the first stage
absl::StatusOr<LayerCut> CutFromLayout(absl::string_view layout, int stages);

// The cut of a partition of `model`. REQUIRES: ValidatePartition(partition,
// model) is ok.
LayerCut CutFromPartition(const Partition& partition, const LayeredModel& model);

}  // namespace jitpipe

#endif  // JITPIPE_PLANNING_LAYER_CUT_H_
