// jitpipe validate FILE [--strict] [--verbose]: structure, send/receive matching and
// deadlock freedom.
//
// A lowered FILE is checked as it is. A compute-only FILE is checked, then
// lowered and the result checked: with --recv jit (the default lowering), or
// with --strict with --recv jit-rendezvous. Deadlock freedom is decided under
// relaxed semantics (tag-matched sends that do not wait: jitpipe's
// transports, PyTorch's runtime; the exit status) and under strict
// rendezvous semantics (ordered transports such as one NCCL stream: reported,
// and the exit status too with --strict); validate.h defines both.
//
// stdout on success: a first line saying ok, with the summary, e.g.
//   s.csv: ok: pp 2, 2 stages (loop placement), 2 microbatches, compute-only,
//   8 actions; lowered with --recv jit: 16 actions
// then one line on the transports the program is safe for: every one when it
// is deadlock-free under strict rendezvous semantics too; otherwise
// tag-matched ones, with what to use for rendezvous transports (lower with
// --recv jit-rendezvous). Why strict semantics fail (the wait cycle, or the
// receive out of order) is a third line with --verbose, an error with
// --strict.
// On failure: "jitpipe validate: FILE: <message>" on stderr, then the step x
// rank grid with "<-- ERROR HERE" when the check attached one.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "scheduler/analysis/grid_report.h"
#include "scheduler/passes/lower.h"
#include "scheduler/passes/validate.h"
#include "tools/commands.h"
#include "tools/common_flags.h"

ABSL_FLAG(bool, strict, false,
          "fail unless the program is also valid under strict rendezvous semantics (per pair of "
          "ranks the receives in send order, every SEND and RECV waiting for its partner, as "
          "MPI_Ssend or one NCCL stream); a compute-only FILE is lowered with --recv "
          "jit-rendezvous");
ABSL_FLAG(bool, verbose, false,
          "when the program is valid under relaxed semantics only, also print why strict "
          "rendezvous semantics fail (the wait cycle, or the receive out of order)");
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

constexpr absl::string_view kTagMatched =
    "tag-matched transports (relaxed semantics: jitpipe's in-process and MPI replay, PyTorch's "
    "runtime)";
constexpr absl::string_view kRendezvous =
    "rendezvous transports (one NCCL stream, MPI_Ssend, large MPI sends that complete only "
    "once received)";

// The second line: which transports the program is safe for and, when it
// is not safe for all, what to use for the others. lowered_here says whether
// the program is this command's --recv jit lowering of the input.
std::string SafetyLine(bool strict_ok, bool lowered_here) {
  if (strict_ok) {
    return "  safe for every transport: deadlock-free under relaxed semantics (tag-matched "
           "transports) and under strict rendezvous semantics (one NCCL stream, MPI_Ssend)";
  }
  if (lowered_here) {
    return absl::StrCat("  safe for ", kTagMatched, "; for ", kRendezvous,
                        " lower with --recv jit-rendezvous (validate --strict checks that "
                        "lowering; --verbose says why --recv jit is not enough)");
  }
  return absl::StrCat("  safe for ", kTagMatched, " only, not for ", kRendezvous,
                      ": --verbose says why; the compute-only schedule lowered with --recv "
                      "jit-rendezvous is safe for those");
}

// The checks of a lowered program after its relaxed validity: strict
// semantics (required with --strict), then the first line, `ok_line`, and
// the safety line, and with --verbose why strict semantics fail. `context`
// prefixes error messages; lowered_here as for SafetyLine.
int ReportStrict(const Command& command, const std::string& path, const Schedule& lowered,
                 const std::string& ok_line, absl::string_view context, bool lowered_here,
                 int grid_rows) {
  const absl::Status strict =
      Validate(lowered, {.semantics = CommSemantics::kStrict, .grid_rows = grid_rows});
  if (!strict.ok() && absl::GetFlag(FLAGS_strict)) {
    return FailWithGrid(command, path, context, strict);
  }
  std::printf("%s\n%s\n", ok_line.c_str(), SafetyLine(strict.ok(), lowered_here).c_str());
  if (!strict.ok() && absl::GetFlag(FLAGS_verbose)) {
    std::printf("  %sunder strict semantics: %s\n", lowered_here ? "--recv jit " : "",
                std::string(strict.message()).c_str());
  }
  return kExitOk;
}

int RunValidate(const Command& command, const Invocation& invocation) {
  const std::string& path = invocation.positional[0];
  absl::StatusOr<Schedule> input = LoadInputSchedule(path);
  if (!input.ok()) return Fail(command, input.status());
  const int grid_rows = absl::GetFlag(FLAGS_grid_rows);
  if (grid_rows < 0) return UsageError(command, "--grid-rows must be 0 or more");
  const ValidateOptions relaxed{.semantics = CommSemantics::kRelaxed, .grid_rows = grid_rows};
  if (absl::Status valid = Validate(*input, relaxed); !valid.ok()) {
    return FailWithGrid(command, path, "", valid);
  }
  std::string line = absl::StrCat(path, ": ok: ", Summary(*input));
  if (input->lowered) {
    return ReportStrict(command, path, *input, line, "", /*lowered_here=*/false, grid_rows);
  }
  const RecvPlacement recv =
      absl::GetFlag(FLAGS_strict) ? RecvPlacement::kJitRendezvous : RecvPlacement::kJit;
  const std::string how = absl::StrCat("--recv ", RecvPlacementName(recv));
  absl::StatusOr<Schedule> lowered = Lower(*input, {.recv = recv});
  if (!lowered.ok()) {
    return FailWithGrid(command, path, absl::StrCat("lowering with ", how, ": "),
                        lowered.status());
  }
  const std::string context = absl::StrCat("after lowering with ", how, ": ");
  if (absl::Status valid = Validate(*lowered, relaxed); !valid.ok()) {
    return FailWithGrid(command, path, context, valid);
  }
  absl::StrAppend(&line, "; lowered with ", how, ": ", lowered->TotalActions(), " actions");
  return ReportStrict(command, path, *lowered, line, context, /*lowered_here=*/true, grid_rows);
}

}  // namespace

Command ValidateCommand() {
  return Command{
      .name = "validate",
      .synopsis = "validate FILE [--strict] [--verbose] [--grid-rows N]",
      .summary =
          "Check a schedule: structure (every stage on one rank, per stage and microbatch one "
          "forward then one backward), send/receive matching (every SEND one RECV on the "
          "peer, a RECV before each compute that needs one) and deadlock freedom. A "
          "compute-only FILE is lowered first with --recv jit (with --strict: --recv "
          "jit-rendezvous). Prints \"ok\" with a summary, then which transports the program is "
          "safe for: tag-matched ones (relaxed semantics: sends and receives matched by tag, "
          "sends that do not wait; jitpipe's transports, PyTorch's runtime) and, when it is "
          "deadlock-free under strict rendezvous semantics too, rendezvous ones (one NCCL "
          "stream, MPI_Ssend: per pair of ranks the receives in send order, every send "
          "waiting for its receive); otherwise what to use for those. --strict requires both "
          "and names the failure; --verbose prints it without failing. On failure names the rank, index and action, or the wait cycle of a deadlock, "
          "and prints the step x rank grid with the failing step marked.",
      .flags = {"strict", "verbose", "grid_rows", "legacy_names"},
      .min_positional = 1,
      .max_positional = 1,
      .run = RunValidate,
  };
}

}  // namespace jitpipe::cli
