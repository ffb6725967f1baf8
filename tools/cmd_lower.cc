// jitpipe lower FILE: a compute-only schedule to a lowered one.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/ir/format_grid.h"
#include "scheduler/ir/schedule_io.h"
#include "scheduler/ir/schedule_json.h"
#include "scheduler/passes/lower.h"
#include "stages/predict/predict.h"
#include "tools/commands.h"
#include "tools/common_flags.h"

ABSL_FLAG(std::string, recv, "jit",
          "where receives go: jit (right before the consumer: deadlock-free with tag-matched "
          "transports, peak memory at the lower bound), jit-rendezvous (as late as ordered "
          "rendezvous transports allow, e.g. one NCCL stream) or early (PyTorch's "
          "_add_send_recv)");
ABSL_FLAG(std::string, backward, "keep",
          "backward form: keep, split (B -> I, W) or merge (I W -> B, PyTorch's _merge_bw)");
ABSL_FLAG(bool, fsdp, false, "add UNSHARD/RESHARD (PyTorch's 3-stage lookahead)");
ABSL_FLAG(bool, reduce_grad, false, "add REDUCE_GRAD after each stage's last B or W");
ABSL_FLAG(std::string, dump_after, "",
          "print the step x rank grid of the program after this pass to stderr");

namespace jitpipe::cli {
namespace {

// LowerOptions from the flags; a usage error message when a value is bad.
absl::StatusOr<LowerOptions> OptionsFromFlags() {
  LowerOptions options;
  const std::string recv = absl::GetFlag(FLAGS_recv);
  absl::StatusOr<RecvPlacement> placement = ParseRecvPlacement(recv);
  if (!placement.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--recv must be jit, jit-rendezvous or early, not \"", recv, "\""));
  }
  options.recv = *placement;
  const std::string backward = absl::GetFlag(FLAGS_backward);
  if (backward == "split") {
    options.backward = BackwardForm::kSplit;
  } else if (backward == "merge") {
    options.backward = BackwardForm::kMerge;
  } else if (backward != "keep") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backward must be keep, split or merge, not \"", backward, "\""));
  }
  options.fsdp = absl::GetFlag(FLAGS_fsdp);
  options.reduce_grad = absl::GetFlag(FLAGS_reduce_grad);
  options.overlap = absl::GetFlag(FLAGS_overlap);
  if (options.overlap && !options.reduce_grad) {
    return absl::InvalidArgumentError("--overlap needs --reduce-grad");
  }
  options.dump_after = absl::GetFlag(FLAGS_dump_after);
  if (!options.dump_after.empty()) {
    const std::vector<std::string> passes = LoweringPassNames(options);
    if (std::find(passes.begin(), passes.end(), options.dump_after) == passes.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dump-after ", options.dump_after,
                       ": no such pass with these options; the passes are: ",
                       absl::StrJoin(passes, ", ")));
    }
  }
  return options;
}

int RunLower(const Command& command, const Invocation& invocation) {
  absl::StatusOr<LowerOptions> options = OptionsFromFlags();
  if (!options.ok()) return UsageError(command, options.status().message());
  const std::string out = absl::GetFlag(FLAGS_output);
  if (!out.empty()) {
    if (auto format = FormatForOutput(out); !format.ok()) {
      return UsageError(command, format.status().message());
    }
  }
  const std::string& path = invocation.positional[0];
  auto schedule = LoadInputSchedule(path);
  if (!schedule.ok()) return Fail(command, schedule.status());
  if (const std::string model_path = absl::GetFlag(FLAGS_model); !model_path.empty()) {
    absl::StatusOr<Model> model = LoadModel(model_path);
    if (!model.ok()) return Fail(command, model.status());
    options->overlap_peak = PlannedPeak(*model);  // --overlap's memory limit
  }
  auto lowered = LowerWithDump(*schedule, *options);
  if (!lowered.ok()) {
    return Fail(command, absl::Status(lowered.status().code(),
                                      absl::StrCat(path, ": ", lowered.status().message())));
  }
  if (lowered->dumped.has_value()) {
    std::fprintf(stderr, "after pass %s:\n%s", options->dump_after.c_str(),
                 FormatPipelineOrder(lowered->dumped->ranks).c_str());
  }
  if (out.empty()) {
    std::fputs(ScheduleToJson(lowered->lowered).c_str(), stdout);
    return kExitOk;
  }
  if (absl::Status saved = SaveSchedule(out, lowered->lowered); !saved.ok()) {
    return Fail(command, saved);
  }
  return kExitOk;
}

}  // namespace

Command LowerCommand() {
  return Command{
      .name = "lower",
      .synopsis = "lower FILE [--recv jit|jit-rendezvous|early] [--backward keep|split|merge] "
                  "[--fsdp] [--reduce-grad] [--overlap [--model MODEL]] [--dump-after NAME] "
                  "[-o FILE]",
      .summary = "Lower a compute-only schedule: add every send and receive (and, on request, "
                 "FSDP unshard/reshard and gradient reduction). --recv jit (the default) posts "
                 "each receive right before its consumer: deadlock-free under relaxed semantics "
                 "(tag-matched sends that do not wait: jitpipe's transports, PyTorch's runtime), "
                 "with the jit memory plan's peak at the lower bound; --recv jit-rendezvous keeps "
                 "each pair of ranks' receives in send order and posts some early so that "
                 "ordered rendezvous transports (one NCCL stream, MPI_Ssend) cannot deadlock "
                 "either, at a memory cost `jitpipe plan` shows; --recv early reproduces "
                 "PyTorch's _add_send_recv exactly. --overlap (with --reduce-grad) reorders Ws "
                 "so that gradient reductions hide under the compute that follows, never "
                 "raising a rank's "
                 "activation-unit peak (with --model: its jit-planned peak). Writes JSON to "
                 "stdout, or -o FILE (.json or .csv).",
      .flags = {"recv", "backward", "fsdp", "reduce_grad", "overlap", "model", "dump_after",
                "output", "legacy_names"},
      .min_positional = 1,
      .max_positional = 1,
      .run = RunLower,
  };
}

}  // namespace jitpipe::cli
