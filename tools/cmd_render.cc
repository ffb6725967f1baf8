// jitpipe render FILE -o OUT.svg [--model MODEL] [--overlap] [--width PX]
// [--row-height PX]: the schedule diagram papers draw, as SVG
// (tools/schedule_diagram.h, traces/svg_render.h).
//
// The schedule is simulated (stages/predict/predict.h: a compute-only FILE is
// lowered with REDUCE_GRAD first) under MODEL, or without one under unit
// costs (F = I = W = 1, B = 2, OVERLAP_F_B = F + B, free communication).
// A row per rank; a block per compute action at its simulated start, as
// wide as its simulated duration, coloured by kind (F, I, W, B, OVERLAP_F_B)
// and labelled stage/microbatch; sends, receives and gradient reductions
// that take time as thin bars under the rank's row. --width sets the time
// axis in pixels (default: wide enough for most labels, growing with the
// step), --row-height a rank's row. The file is written atomically.
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

ABSL_FLAG(int, width, 0,
          "the time axis in pixels, 100 to 200000; 0: wide enough that 9 in 10 blocks show their "
          "stage/microbatch label (800 to 24000 px, growing with the step)");
ABSL_FLAG(int, row_height, 26, "the height of a rank's row in pixels, 8 to 200");

namespace jitpipe::cli {
namespace {

// --width and --row-height, checked. Errors: InvalidArgument naming the flag.
absl::StatusOr<SvgOptions> SvgOptionsFromFlags() {
  const int width = absl::GetFlag(FLAGS_width);
  const int row_height = absl::GetFlag(FLAGS_row_height);
  if (width != 0 && (width < kMinPlotWidthPx || width > kMaxPlotWidthPx)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--width %d: the time axis takes %g to %g pixels (0: automatic)", width,
        kMinPlotWidthPx, kMaxPlotWidthPx));
  }
  if (row_height < kMinRowHeightPx || row_height > kMaxRowHeightPx) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--row-height %d: a row takes %g to %g pixels", row_height, kMinRowHeightPx,
        kMaxRowHeightPx));
  }
  return SvgOptions{.plot_width_px = static_cast<double>(width),
                    .row_height_px = static_cast<double>(row_height)};
}

int RunRender(const Command& command, const Invocation& invocation) {
  const std::string out = absl::GetFlag(FLAGS_output);
  if (out.empty()) return UsageError(command, "-o OUT.svg is required (the output is SVG)");
  if (!absl::EndsWithIgnoreCase(out, ".svg")) {
    return UsageError(command, absl::StrCat("-o ", out, ": the output is SVG; name it *.svg"));
  }
  absl::StatusOr<SvgOptions> svg_options = SvgOptionsFromFlags();
  if (!svg_options.ok()) return UsageError(command, svg_options.status().message());
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
  const SvgTimeUnit unit =
      model_path.empty() ? SvgTimeUnit::kAbstract : SvgTimeUnit::kMicroseconds;
  const std::string title = ScheduleTitle(
      path, *p, unit, model_path.empty() ? "unit costs" : absl::StrCat("model ", model_path));
  absl::StatusOr<std::string> svg = RenderSvg(ScheduleDiagram(title, *p, unit), *svg_options);
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
      .synopsis = "render FILE -o OUT.svg [--model MODEL] [--overlap] [--width PX] "
                  "[--row-height PX]",
      .summary =
          "Draw a schedule as papers do, in SVG: a row per rank, a block per compute action "
          "coloured by kind (F, I, W, B, overlapped F+B; darker for a rank's later stages) and "
          "labelled stage/microbatch (the microbatch alone where the block is narrow, nothing "
          "where that does not fit either), placed at its simulated start and as wide as its "
          "time under MODEL (unit costs without one: F = I = W = 1, B = 2); sends, receives "
          "and gradient reductions that take time as thin bars under each rank; the rows' grey "
          "background is idle time. The title gives the schedule, pp, v, m, makespan and "
          "bubble; a time axis in us, ms or s (units of F without a model) with round ticks; a "
          "legend of the colours and the label format. --width sets the time axis in pixels "
          "(default: wide enough for 9 in 10 labels, 800 to 24000 px: pp 8 m 64 gets about "
          "16000 to 19000), --row-height a row. A compute-only FILE is lowered first.",
      .flags = {"output", "model", "layout", "partition", "time_budget", "overlap", "legacy_names",
                "width", "row_height"},
      .min_positional = 1,
      .max_positional = 1,
      .run = RunRender,
  };
}

}  // namespace jitpipe::cli
