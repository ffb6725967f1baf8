// jitpipe render FILE -o OUT.svg [--model MODEL] [--overlap]: the schedule
// diagram papers draw, as SVG (traces/svg_render.h).
//
// The schedule is simulated (stages/predict/predict.h: a compute-only FILE is
// lowered with REDUCE_GRAD first) under MODEL, or without one under unit
// costs (F = I = W = 1, B = 2, OVERLAP_F_B = F + B, free communication).
// A row per rank; a block per compute action at its simulated start, as
// wide as its simulated duration, coloured by kind (F, I, W, B, OVERLAP_F_B)
// and labelled with its microbatch ("f/b" for an OVERLAP_F_B); gradient
// reductions, when the model has any, as thin bars under the rank's row.
// The file is written atomically.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/atomic_file.h"
#include "scheduler/ir/model.h"
#include "stages/predict/predict.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "traces/svg_render.h"

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

Model UnitModel() {
  Model m;
  m.defaults.forward_us = 1;
  m.defaults.backward_input_us = 1;
  m.defaults.backward_weight_us = 1;
  return m;
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

SvgDiagram Diagram(const std::string& title, const Prediction& p, absl::string_view unit) {
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

int RunRender(const Command& command, const Invocation& invocation) {
  const std::string out = absl::GetFlag(FLAGS_output);
  if (out.empty() || !absl::EndsWith(out, ".svg")) {
    return UsageError(command, "-o OUT.svg is required (the output is SVG)");
  }
  const std::string& path = invocation.positional[0];
  absl::StatusOr<Schedule> schedule = LoadInputSchedule(path);
  if (!schedule.ok()) return Fail(command, schedule.status());
  const std::string model_path = absl::GetFlag(FLAGS_model);
  Model model = UnitModel();
  if (!model_path.empty()) {
    absl::StatusOr<Model> loaded = LoadModel(model_path);
    if (!loaded.ok()) return Fail(command, loaded.status());
    model = *std::move(loaded);
  }
  absl::StatusOr<Prediction> p =
      Predict(*schedule, model, {.overlap = absl::GetFlag(FLAGS_overlap), .record_timeline = true});
  if (!p.ok()) {
    return Fail(command, absl::Status(p.status().code(), absl::StrCat(path, ": ", p.status().message())));
  }
  const Schedule& s = p->lowered;
  const std::string title = absl::StrFormat(
      "%s  pp %d, %d stages, %d microbatches: makespan %.6g %s, bubble %.1f%% (%s)",
      s.name.empty() ? path : s.name, s.pp, s.num_stages(), s.microbatches,
      p->simulation.makespan_us, model_path.empty() ? "units" : "us",
      100 * p->simulation.bubble_fraction, model_path.empty() ? "unit costs" : model_path);
  absl::StatusOr<std::string> svg =
      RenderSvg(Diagram(title, *p, model_path.empty() ? "units of F" : "us"));
  if (!svg.ok()) return Fail(command, svg.status());
  if (absl::Status written = WriteFileAtomically(out, *svg); !written.ok()) {
    return Fail(command, written);
  }
  return kExitOk;
}

}  // namespace

Command RenderCommand() {
  return Command{
      .name = "render",
      .synopsis = "render FILE -o OUT.svg [--model MODEL] [--overlap]",
      .summary =
          "Draw a schedule as papers do, in SVG: a row per rank, a block per compute action "
          "coloured by kind (F, I, W, B, overlapped F+B) and labelled with its microbatch, "
          "placed at its simulated start and as wide as its time under MODEL (unit costs "
          "without one: F = I = W = 1, B = 2); gradient reductions as thin bars under each "
          "rank; a legend and a time axis. A compute-only FILE is lowered first.",
      .flags = {"output", "model", "overlap", "legacy_names"},
      .min_positional = 1,
      .max_positional = 1,
      .run = RunRender,
  };
}

}  // namespace jitpipe::cli
