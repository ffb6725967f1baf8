// What each world rank of a replay (replay.h) hands to world rank 0 -- its
// outcome after a run, or its failure -- and what rank 0 makes of the
// failures: the same report for every backend. Across processes the
// encoding is JSON text, so it is exact (doubles round-trip), independent of
// the hosts' byte order and readable when debugging; it is an internal wire
// format, not a file format.
//
// Pure functions; thread-compatible.
#ifndef JITPIPE_RUNTIME_RANK_REPORT_H_
#define JITPIPE_RUNTIME_RANK_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "comm/flight_analysis.h"
#include "stages/exec/rank_executor.h"  // StepResult

namespace jitpipe {

struct RankOutcome {
  std::vector<StepResult> steps;  // with their timelines, when recorded
  int64_t peak_bytes = 0;         // the buffer provider's live-byte peak, all steps
  int64_t heap_allocations = 0;   // the buffer provider's, over all steps
  // The provider's allocator's own high-water mark in the last step (a
  // device memory pool's); -1 when it has none.
  int64_t allocator_peak_bytes = -1;
};

struct RankFailure {
  int world_rank = 0;
  absl::Status status;      // how the rank stopped (never OK)
  double failed_at_us = 0;  // since the run's time zero
  std::string record;       // its flight record (FlightRecorder::ToJson)
  std::string dump_error;   // why the record was not dumped; "" otherwise
  // The rank was still in a stage call stuck_grace after the job was
  // aborted (status says so). Never the root.
  bool stuck = false;
};

std::string EncodeRankOutcome(const RankOutcome& outcome);
// Errors: InvalidArgument when `text` is not an encoded outcome.
absl::StatusOr<RankOutcome> DecodeRankOutcome(absl::string_view text);

std::string EncodeRankFailure(const RankFailure& failure);
// Errors: InvalidArgument when `text` is not an encoded failure.
absl::StatusOr<RankFailure> DecodeRankFailure(absl::string_view text);

// What rank 0 knows after a failure, by world rank (nullopt: no report).
// REQUIRES for the functions below: failures[0] is set (rank 0's own).
using RankFailures = std::vector<std::optional<RankFailure>>;

// The root failure's world rank: the earliest failure that is not an
// abort (a consequence of another rank's failure), else the earliest.
int RootFailure(const RankFailures& failures);

// How the ranks other than `root` stopped: "aborted (0, 3), timed out (1),
// failed (4), no report, died or did not answer (2)"; "" for a world of one.
std::string HowOthersStopped(const RankFailures& failures, int root);

// Appends every reported flight record that parses to `records`, and when
// `dir` is set writes those of the ranks not in `dumped_here` (ascending:
// the ranks of this process, which dumped their own) into dir/rank_<w>.json,
// so that on many hosts rank 0's directory holds them all. Returns the
// ranks whose record is not in `dir` and why, as "3 (<error>), ..."; ""
// when all are, or when `dir` is not set.
std::string KeepRecords(const RankFailures& failures, const std::string& dir,
                        const std::vector<int>& dumped_here, std::vector<FlightRecord>& records);

}  // namespace jitpipe

#endif  // JITPIPE_RUNTIME_RANK_REPORT_H_
