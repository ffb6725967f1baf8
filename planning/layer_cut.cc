#include "planning/layer_cut.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

// One stage's text: "E", "t" or "t*n", "L" in that order; "" when empty.
std::string StageText(const StageLayers& stage) {
  std::string text = stage.embedding ? "E" : "";
  if (stage.num_layers == 1) text += "t";
  if (stage.num_layers > 1) absl::StrAppend(&text, "t*", stage.num_layers);
  if (stage.loss) text += "L";
  return text;
}

// A model holding exactly the layers the expanded layout names.
LayeredModel ModelOfLayout(absl::string_view expanded) {
  LayeredModel model;
  const auto count = [&](char c) { return std::count(expanded.begin(), expanded.end(), c); };
  if (count('E') > 0) model.layers.push_back({.kind = LayerKind::kEmbedding});
  for (int64_t i = 0; i < count('t'); ++i) model.layers.push_back({.kind = LayerKind::kLayer});
  if (count('L') > 0) model.layers.push_back({.kind = LayerKind::kLoss});
  return model;
}

}  // namespace

int LayerCut::NumLayers() const {
  int n = 0;
  for (const StageLayers& s : stages) n += s.num_layers;
  return n;
}

std::string LayerCut::ToLayout() const {
  std::vector<std::string> texts;
  texts.reserve(stages.size());
  for (const StageLayers& s : stages) texts.push_back(StageText(s));
  // Every stage but the last is followed by "|"; a run of n >= 2 equal such
  // stages is written once as "(text|)*n".
  std::string out;
  const size_t last = texts.size() - 1;
  for (size_t i = 0; i < last;) {
    size_t run = 1;
    while (i + run < last && texts[i + run] == texts[i]) ++run;
    if (run >= 2) {
      absl::StrAppend(&out, "(", texts[i], "|)*", run, i + run < last || !texts[last].empty() ? "," : "");
    } else {
      absl::StrAppend(&out, texts[i], "|");
    }
    i += run;
  }
  return out + texts[last];
}

std::string LayerCut::ToString() const {
  std::vector<std::string> lines;
  for (int k = 0; k < num_stages(); ++k) {
    const StageLayers& s = stages[k];
    std::vector<std::string> parts;
    if (s.embedding) parts.push_back("E");
    if (s.num_layers == 1) parts.push_back(absl::StrCat("layer ", s.first_layer));
    if (s.num_layers > 1) {
      parts.push_back(absl::StrCat("layers ", s.first_layer, "-", s.first_layer + s.num_layers - 1));
    }
    if (s.loss) parts.push_back("L");
    if (parts.empty()) parts.push_back("(empty)");
    lines.push_back(absl::StrCat("stage ", k, ": ", absl::StrJoin(parts, ", ")));
  }
  return absl::StrJoin(lines, "\n");
}

absl::StatusOr<LayerCut> CutFromLayout(absl::string_view layout, int stages) {
  ASSIGN_OR_RETURN(std::string expanded, ExpandLayout(layout));
  const LayeredModel model = ModelOfLayout(expanded);
  ASSIGN_OR_RETURN(Partition partition, ParseLayout(layout, model, stages));
  return CutFromPartition(partition, model);
}

LayerCut CutFromPartition(const Partition& partition, const LayeredModel& model) {
  LayerCut cut;
  int next_layer = 0;
  for (int k = 0; k < partition.num_stages(); ++k) {
    StageLayers stage{.first_layer = next_layer};
    for (int i = partition.begin(k); i < partition.end(k); ++i) {
      switch (model.layers[i].kind) {
        case LayerKind::kEmbedding: stage.embedding = true; break;
        case LayerKind::kLoss: stage.loss = true; break;
        case LayerKind::kLayer: ++stage.num_layers; break;
      }
    }
    next_layer += stage.num_layers;
    cut.stages.push_back(stage);
  }
  return cut;
}

}  // namespace jitpipe
