// jitpipe compare --pp P (--microbatches M | --global-batch G) --model MODEL
// [--stages-per-rank V] [--overlap] [--json] [--layout L | --partition
// even|balanced] [--peak-tflops T] [--time-budget S] [--svg OUT]: every
// built-in schedule valid for (P, M, V), side by side under one cost model.
// --global-batch (version 2 models) makes M = G / (dp x microbatch size).
//
// A version 2 (layered) MODEL runs planning/compare.h: every schedule at
// every v of 1, 2 and 4 (or V), all doing the same work, with each rank's
// memory, all of it, against the device; sorted by makespan among the rows
// that fit; step, bubble split, tokens/s and MFU per row; --svg draws the
// winner (tools/compare_report.h). --time-budget bounds the whole
// comparison; a progress line goes to stderr when it is a terminal. A
// version 1 MODEL gives per-stage costs and runs as follows.
//
// planning/compare_per_stage.h evaluates every schedule; the table is
// sorted by makespan (ties by name) and the best is marked "*"; schedules
// that refuse the parameters are listed after it with the generator's
// reason. --json prints the same as one object. Exit 1 when no schedule
// accepts the parameters.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/byte_units.h"
#include "base/time_units.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "scheduler/generators/generate.h"
#include "scheduler/ir/model.h"
#include "planning/compare_per_stage.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/compare_report.h"
#include "tools/model_input.h"
#include "scheduler/ir/model_file.h"

// Defined in cmd_generate.cc.

ABSL_FLAG(std::string, svg, "",
          "version 2 models: draw the winner (the fastest schedule that fits) to this SVG file");

namespace jitpipe::cli {
namespace {

using Json = nlohmann::ordered_json;

using Row = PerStageRow;
using Skipped = PerStageSkipped;

// "name: reason", without repeating a name the reason starts with.
std::string Reason(const Skipped& s) {
  if (absl::StartsWith(s.reason, absl::StrCat(s.schedule, ": "))) return s.reason;
  return absl::StrCat(s.schedule, ": ", s.reason);
}

void PrintTable(const std::vector<Row>& rows, const std::vector<Skipped>& skipped, int pp,
                int mbs) {
  std::printf("pp %d, %d microbatches; sorted by makespan, * = best; memory: the worst rank\n",
              pp, mbs);
  std::printf("  %-18s %2s %6s %12s %8s %12s %12s %12s %12s %12s\n", "schedule", "v", "work",
              "makespan", "bubble", "span bubble", "exposed red", "jit peak", "eager peak",
              "arena");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::printf("%c %-18s %2d %6lld %12s %7.2f%% %11.2f%% %12s %12s %12s %12s\n",
                i == 0 ? '*' : ' ', r.schedule.c_str(), r.stages_per_rank,
                static_cast<long long>(r.work), FormatMicros(r.simulation.makespan_us).c_str(),
                100 * r.simulation.bubble_fraction, 100 * r.simulation.span_bubble_fraction,
                FormatMicros(r.simulation.exposed_reduce_us).c_str(),
                FormatBytes(r.jit_peak).c_str(),
                FormatBytes(r.eager_peak).c_str(), FormatBytes(r.arena).c_str());
  }
  const bool mixed = std::any_of(rows.begin(), rows.end(),
                                 [&](const Row& r) { return r.work != rows.front().work; });
  if (mixed) {
    std::printf("note: work = stage-microbatch pairs per rank; the model's costs are per stage, "
                "so rows with different work run different amounts of compute (a stage of a "
                "v-stage schedule is 1/v of a rank's layers; DualPipe runs two model copies of "
                "m/2 microbatches)\n");
  }
  if (skipped.empty()) return;
  std::printf("not valid for these parameters:\n");
  for (const Skipped& s : skipped) std::printf("  %s\n", Reason(s).c_str());
}

void PrintJson(const std::vector<Row>& rows, const std::vector<Skipped>& skipped, int pp,
               int mbs, int v, bool overlap) {
  Json out;
  out["pp"] = pp;
  out["microbatches"] = mbs;
  out["stages_per_rank"] = v > 0 ? Json(v) : Json(nullptr);
  out["overlap"] = overlap;
  Json list = Json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    list.push_back({{"schedule", r.schedule},
                    {"stages_per_rank", r.stages_per_rank},
                    {"work", r.work},
                    {"best", i == 0},
                    {"makespan_us", r.simulation.makespan_us},
                    {"bubble_fraction", r.simulation.bubble_fraction},
                    {"span_bubble_fraction", r.simulation.span_bubble_fraction},
                    {"exposed_reduce_us", r.simulation.exposed_reduce_us},
                    {"reduce_us", r.simulation.max_rank_reduce_us},
                    {"jit_peak_bytes", r.jit_peak},
                    {"eager_peak_bytes", r.eager_peak},
                    {"arena_bytes", r.arena},
                    {"simulated_peak_bytes", r.simulated_peak}});
  }
  out["schedules"] = std::move(list);
  Json skip = Json::array();
  for (const Skipped& s : skipped) skip.push_back({{"schedule", s.schedule}, {"reason", s.reason}});
  out["skipped"] = std::move(skip);
  std::printf("%s\n", out.dump(1).c_str());
}

int RunLayeredCompare(const Command& command, const std::string& model_path,
                      const LayeredModel& model, const CompareOptions& options) {
  absl::StatusOr<Comparison> c = CompareSchedules(model, options);
  if (!c.ok()) return Fail(command, c.status());
  if (c->rows.empty()) {
    const int code = Fail(command, absl::InvalidArgumentError(absl::StrCat(
                                       "no schedule accepts pp ", options.pp, ", ",
                                       options.microbatches, " microbatches with ", model_path)));
    for (const CompareSkipped& s : c->skipped) {
      std::fprintf(stderr, "  %s v %d: %s\n", s.schedule.c_str(), s.stages_per_rank,
                   s.reason.c_str());
    }
    return code;
  }
  const CompareHeader header{.model_path = model_path, .model = &model, .options = &options};
  if (absl::GetFlag(FLAGS_json)) {
    PrintComparisonJson(header, *c);
  } else {
    PrintComparisonTable(header, *c);
  }
  if (const std::string svg = absl::GetFlag(FLAGS_svg); !svg.empty()) {
    if (absl::Status s = WriteWinnerSvg(header, *c, svg); !s.ok()) return Fail(command, s);
  }
  return kExitOk;
}

// "compare: 12 of 42 candidates judged" over itself, while stderr is a
// terminal (a log or a pipe gets nothing).
std::function<void(int, int)> ProgressLine() {
  if (!isatty(fileno(stderr))) return {};
  return [](int done, int total) {
    std::fprintf(stderr, "\rcompare: %d of %d candidates judged", done, total);
    if (done == total) std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  };
}

int RunCompare(const Command& command, const Invocation& invocation) {
  for (absl::string_view flag : {"pp", "model"}) {
    if (!invocation.IsSet(flag)) {
      return UsageError(command, absl::StrCat("missing --", flag, "; usage: jitpipe ",
                                              command.synopsis));
    }
  }
  const bool microbatches_set = invocation.IsSet("microbatches");
  const bool global_batch_set = invocation.IsSet("global_batch");
  if (!microbatches_set && !global_batch_set) {
    return UsageError(command, absl::StrCat("missing --microbatches or --global-batch; usage: "
                                            "jitpipe ", command.synopsis));
  }
  const int pp = absl::GetFlag(FLAGS_pp);
  const int v = absl::GetFlag(FLAGS_stages_per_rank);
  if (pp < 1 || (microbatches_set && absl::GetFlag(FLAGS_microbatches) < 1) || v < 0 ||
      (global_batch_set && absl::GetFlag(FLAGS_global_batch) < 1)) {
    return UsageError(command, "--pp, --microbatches and --global-batch must be >= 1, "
                               "--stages-per-rank >= 0");
  }
  absl::StatusOr<PartitionChoice> partition = PartitionFromFlags();
  if (!partition.ok()) return UsageError(command, partition.status().message());
  const std::string model_path = absl::GetFlag(FLAGS_model);
  absl::StatusOr<ModelFile> file = LoadModelFile(model_path, MaxInputBytes());
  if (!file.ok()) return Fail(command, file.status());
  absl::StatusOr<int> microbatches = MicrobatchesFromFlags(
      microbatches_set, global_batch_set, file->layered() ? &file->layers : nullptr);
  if (!microbatches.ok()) {
    return Fail(command, absl::Status(microbatches.status().code(),
                                      absl::StrCat(model_path, ": ",
                                                   microbatches.status().message())));
  }
  const int mbs = *microbatches;
  if (file->layered()) {
    if (absl::Status device = ApplyDeviceFlags(file->layers.device); !device.ok()) {
      return UsageError(command, device.message());
    }
    if (absl::Status peak = ApplyPeakFlag(invocation.IsSet("peak_tflops"), file->layers.device);
        !peak.ok()) {
      return UsageError(command, peak.message());
    }
    CompareOptions options{.pp = pp, .microbatches = mbs, .partition = *partition,
                           .overlap = absl::GetFlag(FLAGS_overlap),
                           .time_budget = partition->time_budget,
                           .progress = ProgressLine()};
    if (v > 0) options.stages_per_rank = {v};
    return RunLayeredCompare(command, model_path, file->layers, options);
  }
  if (invocation.IsSet("peak_tflops")) {
    return Fail(command, absl::InvalidArgumentError(absl::StrCat(
                             model_path, ": --peak-tflops needs a version 2 model (its workload "
                                         "gives the FLOPs); this one gives per-stage costs")));
  }
  if (!partition->layout.empty() || partition->method != PartitionMethod::kEven ||
      !absl::GetFlag(FLAGS_svg).empty() || invocation.IsSet("memory_limit") ||
      invocation.IsSet("reserve")) {
    return Fail(command, absl::InvalidArgumentError(absl::StrCat(
                             model_path, ": --layout, --partition balanced, --svg, "
                             "--memory-limit and --reserve need a version 2 model (layers); "
                             "this one gives per-stage costs")));
  }
  const bool overlap = absl::GetFlag(FLAGS_overlap);
  absl::StatusOr<PerStageComparison> compared =
      ComparePerStage(file->stages, pp, mbs, v, overlap);
  if (!compared.ok()) return Fail(command, compared.status());
  const std::vector<Row>& rows = compared->rows;
  const std::vector<Skipped>& skipped = compared->skipped;
  if (rows.empty()) {
    const int code = Fail(command, absl::InvalidArgumentError(absl::StrCat(
                                       "no schedule accepts pp ", pp, ", ", mbs, " microbatches",
                                       v > 0 ? absl::StrCat(", ", v, " stages per rank") : "")));
    for (const Skipped& s : skipped) std::fprintf(stderr, "  %s\n", Reason(s).c_str());
    return code;
  }
  if (absl::GetFlag(FLAGS_json)) {
    PrintJson(rows, skipped, pp, mbs, v, overlap);
  } else {
    PrintTable(rows, skipped, pp, mbs);
  }
  return kExitOk;
}

}  // namespace

Command CompareCommand() {
  return Command{
      .name = "compare",
      .synopsis = "compare --pp P (--microbatches M | --global-batch G) --model MODEL "
                  "[--stages-per-rank V] [--overlap] [--json] [--layout L | --partition "
                  "even|balanced] [--peak-tflops T] [--time-budget S] [--svg OUT]",
      .summary =
          "Compare every built-in schedule valid for these parameters under one cost model: "
          "each is generated (--stages-per-rank, else its default), lowered with gradient "
          "reduction (--overlap: and the overlap pass) and simulated. One table sorted by "
          "makespan, the best marked *: makespan, bubble (1 - busy/makespan, worst rank), span "
          "bubble (the zero-bubble papers' measure), exposed reduction, the worst rank's jit "
          "and eager peak memory and jit arena. Schedules that refuse the parameters are "
          "listed with the reason. With a version 2 (layered) MODEL: every schedule at every v "
          "of 1, 2 and 4 (or --stages-per-rank), each cut from the same layers (evenly, by "
          "--layout or --partition balanced) so that every row does the same work; columns "
          "step (the simulated makespan), bubble split into pipeline bubble (the busiest "
          "rank's idle) and stage imbalance (the busiest less the least busy rank's work), "
          "span bubble, exposed reduction, tokens/s per GPU and MFU of the simulated step "
          "(from the model's workload; MFU needs --peak-tflops or device.peak_tflops), the "
          "heaviest rank's memory (all of it: parameters, gradients, optimizer, activations) "
          "and whether every rank fits the device, by how much; sorted by makespan among those "
          "that fit; --global-batch G sets the microbatches to G / (dp x microbatch size); "
          "--time-budget bounds the whole comparison (rows not judged in time are listed); "
          "--svg draws the winner.",
      .flags = {"pp", "microbatches", "global_batch", "stages_per_rank", "model", "layout",
                "partition", "time_budget", "memory_limit", "reserve", "peak_tflops", "overlap",
                "json", "svg"},
      .min_positional = 0,
      .max_positional = 0,
      .run = RunCompare,
  };
}

}  // namespace jitpipe::cli
