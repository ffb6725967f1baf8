// jitpipe convert FILE -o OUT: jitpipe JSON <-> PyTorch CSV.
#include "absl/flags/flag.h"
#include "scheduler/ir/schedule_io.h"
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
  auto schedule = LoadInputSchedule(invocation.positional[0]);
  if (!schedule.ok()) return Fail(command, schedule.status());
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
