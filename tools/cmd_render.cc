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
#include "tools/model_input.h"
#include "tools/schedule_diagram.h"
#include "traces/svg_render.h"

namespace jitpipe::cli {
namespace {

int RunRender(const Command& command, const Invocation& invocation) {
  const std::string out = absl::GetFlag(FLAGS_output);
  if (out.empty()) return UsageError(command, "-o OUT.svg is required (the output is SVG)");
  if (!absl::EndsWithIgnoreCase(out, ".svg")) {
    return UsageError(command, absl::StrCat("-o ", out, ": the output is SVG; name it *.svg"));
  }
  const std::string& path = invocation.positional[0];
  absl::StatusOr<Schedule> schedule = LoadInputSchedule(path);
  if (!schedule.ok()) return Fail(command, schedule.status());
  absl::StatusOr<PartitionChoice> partition = PartitionFromFlags();
  if (!partition.ok()) return UsageError(command, partition.status().message());
  partition->predict.overlap = absl::GetFlag(FLAGS_overlap);
  const std::string model_path = absl::GetFlag(FLAGS_model);
  Model model = UnitCostModel();
  if (!model_path.empty()) {
    absl::StatusOr<StagedModel> loaded = LoadModelForSchedule(model_path, *schedule, *partition);
    if (!loaded.ok()) return Fail(command, loaded.status());
    model = std::move(loaded->model);
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
      RenderSvg(ScheduleDiagram(title, *p, model_path.empty() ? "units of F" : "us"));
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
      .flags = {"output", "model", "layout", "partition", "time_budget", "overlap", "legacy_names"},
      .min_positional = 1,
      .max_positional = 1,
      .run = RunRender,
  };
}

}  // namespace jitpipe::cli
