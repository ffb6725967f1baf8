#include "planning/partition.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/json_document.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

// A layout expanded to one symbol per layer and "|" per boundary is at most
// this long; "(t*1000)*1000000" is refused rather than built.
constexpr size_t kMaxExpandedLayout = size_t{1} << 20;

// Recursive descent over the layout grammar:
//   sequence := item*          item := (symbol | "(" sequence ")") ["*" number]
//   symbol   := E | t | m | L | "|"      "," is skipped
class LayoutExpander {
 public:
  explicit LayoutExpander(absl::string_view text) : text_(text) {}

  absl::StatusOr<std::string> Expand() {
    ASSIGN_OR_RETURN(std::string out, Sequence());
    if (pos_ < text_.size()) return Unexpected();
    return out;
  }

 private:
  absl::StatusOr<std::string> Sequence() {
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != ')') {
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      ASSIGN_OR_RETURN(std::string item, Item());
      out += item;
      if (out.size() > kMaxExpandedLayout) return TooLong();
    }
    return out;
  }

  absl::StatusOr<std::string> Item() {
    std::string unit;
    const char c = text_[pos_];
    if (c == '(') {
      // Each level is a frame of this recursion: refuse depth before the
      // stack runs out (20,000 "(" overflowed it; issue 35).
      if (++depth_ > kMaxLayoutDepth) {
        return absl::InvalidArgumentError(absl::StrCat(
            Where(), "parentheses nested deeper than ", kMaxLayoutDepth, " levels at character ",
            pos_ + 1));
      }
      ++pos_;
      ASSIGN_OR_RETURN(unit, Sequence());
      --depth_;
      if (pos_ >= text_.size()) {
        return absl::InvalidArgumentError(absl::StrCat(Where(), "\"(\" is never closed"));
      }
      ++pos_;  // ')'
    } else if (c == 'E' || c == 't' || c == 'm' || c == 'L' || c == '|') {
      unit = std::string(1, c);
      ++pos_;
    } else {
      return Unexpected();
    }
    if (pos_ >= text_.size() || text_[pos_] != '*') return unit;
    ++pos_;
    const size_t start = pos_;
    size_t count = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      count = count * 10 + static_cast<size_t>(text_[pos_] - '0');
      if (count > kMaxExpandedLayout) return TooLong();
      ++pos_;
    }
    if (pos_ == start) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(), "\"*\" at character ", start, " needs a count"));
    }
    if (unit.size() * count > kMaxExpandedLayout) return TooLong();
    std::string out;
    out.reserve(unit.size() * count);
    for (size_t i = 0; i < count; ++i) out += unit;
    return out;
  }

  std::string Where() const { return absl::StrCat("layout ", QuoteForMessage(text_), ": "); }

  absl::Status Unexpected() const {
    return absl::InvalidArgumentError(absl::StrCat(Where(), "unexpected \"", text_.substr(pos_, 1),
                                                   "\" at character ", pos_ + 1,
                                                   "; expected E, t, L, |, (, ) or *N"));
  }

  absl::Status TooLong() const {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(), "expands to more than ", kMaxExpandedLayout, " symbols"));
  }

  static constexpr int kMaxLayoutDepth = 32;

  absl::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
};

// Checks one expanded stage ("Ettt", "ttL", "") and counts its layers.
absl::StatusOr<int> StageLayers(absl::string_view layout, absl::string_view stage, int index,
                                int last) {
  int count = 0;
  for (size_t i = 0; i < stage.size(); ++i) {
    const char c = stage[i];
    if (c == 'm') {
      return absl::InvalidArgumentError(absl::StrCat(
          "layout \"", layout, "\": m (multi-token prediction) is not a layer kind of version 2 "
          "models; describe MTP layers as body layers (t)"));
    }
    if (c == 'E' && (index != 0 || i != 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("layout \"", layout, "\": the embedding must open the first stage"));
    }
    if (c == 'L' && (index != last || i + 1 != stage.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("layout \"", layout, "\": the loss must close the last stage"));
    }
    ++count;
  }
  return count;
}

int CountKind(const LayeredModel& model, const Partition& p, int stage, LayerKind kind) {
  int n = 0;
  for (int i = p.begin(stage); i < p.end(stage); ++i) n += model.layers[i].kind == kind ? 1 : 0;
  return n;
}

// Sums the layers of one stage into a stage override.
StageSpec StageSum(const LayeredModel& model, int begin, int end) {
  double f = 0, i = 0, w = 0;
  int64_t stash = 0, params = 0;
  std::vector<int64_t> segments;  // each layer's stash is an allocation of its own
  for (int k = begin; k < end; ++k) {
    const LayerCost& layer = model.layers[k];
    f += layer.forward_us;
    i += layer.backward_input_us;
    w += layer.backward_weight_us;
    stash += layer.stash_bytes;
    if (layer.stash_bytes > 0) segments.push_back(layer.stash_bytes);
    params += layer.param_bytes;
  }
  const int64_t input = begin == 0 ? model.input_bytes : model.layers[begin - 1].output_bytes;
  const int64_t output = end > begin ? model.layers[end - 1].output_bytes : input;
  StageSpec spec;
  spec.forward_us = f;
  spec.backward_input_us = i;
  spec.backward_weight_us = w;
  spec.input_bytes = input;
  spec.output_bytes = output;
  spec.stash_bytes = stash;
  if (segments.size() > 1) spec.stash_segments = std::move(segments);
  spec.param_bytes = params;
  return spec;
}

}  // namespace

std::string Partition::ToLayout(const LayeredModel& model) const {
  std::vector<std::string> stages;
  for (int s = 0; s < num_stages(); ++s) {
    std::string text;
    int body = 0;
    for (int i = begin(s); i < end(s); ++i) {
      const LayerKind kind = model.layers[i].kind;
      if (kind == LayerKind::kLayer) ++body;
      if (kind == LayerKind::kEmbedding) text += "E";
    }
    if (body == 1) text += "t";
    if (body > 1) absl::StrAppend(&text, "t*", body);
    if (end(s) > begin(s) && model.layers[end(s) - 1].kind == LayerKind::kLoss) text += "L";
    stages.push_back(std::move(text));
  }
  return absl::StrJoin(stages, "|");
}

absl::StatusOr<Partition> EvenPartition(const LayeredModel& model, int stages) {
  if (stages < 1) {
    return absl::InvalidArgumentError(absl::StrCat("a partition needs >= 1 stage, got ", stages));
  }
  const int body = model.NumBodyLayers();
  const int base = body / stages;
  const int extra = body % stages;
  // The remainder goes one layer each to the middle stages, away from the
  // heads on the first and last.
  const int first_extra = (stages - extra) / 2;
  Partition p;
  p.boundaries.push_back(0);
  int at = model.HasEmbedding() ? 1 : 0;
  for (int s = 0; s < stages; ++s) {
    at += base + (s >= first_extra && s < first_extra + extra ? 1 : 0);
    p.boundaries.push_back(s + 1 == stages ? static_cast<int>(model.layers.size()) : at);
  }
  return p;
}

absl::StatusOr<std::string> ExpandLayout(absl::string_view layout) {
  return LayoutExpander(layout).Expand();
}

absl::StatusOr<Partition> ParseLayout(absl::string_view layout, const LayeredModel& model,
                                      int stages) {
  ASSIGN_OR_RETURN(std::string expanded, ExpandLayout(layout));
  const std::vector<absl::string_view> parts = absl::StrSplit(expanded, '|');
  if (static_cast<int>(parts.size()) != stages) {
    return absl::InvalidArgumentError(absl::StrCat("layout \"", layout, "\" has ", parts.size(),
                                                   " stages; the schedule has ", stages,
                                                   " per chain"));
  }
  Partition p;
  p.boundaries.push_back(0);
  for (int s = 0; s < stages; ++s) {
    ASSIGN_OR_RETURN(int count, StageLayers(layout, parts[s], s, stages - 1));
    p.boundaries.push_back(p.boundaries.back() + count);
  }
  const int placed = p.boundaries.back();
  const auto count = [&](char c) { return std::count(expanded.begin(), expanded.end(), c); };
  if (count('E') != (model.HasEmbedding() ? 1 : 0) || count('L') != (model.HasLoss() ? 1 : 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layout \"", layout, "\" has ", count('E'), " E and ", count('L'), " L; the model has ",
        model.HasEmbedding() ? 1 : 0, " embedding and ", model.HasLoss() ? 1 : 0, " loss"));
  }
  if (placed != static_cast<int>(model.layers.size())) {
    return absl::InvalidArgumentError(absl::StrCat("layout \"", layout, "\" places ", count('t'),
                                                   " body layers; the model has ",
                                                   model.NumBodyLayers()));
  }
  return p;
}

absl::Status ValidatePartition(const Partition& p, const LayeredModel& model) {
  const int n = static_cast<int>(model.layers.size());
  if (p.num_stages() < 1 || p.boundaries.front() != 0 || p.boundaries.back() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a partition's boundaries must run from 0 to the model's ", n, " layers"));
  }
  for (int s = 0; s < p.num_stages(); ++s) {
    if (p.end(s) < p.begin(s)) {
      return absl::InvalidArgumentError(
          absl::StrCat("partition stage ", s, " ends before it begins"));
    }
  }
  const int last = p.num_stages() - 1;
  if (model.HasEmbedding() && CountKind(model, p, 0, LayerKind::kEmbedding) != 1) {
    return absl::InvalidArgumentError("the embedding must be on the first stage");
  }
  if (model.HasLoss() && CountKind(model, p, last, LayerKind::kLoss) != 1) {
    return absl::InvalidArgumentError("the loss must be on the last stage");
  }
  return absl::OkStatus();
}

absl::StatusOr<Model> StageModel(const LayeredModel& model, const Partition& partition,
                                 int chains) {
  RETURN_IF_ERROR(ValidatePartition(partition, model));
  Model out;
  out.p2p = model.p2p;
  out.dp = model.dp;
  const int per_chain = partition.num_stages();
  out.stages.reserve(static_cast<size_t>(per_chain) * chains);
  for (int c = 0; c < chains; ++c) {
    for (int k = 0; k < per_chain; ++k) {
      out.stages.push_back({.index = c * per_chain + k,
                            .spec = StageSum(model, partition.begin(k), partition.end(k))});
    }
  }
  absl::Status valid = ValidateModel(out);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the partition \"", partition.ToLayout(model), "\" gives a stage beyond ",
                     "a model's limits: ", valid.message()));
  }
  return out;
}

}  // namespace jitpipe
