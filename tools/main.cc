// jitpipe: generate, check, lower, plan, simulate and replay pipeline schedules.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/process_heap.h"
#include "base/temp_file_cleanup.h"
#include "tools/cli.h"

#ifndef JITPIPE_VERSION
#define JITPIPE_VERSION "unknown"
#endif

int main(int argc, char** argv) {
  using jitpipe::cli::AllCommands;
  // First, before anything is built: `jitpipe --version` is how scripts
  // probe for the tool, and it is the start-up floor (issue 19: <= 5 ms).
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    std::fputs("jitpipe " JITPIPE_VERSION "\n", stdout);
    return jitpipe::cli::kExitOk;
  }
  // Programs of megabytes are built, copied and freed: keep their pages
  // (base/process_heap.h). 1 GiB of address space, none of it touched.
  jitpipe::UseLargeProgramHeap(size_t{1} << 30);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(jitpipe::cli::ProgramHelp().c_str(), args.empty() ? stderr : stdout);
    return args.empty() ? jitpipe::cli::kExitUsage : jitpipe::cli::kExitOk;
  }
  for (const jitpipe::cli::Command& command : AllCommands()) {
    if (command.name != args[0]) continue;
    std::vector<std::string> rest(args.begin() + 1, args.end());
    for (const std::string& a : rest) {
      if (a == "--help" || a == "-h") {
        std::fputs(jitpipe::cli::CommandHelp(command).c_str(), stdout);
        return jitpipe::cli::kExitOk;
      }
      if (a == "--") break;
    }
    jitpipe::cli::Invocation invocation;
    absl::Status parsed = jitpipe::cli::ParseInvocation(command, rest, invocation);
    if (!parsed.ok()) return jitpipe::cli::UsageError(command, parsed.message());
    absl::Status distinct = jitpipe::cli::CheckOutputsAreDistinct(command, invocation);
    if (!distinct.ok()) return jitpipe::cli::UsageError(command, distinct.message());
    // A temporary output file is removed when the run is interrupted.
    jitpipe::InstallTempFileCleanupOnSignals();
    return command.run(command, invocation);
  }
  std::fprintf(stderr, "jitpipe: unknown command \"%s\"\n\n%s", args[0].c_str(),
               jitpipe::cli::ProgramHelp().c_str());
  return jitpipe::cli::kExitUsage;
}
