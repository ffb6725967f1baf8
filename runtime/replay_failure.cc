#include "runtime/replay_failure.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/flight_analysis.h"

namespace jitpipe {

RankFailure FailureOf(const LocalEnding& ending, absl::Duration stuck_grace) {
  RankFailure f;
  f.world_rank = ending.world_rank;
  f.failed_at_us = ending.failed_at_us;
  f.record = ending.record;
  f.dump_error = ending.dump_error;
  if (ending.stuck) {
    f.stuck = true;
    f.status = absl::DeadlineExceededError(
        absl::StrCat("rank ", ending.world_rank, ": still in a stage call ",
                     absl::FormatDuration(stuck_grace), " after the job was aborted"));
  } else if (ending.status.ok()) {  // it ended its steps; another rank failed
    f.status = absl::AbortedError(
        absl::StrCat("rank ", ending.world_rank, " ended its steps but the job failed"));
  } else {
    f.status = ending.status;
  }
  return f;
}

absl::Status ExchangeFailures(World& world, const std::vector<RankFailure>& mine,
                              const ReplayOptions& options) {
  std::vector<std::string> payloads;
  for (const RankFailure& f : mine) payloads.push_back(EncodeRankFailure(f));
  std::vector<std::optional<std::string>> collected =
      world.CollectAfterFailure(payloads, options.timeout + options.stuck_grace);
  RankFailures failures(world.size());
  for (size_t w = 0; w < collected.size() && w < failures.size(); ++w) {
    if (!collected[w].has_value()) continue;
    absl::StatusOr<RankFailure> decoded = DecodeRankFailure(*collected[w]);
    if (decoded.ok()) failures[w] = *std::move(decoded);
  }
  for (const RankFailure& f : mine) failures[f.world_rank] = f;  // exact, not re-read
  if (!world.is_root()) {  // this process's own root failure
    const RankFailures local(mine.begin(), mine.end());
    return mine[RootFailure(local)].status;
  }
  return FailureReport(failures, options.flight_dir, world.local_ranks());
}

absl::Status FailureReport(const RankFailures& failures, const std::string& flight_dir,
                           const std::vector<int>& dumped_here) {
  const int root = RootFailure(failures);
  const absl::Status& cause = failures[root]->status;
  std::string message(cause.message());
  if (std::string others = HowOthersStopped(failures, root); !others.empty()) {
    absl::StrAppend(&message, "; other ranks: ", others);
  }
  std::vector<FlightRecord> records;
  if (std::string unwritten = KeepRecords(failures, flight_dir, dumped_here, records);
      !unwritten.empty()) {
    absl::StrAppend(&message, "; flight records not written: ", unwritten);
  }
  if (cause.code() == absl::StatusCode::kDeadlineExceeded) {
    const FlightAnalysis analysis = AnalyzeFlightRecords(records);
    absl::StrAppend(&message, "; flight analysis",
                    flight_dir.empty() ? "" : absl::StrCat(" (records in ", flight_dir, ")"),
                    ": ", analysis.ok() ? "all operations matched" : analysis.first);
  }
  return absl::Status(cause.code(), message);
}

}  // namespace jitpipe
