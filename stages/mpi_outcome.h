// What each process of an MPI replay (mpi_runtime.h) sends to world rank 0:
// its outcome after a run, or its failure. The encoding is JSON text, so it
// is exact (doubles round-trip), independent of the hosts' byte order and
// readable when debugging; it is an internal wire format, not a file format.
//
// Pure functions; thread-compatible.
#ifndef JITPIPE_STAGES_MPI_OUTCOME_H_
#define JITPIPE_STAGES_MPI_OUTCOME_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "stages/rank_executor.h"

namespace jitpipe {

struct MpiRankOutcome {
  std::vector<StepResult> steps;  // with their timelines, when recorded
  int64_t heap_allocations = 0;   // the buffer provider's, over all steps
};

struct MpiRankFailure {
  int world_rank = 0;
  absl::Status status;      // how the rank stopped (never OK)
  double failed_at_us = 0;  // since the run's time zero
  std::string record;       // its flight record (FlightRecorder::ToJson)
  std::string dump_error;   // why the record was not dumped; "" otherwise
};

std::string EncodeRankOutcome(const MpiRankOutcome& outcome);
// Errors: InvalidArgument when `text` is not an encoded outcome.
absl::StatusOr<MpiRankOutcome> DecodeRankOutcome(absl::string_view text);

std::string EncodeRankFailure(const MpiRankFailure& failure);
// Errors: InvalidArgument when `text` is not an encoded failure.
absl::StatusOr<MpiRankFailure> DecodeRankFailure(absl::string_view text);

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_MPI_OUTCOME_H_
