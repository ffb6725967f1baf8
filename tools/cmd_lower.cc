// jitpipe lower FILE: a compute-only schedule to a lowered one.
// jitpipe lower --schedule NAME --pp P --microbatches M [--stages-per-rank V]:
// a built-in schedule, generated and lowered in one process.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/generators/generate.h"
#include "scheduler/ir/format_grid.h"
#include "scheduler/ir/schedule_io.h"
#include "scheduler/passes/lower.h"
#include "planning/recv_offsets.h"
#include "stages/predict/predict.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/model_input.h"

ABSL_FLAG(std::string, recv, "jit",
          "where receives go: jit (right before the consumer: deadlock-free with tag-matched "
          "transports, peak memory at the lower bound), jit-rendezvous (as late as ordered "
          "rendezvous transports allow, e.g. one NCCL stream), early (PyTorch's "
          "_add_send_recv) or offset (each receive k computes ahead of its consumer, the "
          "smallest k whose compute time hides its transfer under --model while every rank's "
          "memory stays within the model's device limit or --memory-limit)");
ABSL_FLAG(std::string, backward, "keep",
          "backward form: keep, split (B -> I, W) or merge (I W -> B, PyTorch's _merge_bw)");
ABSL_FLAG(bool, fsdp, false, "add UNSHARD/RESHARD (PyTorch's 3-stage lookahead)");
ABSL_FLAG(int, max_active_stages, jitpipe::kDefaultMaxActiveStages,
          "with --fsdp: how many stages a rank keeps unsharded (where RESHARD goes; PyTorch's "
          "max_active_stages)");
ABSL_FLAG(std::string, unshard_lookahead, "full",
          "with --fsdp: how early UNSHARD is issued, in distinct stages: full (the whole "
          "residency window, the old behaviour), auto (min(rank + 2, max active stages), "
          "PyTorch's rank-aware default), N, or one N per rank (comma-separated)");
ABSL_FLAG(bool, reduce_grad, false, "add REDUCE_GRAD after each stage's last B or W");
ABSL_FLAG(bool, defer_reduce_wait, false,
          "with --reduce-grad: wait for each reduction (WAIT_REDUCE_GRAD) just before the "
          "rank's next one, at most one outstanding (PyTorch's defer_reduce_grad_wait)");
ABSL_FLAG(bool, wait_send, false,
          "add WAIT_SEND_F after the local backward of each sent activation (PyTorch's "
          "_add_wait_send): the activation is freed there");
ABSL_DECLARE_FLAG(std::string, comms);  // tools/cmd_validate.cc
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
    return absl::InvalidArgumentError(absl::StrCat(
        "--recv must be jit, jit-rendezvous, early or offset, not \"", recv, "\""));
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
  options.max_active_stages = absl::GetFlag(FLAGS_max_active_stages);
  absl::StatusOr<UnshardLookahead> lookahead =
      ParseUnshardLookahead(absl::GetFlag(FLAGS_unshard_lookahead));
  if (!lookahead.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--unshard-lookahead must be full, auto, a number >= 1 or one number per "
                     "rank (comma-separated), not \"",
                     absl::GetFlag(FLAGS_unshard_lookahead), "\""));
  }
  options.unshard_lookahead = *lookahead;
  if (!options.fsdp && (options.max_active_stages != kDefaultMaxActiveStages ||
                        lookahead->kind != UnshardLookahead::Kind::kFull)) {
    return absl::InvalidArgumentError("--max-active-stages and --unshard-lookahead need --fsdp");
  }
  if (options.max_active_stages < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-active-stages must be at least 1, not ", options.max_active_stages));
  }
  options.reduce_grad = absl::GetFlag(FLAGS_reduce_grad);
  options.defer_reduce_wait = absl::GetFlag(FLAGS_defer_reduce_wait);
  if (options.defer_reduce_wait && !options.reduce_grad) {
    return absl::InvalidArgumentError("--defer-reduce-wait needs --reduce-grad");
  }
  options.wait_send = absl::GetFlag(FLAGS_wait_send);
  options.send_budget = absl::GetFlag(FLAGS_send_budget);
  if (options.send_budget < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--send-budget must be 0 (none) or at least 1, not ", options.send_budget));
  }
  options.overlap = absl::GetFlag(FLAGS_overlap);
  if (options.overlap && !options.reduce_grad) {
    return absl::InvalidArgumentError("--overlap needs --reduce-grad");
  }
  if (const std::string comms = absl::GetFlag(FLAGS_comms); !comms.empty()) {
    absl::StatusOr<CommLayout> layout = ParseCommLayout(comms);
    if (!layout.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--comms must be per-edge or per-group, not \"", comms, "\""));
    }
    if (options.recv == RecvPlacement::kEarly) {
      return absl::InvalidArgumentError(
          "--comms chooses the just-in-time placement for FIFO communicators; --recv early "
          "is PyTorch's placement as it is (safe for them already)");
    }
    if (options.recv == RecvPlacement::kOffset) {
      return absl::InvalidArgumentError(
          "--recv offset is deadlock-free with tag-matched transports only, not over the FIFO "
          "communicators --comms names; use --recv jit (lowered as jit-rendezvous there) or "
          "early");
    }
    options.comms = *layout;
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

// What lower lowers: FILE, or a built-in schedule generated here (the
// program `generate` writes, without the file in between or a second
// process). `label` starts the lowering's error messages: the path, or the
// schedule's name.
struct LowerInput {
  Schedule schedule;
  std::string label;
};

constexpr const char* kGeneratorFlags[] = {"schedule", "pp", "microbatches", "stages_per_rank"};

// The input; on failure the exit status, with the message printed.
std::variant<LowerInput, int> InputOf(const Command& command, const Invocation& invocation) {
  const bool generated = invocation.IsSet("schedule");
  if (!invocation.positional.empty()) {
    for (const char* flag : kGeneratorFlags) {
      if (invocation.IsSet(flag)) {
        return UsageError(command, "give FILE or --schedule NAME --pp P --microbatches M, "
                                   "not both");
      }
    }
    const std::string& path = invocation.positional[0];
    absl::StatusOr<Schedule> schedule = LoadInputSchedule(path);
    if (!schedule.ok()) return Fail(command, schedule.status());
    return LowerInput{*std::move(schedule), path};
  }
  if (!generated) {
    for (const char* flag : kGeneratorFlags) {
      if (invocation.IsSet(flag)) {
        return UsageError(command, "--pp, --microbatches and --stages-per-rank go with --schedule");
      }
    }
    return UsageError(command, absl::StrCat("missing argument; usage: jitpipe ",
                                            command.synopsis));
  }
  for (absl::string_view flag : {"pp", "microbatches"}) {
    if (!invocation.IsSet(flag)) {
      return UsageError(command, absl::StrCat("--schedule needs --", flag));
    }
  }
  const std::string name = absl::GetFlag(FLAGS_schedule);
  if (absl::AsciiStrToLower(name) == "auto") {
    return UsageError(command, "--schedule auto searches with a model: run `jitpipe generate "
                               "--schedule auto --model MODEL -o FILE`, then lower FILE");
  }
  if (absl::StatusOr<const GeneratorInfo*> g = FindGenerator(name); !g.ok()) {
    return UsageError(command, g.status().message());
  }
  absl::StatusOr<Schedule> schedule = Generate(GenerateOptionsFromFlags());
  if (!schedule.ok()) return Fail(command, schedule.status());
  return LowerInput{*std::move(schedule), name};
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
  std::variant<LowerInput, int> input = InputOf(command, invocation);
  if (const int* exit_code = std::get_if<int>(&input)) return *exit_code;
  const Schedule* schedule = &std::get<LowerInput>(input).schedule;
  const std::string& path = std::get<LowerInput>(input).label;
  const std::string model_path = absl::GetFlag(FLAGS_model);
  if (options->recv == RecvPlacement::kOffset && model_path.empty()) {
    return UsageError(command, "--recv offset needs --model: the cost model chooses each "
                               "receive's offset");
  }
  if (options->recv != RecvPlacement::kOffset &&
      (invocation.IsSet("memory_limit") || invocation.IsSet("reserve"))) {
    return UsageError(command, "--memory-limit and --reserve go with --recv offset");
  }
  if (!model_path.empty()) {
    absl::StatusOr<PartitionChoice> partition = PartitionFromFlags();
    if (!partition.ok()) return UsageError(command, partition.status().message());
    absl::StatusOr<StagedModel> model = LoadModelForSchedule(model_path, *schedule, *partition);
    if (!model.ok()) return Fail(command, model.status());
    options->overlap_peak = PlannedPeak(model->model);  // --overlap's memory limit
    if (options->recv == RecvPlacement::kOffset) {
      TrainingMemory training = model->training;
      if (absl::Status device = ApplyDeviceFlags(training.device); !device.ok()) {
        return UsageError(command, device.message());
      }
      options->recv_offsets = RecvOffsetChooser(model->model, training);
    }
  }
  // Moved in: the input is released once the first pass has read it.
  auto lowered = LowerWithDump(std::move(std::get<LowerInput>(input).schedule), *options);
  if (!lowered.ok()) {
    return Fail(command, absl::Status(lowered.status().code(),
                                      absl::StrCat(path, ": ", lowered.status().message())));
  }
  if (lowered->dumped.has_value()) {
    std::fprintf(stderr, "after pass %s:\n%s", options->dump_after.c_str(),
                 FormatPipelineOrder(lowered->dumped->ranks).c_str());
  }
  if (out.empty()) {
    PrintScheduleJson(lowered->lowered);
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
      .synopsis = "lower FILE|--schedule NAME --pp P --microbatches M [--stages-per-rank V] "
                  "[--recv jit|jit-rendezvous|early|offset [--memory-limit B] [--reserve R]] "
                  "[--backward keep|split|merge] "
                  "[--fsdp [--max-active-stages N] [--unshard-lookahead N|auto|full]] "
                  "[--reduce-grad [--defer-reduce-wait]] [--overlap [--model MODEL]] "
                  "[--wait-send] [--send-budget K] [--comms per-edge|per-group] "
                  "[--dump-after NAME] [-o FILE]",
      .summary = "Lower a compute-only schedule (FILE, or a built-in schedule generated in the "
                 "same process: --schedule, --pp, --microbatches and --stages-per-rank as "
                 "`generate` takes them): add every send and receive (and, on request, "
                 "FSDP unshard/reshard and gradient reduction). --recv jit (the default) posts "
                 "each receive right before its consumer: deadlock-free under relaxed semantics "
                 "(tag-matched sends that do not wait: jitpipe's transports, PyTorch's runtime), "
                 "with the jit memory plan's peak at the lower bound; --recv jit-rendezvous keeps "
                 "each pair of ranks' receives in send order and posts some early so that "
                 "ordered rendezvous transports (one NCCL stream, MPI_Ssend) cannot deadlock "
                 "either, at a memory cost `jitpipe plan` shows; --recv early reproduces "
                 "PyTorch's _add_send_recv exactly; --recv offset (needs --model) posts each "
                 "receive k compute actions ahead of its consumer, k per receive: the smallest "
                 "whose compute time (under the model) covers the transfer's latency + bytes / "
                 "bandwidth, as long as the rank's planned memory stays within the model's "
                 "device limit (or --memory-limit, less --reserve); k = 0 is jit, and no "
                 "receive goes earlier than early puts it. --overlap (with --reduce-grad) reorders Ws "
                 "so that gradient reductions hide under the compute that follows, never "
                 "raising a rank's "
                 "activation-unit peak (with --model: its jit-planned peak). PyTorch main's "
                 "options: --max-active-stages and --unshard-lookahead split FSDP residency "
                 "from how early parameters are gathered; --defer-reduce-wait waits for each "
                 "reduction just before the next one; --wait-send and --send-budget K add "
                 "WAIT_SEND actions so sent buffers are freed early (the budget walks the "
                 "program causally, so it stays deadlock-free). --comms per-edge or per-group "
                 "lowers for NCCL-like communicators whose operations complete in FIFO order: "
                 "--recv jit then places receives as jit-rendezvous does (a program safe under "
                 "strict semantics is safe there; --recv jit alone is not: validate --comms "
                 "shows the cycle), and the result is checked. Writes JSON to stdout, or -o "
                 "FILE (.json or .csv).",
      .flags = {"recv", "memory_limit", "reserve", "backward", "fsdp", "max_active_stages", "unshard_lookahead",
                "reduce_grad", "defer_reduce_wait", "overlap", "wait_send", "send_budget",
                "comms", "model", "dump_after", "output", "legacy_names", "schedule", "pp",
                "microbatches", "stages_per_rank"},
      .min_positional = 0,
      .max_positional = 1,
      .run = RunLower,
  };
}

}  // namespace jitpipe::cli
