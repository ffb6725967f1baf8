// jitpipe convert FILE -o OUT: jitpipe JSON <-> PyTorch CSV.
//
// The input must be a well-formed program (ValidateStructure: every action
// in range, each once, counts complete), so that a file never comes out
// valid that went in broken (a JSON whose "microbatches" its actions
// contradict would otherwise be re-inferred from them as CSV). A CSV holds
// one pipeline: a program of several chains (DualPipe's two directions) is
// refused for it.
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "scheduler/ir/schedule_io.h"
#include "scheduler/analysis/validate_structure.h"
#include "tools/commands.h"
#include "tools/common_flags.h"

namespace jitpipe::cli {
namespace {

int RunConvert(const Command& command, const Invocation& invocation) {
  const std::string out = absl::GetFlag(FLAGS_output);
  if (out.empty()) return UsageError(command, "missing -o OUT (.json or .csv)");
  if (auto format = FormatForOutput(out); !format.ok()) {
    return UsageError(command, format.status().message());
  }
  const std::string& path = invocation.positional[0];
  auto schedule = LoadInputSchedule(path);
  if (!schedule.ok()) return Fail(command, schedule.status());
  if (absl::Status valid = ValidateStructure(*schedule); !valid.ok()) {
    return Fail(command, absl::Status(valid.code(), absl::StrCat(path, ": ", valid.message())));
  }
  if (*FormatForOutput(out) == ScheduleFileFormat::kCsv && schedule->chains != 1) {
    return Fail(command, absl::InvalidArgumentError(absl::StrCat(
                             path, ": ", schedule->chains, " chains (", schedule->name,
                             "'s directions) cannot be written as CSV, which holds one "
                             "pipeline and no chain count; keep it as JSON")));
  }
  if (absl::Status saved = SaveSchedule(out, *schedule); !saved.ok()) {
    return Fail(command, saved);
  }
  return kExitOk;
}

}  // namespace

Command ConvertCommand() {
  return Command{
      .name = "convert",
      .synopsis = "convert FILE -o OUT",
      .summary = "Convert between jitpipe JSON and PyTorch CSV; the output format follows "
                 "OUT's extension. CSV keeps the programs exactly; JSON adds the schedule's "
                 "parameters, inferred from the CSV as PyTorch does.",
      .flags = {"output", "legacy_names"},
      .min_positional = 1,
      .max_positional = 1,
      .run = RunConvert,
  };
}

}  // namespace jitpipe::cli
