// jitpipe show FILE: PyTorch's step x rank grid.
#include <cstdio>

#include "scheduler/ir/format_grid.h"
#include "tools/commands.h"
#include "tools/common_flags.h"

namespace jitpipe::cli {
namespace {

int RunShow(const Command& command, const Invocation& invocation) {
  auto schedule = LoadInputSchedule(invocation.positional[0]);
  if (!schedule.ok()) return Fail(command, schedule.status());
  std::fputs(FormatPipelineOrder(schedule->ranks).c_str(), stdout);
  return kExitOk;
}

}  // namespace

Command ShowCommand() {
  return Command{
      .name = "show",
      .synopsis = "show FILE",
      .summary = "Print a schedule as PyTorch's step x rank grid (_format_pipeline_order), "
                 "one row per step, one column per rank. FILE is jitpipe JSON or PyTorch CSV.",
      .flags = {"legacy_names"},
      .min_positional = 1,
      .max_positional = 1,
      .run = RunShow,
  };
}

}  // namespace jitpipe::cli
