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
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "scheduler/analysis/comm_matching.h"
#include "scheduler/analysis/grid_report.h"
#include "scheduler/execution/comm_fifo.h"
#include "scheduler/passes/lower.h"
#include "scheduler/analysis/validate.h"
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
ABSL_FLAG(std::string, comms, "",
          "also check the program over NCCL-like communicators whose operations complete in "
          "FIFO order: per-edge (one per directed pair of ranks, PyTorch's "
          "pipeline_per_edge_p2p) or per-group (one for the pipeline group); prints the order "
          "in which each rank would first use each communicator");
ABSL_FLAG(bool, lazy_comms, false,
          "with --comms: fail when creating the communicators lazily, at their first use, "
          "would hang (ranks that create a pair's communicators in different orders)");
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

// "rank 0: 0->1 at index 1 (0SEND_F0), 1->0 at index 3 (0RECV_B0)"
std::string FirstUseLine(const Schedule& s, int rank, const std::vector<FirstUse>& uses) {
  std::string line = absl::StrCat("rank ", rank, ":");
  for (size_t k = 0; k < uses.size(); ++k) {
    absl::StrAppend(&line, k == 0 ? " " : ", ", uses[k].communicator.ToString(), " at index ",
                    uses[k].index, " (", s.ranks[rank][uses[k].index].ToString(), ")");
  }
  if (uses.empty()) absl::StrAppend(&line, " none");
  return line;
}

// --comms: the FIFO check (an error when it fails), else the lines to print
// after the others: the layout's verdict, each rank's first uses, and
// whether lazy creation would hang (an error with --lazy-comms).
absl::StatusOr<std::string> CheckComms(const Schedule& lowered, CommLayout layout,
                                       int grid_rows) {
  RETURN_IF_ERROR(Validate(lowered, {.grid_rows = grid_rows, .comms = layout}));
  const absl::Status lazy =
      Validate(lowered, {.grid_rows = grid_rows, .comms = layout, .lazy_comms = true});
  if (!lazy.ok() && absl::GetFlag(FLAGS_lazy_comms)) return lazy;
  std::string out = absl::StrCat(
      "  communicators ", CommLayoutName(layout), ": deadlock-free when each communicator's "
      "operations complete in FIFO order (",
      layout == CommLayout::kPerGroup ? "one communicator for the pipeline group"
                                      : "one per directed pair of ranks",
      ")\n  first use of each communicator, if created lazily:");
  ASSIGN_OR_RETURN(const CommPositions positions, MatchSendRecv(lowered));
  const std::vector<std::vector<FirstUse>> uses = FirstUses(lowered, positions, layout);
  for (int r = 0; r < lowered.pp; ++r) {
    absl::StrAppend(&out, r == 0 ? " " : "; ", FirstUseLine(lowered, r, uses[r]));
  }
  absl::StrAppend(&out, "\n  lazy creation: ",
                  lazy.ok() ? "ok (no rank waits at a first use for a creation that cannot come)"
                            : absl::StrCat("would hang: ", lazy.message()),
                  "\n");
  return out;
}

int RunValidate(const Command& command, const Invocation& invocation) {
  const std::string& path = invocation.positional[0];
  absl::StatusOr<Schedule> input = LoadInputSchedule(path);
  if (!input.ok()) return Fail(command, input.status());
  const int grid_rows = absl::GetFlag(FLAGS_grid_rows);
  if (grid_rows < 0) return UsageError(command, "--grid-rows must be 0 or more");
  std::optional<CommLayout> layout;
  if (const std::string comms = absl::GetFlag(FLAGS_comms); !comms.empty()) {
    absl::StatusOr<CommLayout> parsed = ParseCommLayout(comms);
    if (!parsed.ok()) {
      return UsageError(command,
                        absl::StrCat("--comms must be per-edge or per-group, not \"", comms, "\""));
    }
    layout = *parsed;
  } else if (absl::GetFlag(FLAGS_lazy_comms)) {
    return UsageError(command, "--lazy-comms needs --comms per-edge or per-group");
  }
  const ValidateOptions relaxed{.semantics = CommSemantics::kRelaxed, .grid_rows = grid_rows};
  if (absl::Status valid = Validate(*input, relaxed); !valid.ok()) {
    return FailWithGrid(command, path, "", valid);
  }
  std::string line = absl::StrCat(path, ": ok: ", Summary(*input));
  // --comms: checked before anything is printed; its lines come last.
  auto with_comms = [&](const Schedule& lowered, absl::string_view context) -> int {
    std::string comms;
    if (layout.has_value()) {
      absl::StatusOr<std::string> checked = CheckComms(lowered, *layout, grid_rows);
      if (!checked.ok()) return FailWithGrid(command, path, context, checked.status());
      comms = *std::move(checked);
    }
    const int code = ReportStrict(command, path, lowered, line, context,
                                  /*lowered_here=*/!input->lowered, grid_rows);
    if (code == kExitOk) std::fputs(comms.c_str(), stdout);
    return code;
  };
  if (input->lowered) return with_comms(*input, "");
  // Strict semantics and FIFO communicators need the rendezvous placement.
  const RecvPlacement recv = absl::GetFlag(FLAGS_strict) || layout.has_value()
                                 ? RecvPlacement::kJitRendezvous
                                 : RecvPlacement::kJit;
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
  return with_comms(*lowered, context);
}

}  // namespace

Command ValidateCommand() {
  return Command{
      .name = "validate",
      .synopsis = "validate FILE [--strict] [--verbose] [--comms per-edge|per-group "
                  "[--lazy-comms]] [--grid-rows N]",
      .summary =
          "Check a schedule: structure (every stage on one rank, per stage and microbatch one "
          "forward then one backward), send/receive matching (every SEND one RECV on the "
          "peer, a RECV before each compute that needs one) and deadlock freedom. A "
          "compute-only FILE is lowered first with --recv jit (with --strict or --comms: --recv "
          "jit-rendezvous). Prints \"ok\" with a summary, then which transports the program is "
          "safe for: tag-matched ones (relaxed semantics: sends and receives matched by tag, "
          "sends that do not wait; jitpipe's transports, PyTorch's runtime) and, when it is "
          "deadlock-free under strict rendezvous semantics too, rendezvous ones (one NCCL "
          "stream, MPI_Ssend: per pair of ranks the receives in send order, every send "
          "waiting for its receive); otherwise what to use for those. --strict requires both "
          "and names the failure; --verbose prints it without failing. --comms per-edge or "
          "per-group also checks the program over NCCL-like communicators (one per directed "
          "pair of ranks, or one for the group), whose operations complete in FIFO order: a "
          "shared FIFO can deadlock where tag matching does not; it also prints the order in "
          "which each rank would first use each communicator, and whether creating them "
          "lazily at first use would hang (an error with --lazy-comms). On failure names the "
          "rank, index and action, or the wait cycle of a deadlock, "
          "and prints the step x rank grid with the failing step marked.",
      .flags = {"strict", "verbose", "comms", "lazy_comms", "grid_rows", "legacy_names"},
      .min_positional = 1,
      .max_positional = 1,
      .run = RunValidate,
  };
}

}  // namespace jitpipe::cli
