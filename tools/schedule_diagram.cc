#include "tools/schedule_diagram.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/time_units.h"

namespace jitpipe::cli {
namespace {

// F, B, I and W each have a light style (a rank's first stage) and a dark
// one (its later stages: the second chunk of an interleaved or V schedule).
enum Style { kForward, kBackward = 2, kBackwardInput = 4, kBackwardWeight = 6, kOverlap = 8,
             kSend, kRecv, kReduce, kUnshard };

// Thin lanes under a rank's row.
constexpr int kTransferLane = 1;    // sends and receives
constexpr int kCollectiveLane = 2;  // gradient reductions, FSDP all-gathers

std::vector<SvgStyle> Styles() {
  return {{"F  forward", "#6baed6", "#000000"},
          {"F  forward, later stage", "#2171b5", "#ffffff"},
          {"B  backward", "#fd8d3c", "#000000"},
          {"B  backward, later stage", "#d94801", "#ffffff"},
          {"I  input grad", "#66c2a4", "#000000"},
          {"I  input grad, later stage", "#238b45", "#ffffff"},
          {"W  weight grad", "#d9f0a3", "#000000"},
          {"W  weight grad, later stage", "#addd8e", "#000000"},
          {"F+B  overlapped forward and backward", "#807dba", "#ffffff"},
          {"send (posted to transfer done)", "#e377c2", "#000000"},
          {"receive (posted to data arrived)", "#bcbd22", "#000000"},
          {"gradient reduction", "#525252", "#ffffff"},
          {"FSDP unshard (all-gather)", "#969696", "#000000"}};
}

// `later`: the action's stage is not the lowest stage of its rank.
int ComputeStyle(const Action& a, bool later) {
  const int shade = later ? 1 : 0;
  switch (a.kind) {
    case ActionKind::kForward: return kForward + shade;
    case ActionKind::kBackward: return kBackward + shade;
    case ActionKind::kBackwardInput: return kBackwardInput + shade;
    case ActionKind::kBackwardWeight: return kBackwardWeight + shade;
    default: return kOverlap;
  }
}

// "stage/microbatch", and for an OVERLAP_F_B its parts joined by "+".
std::string Label(const Action& a) {
  if (!a.is_compound()) return absl::StrCat(a.stage, "/", a.microbatch);
  std::string label;
  for (const Action& part : a.sub_actions) {
    absl::StrAppend(&label, label.empty() ? "" : "+", part.stage, "/", part.microbatch);
  }
  return label;
}

std::string ShortLabel(const Action& a) {
  if (!a.is_compound()) return absl::StrCat(a.microbatch);
  std::string label;
  for (const Action& part : a.sub_actions) {
    absl::StrAppend(&label, label.empty() ? "" : "+", part.microbatch);
  }
  return label;
}

// The block of a span, with its lane and style; false for a span not drawn.
bool PlaceSpan(const TimelineSpan& span, const Action& a, bool later, SvgBlock& block) {
  switch (span.track) {
    case TimelineTrack::kCompute:
      block.style = ComputeStyle(a, later);
      block.label = Label(a);
      block.short_label = ShortLabel(a);
      return true;
    case TimelineTrack::kSend:
    case TimelineTrack::kRecv:
      block.lane = kTransferLane;
      block.style = span.track == TimelineTrack::kSend ? kSend : kRecv;
      return span.end_us > span.start_us;  // free: nothing to draw
    case TimelineTrack::kReduce:
    case TimelineTrack::kUnshard:
      block.lane = kCollectiveLane;
      block.style = span.track == TimelineTrack::kReduce ? kReduce : kUnshard;
      return span.end_us > span.start_us;
  }
  return false;
}

}  // namespace

SvgDiagram ScheduleDiagram(const std::string& title, const Prediction& p, SvgTimeUnit unit) {
  SvgDiagram d{.title = title,
               .styles = Styles(),
               .time_unit = unit,
               .abstract_unit = "units of F",
               .notes = {"Labels: stage/microbatch (an overlapped F+B: the forward's + the "
                         "backward's); the microbatch alone where the block is narrow, none "
                         "where that does not fit either. Hover over a block for its action "
                         "and times.",
                         "Under each rank: sends and receives, then gradient reductions and "
                         "FSDP all-gathers, where they take time."}};
  const std::string unit_name = unit == SvgTimeUnit::kAbstract ? "units of F" : "us";
  const Schedule& s = p.lowered;
  std::vector<int> first_stage(s.pp, s.num_stages());  // per rank, its lowest stage
  for (int stage = 0; stage < s.num_stages(); ++stage) {
    first_stage[s.RankOf(stage)] = std::min(first_stage[s.RankOf(stage)], stage);
  }
  for (int r = 0; r < s.pp; ++r) d.rows.push_back(absl::StrCat("rank ", r));
  for (const TimelineSpan& span : p.simulation.timeline.spans) {
    const Action& a = s.ranks[span.rank][span.index];
    SvgBlock block{.row = span.rank,
                   .start = span.start_us,
                   .duration = span.end_us - span.start_us};
    if (!PlaceSpan(span, a, a.stage > first_stage[span.rank], block)) continue;
    block.tooltip = absl::StrFormat(
        "rank %d: %s%s, %.6g to %.6g %s", span.rank, a.ToString(),
        span.track == TimelineTrack::kReduce && span.bucket >= 0
            ? absl::StrCat(" bucket ", span.bucket)
            : "",
        span.start_us, span.end_us, unit_name);
    d.blocks.push_back(std::move(block));
  }
  return d;
}

std::string ScheduleTitle(absl::string_view fallback_name, const Prediction& p, SvgTimeUnit unit,
                          absl::string_view costs) {
  const Schedule& s = p.lowered;
  const double makespan = p.simulation.makespan_us;
  return absl::StrFormat(
      "%s: pp %d, v %d, m %d, %d stages%s; makespan %s, bubble %.1f%%; %s",
      s.name.empty() ? fallback_name : s.name, s.pp, s.stages_per_rank, s.microbatches,
      s.num_stages(), s.chains > 1 ? absl::StrCat(" in ", s.chains, " chains") : "",
      unit == SvgTimeUnit::kAbstract ? absl::StrFormat("%.6g units of F", makespan)
                                     : FormatMicros(makespan),
      100 * p.simulation.bubble_fraction, costs);
}

}  // namespace jitpipe::cli
