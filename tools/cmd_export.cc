// jitpipe export FILE --to torchtitan|megatron [-o OUT]: what each framework
// takes from a schedule (planning/export_torchtitan.h, export_megatron.h),
// with the layer cut from the file, --layout or --model
// (tools/export_cut_input.h).
//
// torchtitan: -o OUT.csv writes OUT.csv (the compute-only program),
// OUT.toml (the [parallelism] settings) and OUT.py (a recipe function).
// megatron: -o OUT writes the arguments as a bash array; without -o they
// are printed. Both print a summary and what is not carried.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "planning/export_megatron.h"
#include "planning/export_torchtitan.h"
#include "scheduler/analysis/validate_structure.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/export_cut_input.h"
#include "tools/model_input.h"

ABSL_FLAG(std::string, to, "", "the framework to export for: torchtitan or megatron");
ABSL_FLAG(std::string, torchtitan_fields, "new",
          "the name the .toml gives the layer list: new (pipeline_parallel_module_fqns_per_model_"
          "part, torchtitan main 15e24313) or old (module_fqns_per_model_part, main b5bcd76 and "
          "before); the .py recipe sets whichever the installed torchtitan has");

namespace jitpipe::cli {
namespace {

void PrintNotes(const std::vector<std::string>& notes) {
  for (const std::string& note : notes) std::printf("note: %s\n", note.c_str());
}

// OUT.csv -> OUT.toml, OUT.py.
std::string Sibling(const std::string& csv_path, absl::string_view extension) {
  return absl::StrCat(csv_path.substr(0, csv_path.size() - 4), extension);
}

// A derived output must not be one of the inputs (-o itself is checked with
// every command's outputs, in main).
absl::Status CheckNotAnInput(const std::string& out, const std::vector<std::string>& inputs) {
  absl::StatusOr<FileIdentity> written = IdentifyFile(out);
  if (!written.ok() || !written->regular) return absl::OkStatus();
  for (const std::string& input : inputs) {
    absl::StatusOr<FileIdentity> read = IdentifyFile(input);
    if (read.ok() && *read == *written) {
      return absl::InvalidArgumentError(
          absl::StrCat(out, " (written beside -o) is the input ", input, "; write it elsewhere"));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteTorchtitan(const TorchtitanExport& e, const std::string& csv_path,
                             const std::vector<std::string>& inputs) {
  const std::string toml = Sibling(csv_path, ".toml");
  const std::string py = Sibling(csv_path, ".py");
  for (const std::string& out : {toml, py}) {
    absl::Status ok = CheckNotAnInput(out, inputs);
    if (!ok.ok()) return ok;
  }
  for (const auto& [path, text] : {std::pair{csv_path, &e.csv}, std::pair{toml, &e.toml},
                                   std::pair{py, &e.recipe}}) {
    absl::Status written = WriteFileAtomically(path, *text);
    if (!written.ok()) return written;
  }
  std::printf("wrote %s (compute-only CSV), %s ([parallelism] settings), %s (recipe)\n",
              csv_path.c_str(), toml.c_str(), py.c_str());
  return absl::OkStatus();
}

int RunTorchtitan(const Command& command, const Schedule& schedule, const CutInput& cut,
                  const std::vector<std::string>& inputs) {
  const std::string out = absl::GetFlag(FLAGS_output);
  if (out.size() <= 4 || !absl::EndsWithIgnoreCase(out, ".csv")) {
    return UsageError(command, "--to torchtitan needs -o OUT.csv (OUT.toml and OUT.py are "
                               "written beside it)");
  }
  absl::StatusOr<TorchtitanFields> fields =
      ParseTorchtitanFields(absl::GetFlag(FLAGS_torchtitan_fields));
  if (!fields.ok()) return UsageError(command, fields.status().message());
  absl::StatusOr<TorchtitanExport> e =
      ExportTorchtitan(schedule, cut.cut, {.fields = *fields, .csv_path = out,
                                           .source = inputs.front()});
  if (!e.ok()) return Fail(command, WithPath(inputs.front(), e.status()));
  if (absl::Status written = WriteTorchtitan(*e, out, inputs); !written.ok()) {
    return Fail(command, written);
  }
  std::printf("pipeline_parallel_schedule: %s\nnum_pp_microbatches: %d\nlayer cut: %s\n",
              e->schedule_name.c_str(), e->compute.microbatches, cut.how.c_str());
  if (cut.cut.has_value()) std::printf("%s\n", cut.cut->ToString().c_str());
  PrintNotes(e->notes);
  return kExitOk;
}

int RunMegatron(const Command& command, const Schedule& schedule, const CutInput& cut,
                const std::string& source) {
  absl::StatusOr<MegatronExport> e = ExportMegatron(schedule, cut.cut, source);
  if (!e.ok()) return Fail(command, WithPath(source, e.status()));
  const std::string out = absl::GetFlag(FLAGS_output);
  if (out.empty()) {
    std::fputs(e->text.c_str(), stdout);
    return kExitOk;
  }
  if (absl::Status written = WriteFileAtomically(out, e->text); !written.ok()) {
    return Fail(command, written);
  }
  std::printf("wrote %s (MEGATRON_PIPELINE_ARGS)\nclosest Megatron schedule: %s (%s)\n",
              out.c_str(), e->closest_schedule.c_str(), e->megatron_function.c_str());
  if (!e->layout.empty()) std::printf("layout: %s\n", e->layout.c_str());
  std::printf("layer cut: %s\n", cut.how.c_str());
  PrintNotes(e->notes);
  return kExitOk;
}

int RunExport(const Command& command, const Invocation& invocation) {
  const std::string to = absl::AsciiStrToLower(absl::GetFlag(FLAGS_to));
  if (to != "torchtitan" && to != "megatron") {
    return UsageError(command, to.empty() ? "missing --to torchtitan|megatron"
                                          : absl::StrCat("unknown --to \"", to,
                                                         "\"; expected torchtitan or megatron"));
  }
  absl::StatusOr<PartitionChoice> partition = PartitionFromFlags();
  if (!partition.ok()) return UsageError(command, partition.status().message());
  const std::string& path = invocation.positional[0];
  absl::StatusOr<Schedule> schedule = LoadInputSchedule(path);
  if (!schedule.ok()) return Fail(command, schedule.status());
  if (absl::Status valid = ValidateStructure(*schedule); !valid.ok()) {
    return Fail(command, absl::Status(valid.code(), absl::StrCat(path, ": ", valid.message())));
  }
  const CutRequest request{.schedule_path = path,
                           .layout = absl::GetFlag(FLAGS_layout),
                           .model_path = absl::GetFlag(FLAGS_model),
                           .partition = *partition};
  absl::StatusOr<CutInput> cut = ResolveCut(*schedule, request);
  if (!cut.ok()) return Fail(command, cut.status());
  std::vector<std::string> inputs = {path};
  if (!request.model_path.empty()) inputs.push_back(request.model_path);
  return to == "torchtitan" ? RunTorchtitan(command, *schedule, *cut, inputs)
                            : RunMegatron(command, *schedule, *cut, path);
}

}  // namespace

Command ExportCommand() {
  return Command{
      .name = "export",
      .synopsis = "export FILE --to torchtitan|megatron [-o OUT] [--layout L | --model MODEL "
                  "[--partition even|balanced]]",
      .summary =
          "Write what torchtitan or Megatron-LM takes from a schedule. torchtitan (main "
          "15e24313 and b5bcd76): -o OUT.csv writes the compute-only program (a lowered "
          "program's compute order: its sends, receives, reductions and waits are dropped, "
          "as torchtitan inserts its own), OUT.toml with the [parallelism] settings and OUT.py "
          "with a recipe function setting them: pipeline_parallel_schedule (which alone sets "
          "the placement: PipelineScheduleSingle or PipelineScheduleMulti for loop, "
          "ZBVZeroBubble or DualPipeV for V with 2 stages per rank), the CSV, "
          "num_pp_microbatches and the layer cut as the FQN list (tok_embeddings, layers.N, "
          "norm, lm_head). Megatron-LM (main d98e8a64): the arguments "
          "--pipeline-model-parallel-size, --num-layers and --pipeline-model-parallel-layout "
          "(or --num-virtual-stages-per-pipeline-rank without a cut), as a bash array to -o "
          "or printed, and the closest built-in schedule (1F1B or interleaved 1F1B); "
          "Megatron takes no custom order, so the order is not carried. The cut comes from "
          "the file's \"layout\", else --layout, else --model (a version 2 model, cut even or "
          "balanced), else the framework's even split. Refused, with the reason: DualPipe's "
          "two chains, placements the framework cannot express (torchtitan: neither loop nor "
          "V, or V without 2 stages per rank; Megatron: anything but loop), pp 1 for "
          "torchtitan, and microbatches Megatron's interleaved schedule refuses.",
      .flags = {"to", "output", "layout", "model", "partition", "time_budget",
                "torchtitan_fields", "legacy_names"},
      .min_positional = 1,
      .max_positional = 1,
      .run = RunExport,
  };
}

}  // namespace jitpipe::cli
