// Validation of a schedule: structure, send/receive matching, deadlock.
//
// Execution semantics (DESIGN.md, as PyTorch's runtime): a SEND is posted and
// the rank moves on; a RECV is posted and the rank moves on; the compute that
// consumes a RECV waits until the peer has posted the matching SEND. A
// deadlock is a set of ranks each waiting for a SEND its peer has not
// reached. Strict (rendezvous) semantics additionally make every SEND and
// RECV wait until its partner is posted, as one NCCL stream or MPI_Ssend does.
#ifndef JITPIPE_SCHEDULER_PASSES_VALIDATE_H_
#define JITPIPE_SCHEDULER_PASSES_VALIDATE_H_

#include "absl/status/status.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

enum class CommSemantics { kRelaxed, kStrict };

struct ValidateOptions {
  CommSemantics semantics = CommSemantics::kRelaxed;
};

// A compute-only schedule gets ValidateStructure(); a lowered one also gets
// send/receive matching (every SEND one RECV on the peer, in the same order
// per peer pair, none between stages on one rank, a RECV before each consumer
// that needs one) and deadlock detection. Errors: InvalidArgument naming the
// rank, index and action; a deadlock lists the wait cycle, for each rank the
// index and action it is stuck at and what it waits for.
absl::Status Validate(const Schedule& schedule, const ValidateOptions& options = {});

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_VALIDATE_H_
