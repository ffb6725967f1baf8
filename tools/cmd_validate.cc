// jitpipe validate FILE: structure, counts and ordering.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "scheduler/passes/validate_structure.h"
#include "tools/commands.h"
#include "tools/common_flags.h"

namespace jitpipe::cli {
namespace {

int RunValidate(const Command& command, const Invocation& invocation) {
  const std::string& path = invocation.positional[0];
  auto schedule = LoadInputSchedule(path);
  if (!schedule.ok()) return Fail(command, schedule.status());
  if (absl::Status valid = ValidateStructure(*schedule); !valid.ok()) {
    return Fail(command, absl::Status(valid.code(), absl::StrCat(path, ": ", valid.message())));
  }
  const Schedule& s = *schedule;
  std::printf("%s: ok: pp %d, %d stages (%s placement), %d microbatches, %s, %zu actions\n",
              path.c_str(), s.pp, s.num_stages(), std::string(PlacementName(s.placement)).c_str(),
              s.microbatches, s.lowered ? "lowered" : "compute-only", s.TotalActions());
  return kExitOk;
}

}  // namespace

Command ValidateCommand() {
  return Command{
      .name = "validate",
      .synopsis = "validate FILE",
      .summary = "Check a schedule: every stage on one rank, per stage and microbatch one "
                 "forward then one backward (B, or I then W), nothing out of range. Prints a "
                 "one-line summary; on failure names the rank, index and action.",
      .flags = {"legacy_names"},
      .min_positional = 1,
      .max_positional = 1,
      .run = RunValidate,
  };
}

}  // namespace jitpipe::cli
