// jitpipe generate --schedule NAME --pp P --microbatches M [--stages-per-rank V] [-o FILE]:
// a built-in schedule's compute-only program.
//
// --schedule auto --model MODEL [--memory-limit BYTES] [--time-budget S]:
// the fastest compute order found whose memory fits every rank
// (planning/auto_schedule.h), with an explanation of what it chose (on
// stdout with -o, else on stderr beside the JSON).
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "planning/auto_schedule.h"
#include "planning/step_figures.h"
#include "scheduler/generators/generate.h"
#include "scheduler/ir/model_file.h"
#include "base/byte_units.h"
#include "base/status_macros.h"
#include "scheduler/ir/schedule_io.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/model_input.h"


namespace jitpipe::cli {
namespace {

// `microbatches`: --microbatches, or what --global-batch makes of the model.
absl::StatusOr<AutoScheduleOptions> AutoOptionsFromFlags(int microbatches) {
  AutoScheduleOptions options;
  options.pp = absl::GetFlag(FLAGS_pp);
  options.microbatches = microbatches;
  if (options.pp < 1 || options.microbatches < 1) {
    return absl::InvalidArgumentError("--pp and --microbatches must be >= 1");
  }
  ASSIGN_OR_RETURN(options.memory_limit, MemoryLimitFromFlags());
  ASSIGN_OR_RETURN(options.reserve, ReserveFromFlags());
  ASSIGN_OR_RETURN(options.time_budget, TimeBudgetFromFlags());
  if (const int v = absl::GetFlag(FLAGS_stages_per_rank); v != 0) {
    if (v != 1 && v != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("--stages-per-rank for auto must be 1 or 2, got ", v));
    }
    options.stages_per_rank = {v};
  }
  // --layout, --partition even|balanced; unset: balanced.
  ASSIGN_OR_RETURN(PartitionChoice partition, PartitionFromFlags());
  options.partition.layout = partition.layout;
  if (!partition.use_recorded_layout) options.partition.method = partition.method;
  return options;
}

// What compare shows per row, for the chosen program: tokens/s per GPU and
// MFU of its simulated step (planning/step_figures.h); "" when the model
// gives no workload.
std::string ThroughputLine(const LayeredModel& model, const AutoScheduleOptions& options,
                           double makespan_us) {
  if (!(makespan_us > 0) || model.workload.TokensPerMicrobatch() <= 0) return "";
  const StepFigures f = StepFiguresOf(model, options.pp, options.microbatches, makespan_us);
  return absl::StrFormat(
      "throughput: %.0f tokens/s per GPU (%d tokens per step on %d GPUs)%s; derived from the "
      "simulated step, a model, not a measurement\n",
      f.tokens_per_s_per_gpu, f.tokens_per_step, f.gpus,
      f.mfu.has_value() ? absl::StrFormat(", MFU %.1f%% of %.4g TFLOP/s", 100 * *f.mfu,
                                          model.device.peak_tflops)
                        : "");
}

int RunAuto(const Command& command, const Invocation& invocation, const std::string& out) {
  const std::string model_path = absl::GetFlag(FLAGS_model);
  if (model_path.empty()) return UsageError(command, "--schedule auto needs --model MODEL");
  if (invocation.IsSet("global_batch") && absl::GetFlag(FLAGS_global_batch) < 1) {
    return UsageError(command, "--global-batch must be >= 1");
  }
  absl::StatusOr<ModelFile> model = LoadModelFile(model_path, MaxInputBytes());
  if (!model.ok()) return Fail(command, model.status());
  absl::StatusOr<int> microbatches =
      MicrobatchesFromFlags(invocation.IsSet("microbatches"), invocation.IsSet("global_batch"),
                            model->layered() ? &model->layers : nullptr);
  if (!microbatches.ok()) {
    return Fail(command, absl::Status(microbatches.status().code(),
                                      absl::StrCat(model_path, ": ",
                                                   microbatches.status().message())));
  }
  absl::StatusOr<AutoScheduleOptions> options = AutoOptionsFromFlags(*microbatches);
  if (!options.ok()) return UsageError(command, options.status().message());
  if (model->layered()) {
    if (absl::Status peak = ApplyPeakFlag(invocation.IsSet("peak_tflops"), model->layers.device);
        !peak.ok()) {
      return UsageError(command, peak.message());
    }
  }
  if (!model->layered() && !absl::GetFlag(FLAGS_partition).empty()) {
    return Fail(command, absl::InvalidArgumentError(absl::StrCat(
                             model_path, ": --partition needs a version 2 model (layers); this "
                                         "one gives per-stage costs")));
  }
  absl::StatusOr<AutoScheduleResult> result = AutoSchedule(*model, *options);
  if (!result.ok()) {
    return Fail(command, absl::Status(result.status().code(),
                                      absl::StrCat(model_path, ": ", result.status().message())));
  }
  const std::string explanation =
      result->Explain() + (model->layered() ? ThroughputLine(model->layers, *options,
                                                              result->evaluation.makespan_us)
                                            : "");
  if (out.empty()) {
    PrintScheduleJson(result->schedule);
    std::fputs(explanation.c_str(), stderr);
    return kExitOk;
  }
  // A CSV is what PyTorch and torchtitan load: the compute order alone
  // (their runtimes lower it themselves); it cannot record the cut.
  const bool csv = *FormatForOutput(out) == ScheduleFileFormat::kCsv;
  if (absl::Status saved = SaveSchedule(out, csv ? result->compute_only : result->schedule);
      !saved.ok()) {
    return Fail(command, saved);
  }
  std::printf("wrote %s%s\n%s", out.c_str(),
              csv ? ": the compute order (a CSV holds neither lowering nor cut)" : "",
              explanation.c_str());
  if (csv) {
    const std::string layout =
        result->layout.empty() ? "" : absl::StrCat(" --layout \"", result->layout, "\"");
    // The offsets are chosen again by lower, under the same model and limit.
    const std::string limit = absl::GetFlag(FLAGS_memory_limit);
    const std::string reserve = absl::GetFlag(FLAGS_reserve);
    const std::string chooser =
        result->evaluation.recv != RecvPlacement::kOffset
            ? ""
            : absl::StrCat(" --model ", model_path, layout,
                           limit.empty() ? "" : absl::StrCat(" --memory-limit ", limit),
                           reserve == "standard" ? "" : absl::StrCat(" --reserve ", reserve));
    std::printf("to run what was judged: jitpipe lower %s --reduce-grad --recv %s%s -o "
                "FILE.json; plan and simulate it with --model %s%s\n",
                out.c_str(), std::string(RecvPlacementName(result->evaluation.recv)).c_str(),
                chooser.c_str(), model_path.c_str(), layout.c_str());
  }
  return kExitOk;
}

int RunGenerate(const Command& command, const Invocation& invocation) {
  const bool is_auto = absl::AsciiStrToLower(absl::GetFlag(FLAGS_schedule)) == "auto";
  for (absl::string_view flag : {"schedule", "pp", "microbatches"}) {
    // auto may take --global-batch instead of --microbatches.
    if (flag == "microbatches" && is_auto && invocation.IsSet("global_batch")) continue;
    if (!invocation.IsSet(flag)) {
      return UsageError(command, absl::StrCat("missing --", flag, "; usage: jitpipe ",
                                              command.synopsis));
    }
  }
  if (is_auto) {
    const std::string out = absl::GetFlag(FLAGS_output);
    if (!out.empty()) {
      if (auto format = FormatForOutput(out); !format.ok()) {
        return UsageError(command, format.status().message());
      }
    }
    return RunAuto(command, invocation, out);
  }
  for (const auto& [flag, spelled] : {std::pair{"model", "--model"},
                                       std::pair{"memory_limit", "--memory-limit"},
                                       std::pair{"reserve", "--reserve"},
                                       std::pair{"layout", "--layout"},
                                       std::pair{"partition", "--partition"},
                                       std::pair{"time_budget", "--time-budget"},
                                       std::pair{"global_batch", "--global-batch"},
                                       std::pair{"peak_tflops", "--peak-tflops"}}) {
    if (invocation.IsSet(flag)) {
      return UsageError(command, absl::StrCat(spelled, " applies to --schedule auto only"));
    }
  }
  // An unknown name is a usage error; parameters a schedule cannot run with
  // are invalid input (exit 1, the generator's message).
  const std::string name = absl::GetFlag(FLAGS_schedule);
  if (absl::StatusOr<const GeneratorInfo*> g = FindGenerator(name); !g.ok()) {
    return UsageError(command, g.status().message());
  }
  const std::string out = absl::GetFlag(FLAGS_output);
  if (!out.empty()) {
    if (auto format = FormatForOutput(out); !format.ok()) {
      return UsageError(command, format.status().message());
    }
  }
  absl::StatusOr<Schedule> schedule = Generate(GenerateOptionsFromFlags());
  if (!schedule.ok()) return Fail(command, schedule.status());
  if (out.empty()) {
    PrintScheduleJson(*schedule);
    return kExitOk;
  }
  if (absl::Status saved = SaveSchedule(out, *schedule); !saved.ok()) {
    return Fail(command, saved);
  }
  return kExitOk;
}

// The help paragraph, listing every registered schedule.
absl::string_view Summary() {
  static const std::string* summary = [] {
    auto* text = new std::string(
        "Generate a built-in schedule's compute-only program. Each rank's forwards and "
        "backwards, with the bubbles PyTorch emits, go to -o FILE as jitpipe JSON or PyTorch "
        "CSV (by extension), or as JSON to stdout. Parameters a schedule cannot run with exit "
        "1, stating the constraint and valid alternatives.\n\n--schedule auto --model MODEL "
        "[--global-batch G instead of --microbatches: G / (dp x the model's microbatch size)] "
        "[--peak-tflops P: MFU beside tokens/s per GPU, for a model that gives its workload] "
        "[--memory-limit BYTES] [--time-budget S] [--layout L | --partition even|balanced] "
        "searches compute orders (every built-in schedule, the zero-bubble heuristic, and a "
        "list scheduler over one- and two-stage placements, I/W split, W deferral, warm-up "
        "depth and receive placement) and, for a version 2 model, the cut of its layers "
        "(balanced by default: each built-in on its own balanced cut, the other candidates on "
        "their placement's best; a --layout is honoured) for the smallest simulated step whose "
        "memory, all of it, fits every rank: --memory-limit, else the model's device memory. "
        "It writes the program it judged, lowered (REDUCE_GRAD on, receives as judged), with "
        "the cut and the model's fingerprint in a JSON file (a CSV holds neither: it prints "
        "them), so `simulate FILE --model MODEL` gives the step it printed; and explains what "
        "it chose: the binding constraint, the distance to the lower bound, the best built-in "
        "and the heuristic.\n\nschedules:\n");
    for (const GeneratorInfo& g : AllGenerators()) {
      const std::string label =
          g.aliases.empty() ? g.name
                            : absl::StrCat(g.name, " (", absl::StrJoin(g.aliases, ", "), ")");
      absl::StrAppendFormat(text, "  %-40s v = %d by default; %s\n", label,
                            g.default_stages_per_rank, g.summary);
    }
    text->pop_back();  // CommandHelp ends the paragraph itself
    return text;
  }();
  return *summary;
}

}  // namespace

Command GenerateCommand() {
  return Command{
      .name = "generate",
      .synopsis = "generate --schedule NAME --pp P --microbatches M [--stages-per-rank V] "
                  "[-o FILE]",
      .summary = Summary(),
      .flags = {"schedule", "pp", "microbatches", "stages_per_rank", "output", "model",
                "memory_limit", "reserve", "time_budget", "layout", "partition", "global_batch",
                "peak_tflops"},
      .min_positional = 0,
      .max_positional = 0,
      .run = RunGenerate,
  };
}

}  // namespace jitpipe::cli
