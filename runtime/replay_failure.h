// The failure half of the replay driver (replay.h, "Failure"), once this
// process's ranks have ended or are stuck: how each local rank stopped, as
// a RankFailure; every process's failures handed to world rank 0 (World::
// CollectAfterFailure), which reports the root failure, how the others
// stopped, where the flight records are and, for a timeout, the flight
// analysis. Taking the records at the first failure and aborting the world
// stay with the run (replay.cc), which holds the ranks' threads.
//
// Thread-compatible: called from the process's main thread only.
#ifndef JITPIPE_RUNTIME_REPLAY_FAILURE_H_
#define JITPIPE_RUNTIME_REPLAY_FAILURE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/world.h"
#include "runtime/rank_report.h"
#include "runtime/replay_options.h"

namespace jitpipe {

// How a local rank ended, with the status it ended with (OK when it ran
// all its steps) and whether it is still in a stage call.
struct LocalEnding {
  int world_rank = 0;
  absl::Status status;
  bool stuck = false;
  double failed_at_us = 0;
  std::string record;      // its flight record, "" when none was taken
  std::string dump_error;  // why the record was not dumped; "" otherwise
};

// The RankFailure of `ending`: its own status; for a rank that ended its
// steps, Aborted ("rank 2 ended its steps but the job failed"); for a
// stuck one, DeadlineExceeded ("rank 1: still in a stage call 5s after the
// job was aborted").
RankFailure FailureOf(const LocalEnding& ending, absl::Duration stuck_grace);

// Hands `mine` (this process's ranks' failures, none OK) to world rank 0
// and returns, there, the report (the root failure's code; flight records
// kept in options.flight_dir), elsewhere this process's own root failure.
// Waits at most options.timeout + options.stuck_grace for the others.
// REQUIRES: mine is not empty.
absl::Status ExchangeFailures(World& world, const std::vector<RankFailure>& mine,
                              const ReplayOptions& options);

// At rank 0: the root failure, how the others stopped, where the records
// are and, for a timeout, the flight analysis. REQUIRES: failures[0] set.
absl::Status FailureReport(const RankFailures& failures, const std::string& flight_dir,
                           const std::vector<int>& dumped_here);

}  // namespace jitpipe

#endif  // JITPIPE_RUNTIME_REPLAY_FAILURE_H_
