#include "tools/schedule_diagram.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace jitpipe::cli {
namespace {

// F, B, I and W each have a light style (a rank's first stage) and a dark
// one (its later stages: the second chunk of an interleaved or V schedule).
enum Style { kForward, kBackward = 2, kBackwardInput = 4, kBackwardWeight = 6, kOverlap = 8,
             kReduce };

std::vector<SvgStyle> Styles() {
  return {{"F  forward", "#6baed6", "#000000"},
          {"F  forward, later stage", "#2171b5", "#ffffff"},
          {"B  backward", "#fd8d3c", "#000000"},
          {"B  backward, later stage", "#d94801", "#ffffff"},
          {"I  input grad", "#66c2a4", "#000000"},
          {"I  input grad, later stage", "#238b45", "#ffffff"},
          {"W  weight grad", "#d9f0a3", "#000000"},
          {"W  weight grad, later stage", "#addd8e", "#000000"},
          {"F+B  overlapped", "#807dba", "#ffffff"},
          {"gradient reduction", "#525252", "#ffffff"}};
}

// `later`: the action's stage is not the lowest stage of its rank.
int StyleOf(const Action& a, bool later) {
  const int shade = later ? 1 : 0;
  switch (a.kind) {
    case ActionKind::kForward: return kForward + shade;
    case ActionKind::kBackward: return kBackward + shade;
    case ActionKind::kBackwardInput: return kBackwardInput + shade;
    case ActionKind::kBackwardWeight: return kBackwardWeight + shade;
    default: return kOverlap;
  }
}

std::string Label(const Action& a) {
  if (!a.is_compound()) return absl::StrCat(a.microbatch);
  std::string label;
  for (const Action& part : a.sub_actions) {
    absl::StrAppend(&label, label.empty() ? "" : "/", part.microbatch);
  }
  return label;
}

}  // namespace

SvgDiagram ScheduleDiagram(const std::string& title, const Prediction& p, absl::string_view unit) {
  SvgDiagram d{.title = title, .styles = Styles(), .time_unit = std::string(unit)};
  const Schedule& s = p.lowered;
  std::vector<int> first_stage(s.pp, s.num_stages());  // per rank, its lowest stage
  for (int stage = 0; stage < s.num_stages(); ++stage) {
    first_stage[s.RankOf(stage)] = std::min(first_stage[s.RankOf(stage)], stage);
  }
  for (int r = 0; r < s.pp; ++r) d.rows.push_back(absl::StrCat("rank ", r));
  for (const TimelineSpan& span : p.simulation.timeline.spans) {
    const bool reduce = span.track == TimelineTrack::kReduce;
    if (span.track != TimelineTrack::kCompute && !reduce) continue;
    if (reduce && span.end_us <= span.start_us) continue;  // free: nothing to draw
    const Action& a = s.ranks[span.rank][span.index];
    std::string tooltip = absl::StrFormat("rank %d: %s%s, %.6g to %.6g %s", span.rank,
                                          a.ToString(), reduce && span.bucket >= 0
                                                            ? absl::StrCat(" bucket ", span.bucket)
                                                            : "",
                                          span.start_us, span.end_us, unit);
    d.blocks.push_back({.row = span.rank,
                        .thin = reduce,
                        .start = span.start_us,
                        .duration = span.end_us - span.start_us,
                        .style = reduce ? kReduce : StyleOf(a, a.stage > first_stage[span.rank]),
                        .label = reduce ? "" : Label(a),
                        .tooltip = std::move(tooltip)});
  }
  return d;
}

}  // namespace jitpipe::cli
