// jitpipe fr-analyze DIR: reads the flight records a failed run dumped
// (DIR/rank_<r>.json) and names the operation that never matched.
//
// stdout: AnalyzeFlightRecords(...).ToString(), e.g.
//   first unmatched: rank 2 waits at index 17 (5RECV_B3) for rank 3; rank 3's
//   last op was index 15 (6SEND_F4), and it is at index 16 (6F5)
// or "all operations matched". Exit 0 when everything matched, 1 when
// something never matched or the records are missing or unreadable.
#include <cstdio>
#include <string>

#include "comm/flight_analysis.h"
#include "tools/commands.h"

namespace jitpipe::cli {
namespace {

int RunFrAnalyze(const Command& command, const Invocation& invocation) {
  absl::StatusOr<std::vector<FlightRecord>> records = LoadFlightRecords(invocation.positional[0]);
  if (!records.ok()) return Fail(command, records.status());
  const FlightAnalysis analysis = AnalyzeFlightRecords(*records);
  std::fputs(analysis.ToString().c_str(), stdout);
  return analysis.ok() ? kExitOk : kExitFailure;
}

}  // namespace

Command FrAnalyzeCommand() {
  return Command{
      .name = "fr-analyze",
      .synopsis = "fr-analyze DIR",
      .summary = "Pair the sends and receives in the flight records a failed replay dumped "
                 "(DIR/rank_<r>.json) per pair of ranks and sequence, and name the first "
                 "operation that never matched, where its peer stood, and anything else "
                 "unmatched. Exit 0 when every operation matched, 1 otherwise.",
      .flags = {},
      .min_positional = 1,
      .max_positional = 1,
      .run = RunFrAnalyze,
  };
}

}  // namespace jitpipe::cli
