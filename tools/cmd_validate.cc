// jitpipe validate FILE [--strict]: structure, send/receive matching and
// deadlock freedom.
//
// A lowered FILE is checked as it is; a compute-only FILE is checked, then
// lowered with the default lowering (Lower(), receives just in time) and the
// result checked. Deadlock freedom is decided under relaxed semantics
// (PyTorch's runtime: the exit status) and under strict rendezvous semantics
// (reported; the exit status too with --strict), so the output says which
// programs need sends that do not wait for their receives.
//
// stdout on success, e.g.
//   s.csv: ok: pp 2, 4 stages (loop placement), 4 microbatches, lowered, 86 actions;
//   deadlock-free under relaxed semantics (PyTorch's runtime) and under strict
//   rendezvous semantics
// (one line), or, when only the relaxed model runs it, that line ending in
// "...(PyTorch's runtime) only" and a second line giving the strict deadlock.
// On failure: "jitpipe validate: FILE: <message>" on stderr, then the step x
// rank grid with "<-- ERROR HERE" when the check attached one.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "scheduler/passes/grid_report.h"
#include "scheduler/passes/lower.h"
#include "scheduler/passes/validate.h"
#include "tools/commands.h"
#include "tools/common_flags.h"

ABSL_FLAG(bool, strict, false,
          "fail unless the program is also deadlock-free under strict rendezvous semantics "
          "(every SEND and RECV waits for its partner, as MPI_Ssend or one NCCL stream)");
ABSL_FLAG(int, grid_rows, 40,
          "show at most this many steps of the grid printed with an error (0: no grid)");

namespace jitpipe::cli {
namespace {

// Prints "jitpipe validate: <path>: <context><message>" and the attached
// grid, if any, to stderr.
int FailWithGrid(const Command& command, const std::string& path, absl::string_view context,
                 const absl::Status& status) {
  const int code = Fail(command, absl::Status(status.code(), absl::StrCat(path, ": ", context,
                                                                          status.message())));
  if (std::optional<std::string> grid = GridOf(status)) std::fputs(grid->c_str(), stderr);
  return code;
}

std::string Summary(const Schedule& s) {
  return absl::StrCat("pp ", s.pp, ", ", s.num_stages(), " stages (", PlacementName(s.placement),
                      " placement), ", s.microbatches, " microbatches, ",
                      s.lowered ? "lowered" : "compute-only", ", ", s.TotalActions(), " actions");
}

int RunValidate(const Command& command, const Invocation& invocation) {
  const std::string& path = invocation.positional[0];
  absl::StatusOr<Schedule> input = LoadInputSchedule(path);
  if (!input.ok()) return Fail(command, input.status());
  const int grid_rows = absl::GetFlag(FLAGS_grid_rows);
  if (grid_rows < 0) return UsageError(command, "--grid-rows must be 0 or more");
  const ValidateOptions relaxed{.semantics = CommSemantics::kRelaxed, .grid_rows = grid_rows};
  const ValidateOptions strict{.semantics = CommSemantics::kStrict, .grid_rows = grid_rows};

  if (absl::Status valid = Validate(*input, relaxed); !valid.ok()) {
    return FailWithGrid(command, path, "", valid);
  }
  std::string line = absl::StrCat(path, ": ok: ", Summary(*input), "; ");
  Schedule lowered;
  absl::string_view context;  // prefix of messages about the lowered program
  if (input->lowered) {
    lowered = *std::move(input);
  } else {
    absl::StatusOr<Schedule> result = Lower(*input);
    if (!result.ok()) return FailWithGrid(command, path, "default lowering: ", result.status());
    lowered = *std::move(result);
    context = "after the default lowering: ";
    absl::StrAppend(&line, "lowered with the default lowering (receives just in time): ",
                    lowered.TotalActions(), " actions, ");
    if (absl::Status valid = Validate(lowered, relaxed); !valid.ok()) {
      return FailWithGrid(command, path, context, valid);
    }
  }
  absl::StrAppend(&line, "deadlock-free under relaxed semantics (PyTorch's runtime)");
  const absl::Status strict_status = Validate(lowered, strict);
  if (!strict_status.ok() && absl::GetFlag(FLAGS_strict)) {
    return FailWithGrid(command, path, context, strict_status);
  }
  if (strict_status.ok()) {
    std::printf("%s and under strict rendezvous semantics\n", line.c_str());
  } else {
    std::printf("%s only\n  it needs sends that do not wait for their receives: %s\n",
                line.c_str(), std::string(strict_status.message()).c_str());
  }
  return kExitOk;
}

}  // namespace

Command ValidateCommand() {
  return Command{
      .name = "validate",
      .synopsis = "validate FILE [--strict] [--grid-rows N]",
      .summary =
          "Check a schedule: structure (every stage on one rank, per stage and microbatch one "
          "forward then one backward), send/receive matching (every SEND one RECV on the "
          "peer, in the same order per pair of ranks, a RECV before each compute that needs "
          "one) and deadlock freedom. A compute-only FILE is lowered with the default lowering "
          "first. Prints a one-line summary saying whether the program is deadlock-free under "
          "relaxed semantics (PyTorch's runtime) and under strict rendezvous semantics; on "
          "failure names the rank, index and action, or the wait cycle of a deadlock, and "
          "prints the step x rank grid with the failing step marked.",
      .flags = {"strict", "grid_rows", "legacy_names"},
      .min_positional = 1,
      .max_positional = 1,
      .run = RunValidate,
  };
}

}  // namespace jitpipe::cli
