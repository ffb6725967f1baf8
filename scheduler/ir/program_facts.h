// What a schedule's programs say about its header: the inference shared by
// the readers of files that leave header fields out (a PyTorch CSV always, a
// hand-written jitpipe JSON schedule when it omits "lowered" or
// "stage_to_rank"), so both infer exactly alike.
//
//   ranks:  rank 0: 0F0 0SEND_F0 ...      first_comm     = rank 0, index 1
//           rank 1: 1RECV_F0 1F0 ...      stage_to_rank  = [0, 1]
#ifndef JITPIPE_SCHEDULER_IR_PROGRAM_FACTS_H_
#define JITPIPE_SCHEDULER_IR_PROGRAM_FACTS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// An action's place: program `rank`, position `index` in it.
struct ActionPosition {
  int rank = -1;
  size_t index = 0;
};

// stage_to_rank entry of a stage no action names (ProgramFacts).
inline constexpr int kNoRank = -1;

struct ProgramFacts {
  // The first action (rank by rank, in program order) that is neither
  // compute (IsCompute) nor a bubble: a SEND/RECV, UNSHARD, RESHARD,
  // REDUCE_GRAD or any communication kind the IR gains. The programs are
  // lowered exactly when there is one.
  std::optional<ActionPosition> first_comm;
  // The rank whose program names each stage (in any action, sub-actions of
  // an OVERLAP_F_B included). Size: see ScanOptions::num_stages.
  std::vector<int> stage_to_rank;
  // The largest microbatch any action names; -1 when none does.
  int max_microbatch = -1;
};

struct ScanOptions {
  // When known (>= 0, a JSON header's pp x stages_per_rank): stage_to_rank
  // has num_stages entries, kNoRank for a stage no action names, and actions
  // of stages >= num_stages are skipped (validation names them); 0 when only
  // first_comm and max_microbatch are wanted.
  // When unknown (-1, a CSV): stage_to_rank covers stages 0 .. the largest
  // named, and a stage no action names below it is an error (a gap).
  // REQUIRES: a known num_stages is small enough to allocate (the caller
  // bounds it by the programs' size).
  int64_t num_stages = -1;
};

// Names an action in an error message, e.g. `rank 1, index 3 ("0F1")` for
// JSON or `line 2, cell 4 (rank 1, index 3) "0F1"` for CSV.
using DescribeAction = absl::FunctionRef<std::string(ActionPosition)>;

// Scans the programs once. Errors: InvalidArgument when one stage's actions
// appear on two ranks,
//   <describe>: stage 0 is also on rank 0 (index 0); a stage lives on exactly one rank
// and, with num_stages unknown, for a gap:
//   stage 1 appears on no rank, but stage 7 does; stages must be numbered 0.. without gaps
// Memory: O(actions + num_stages), whatever the stage numbers in the text.
absl::StatusOr<ProgramFacts> ScanPrograms(const std::vector<RankProgram>& ranks,
                                          const ScanOptions& options, DescribeAction describe);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_IR_PROGRAM_FACTS_H_
