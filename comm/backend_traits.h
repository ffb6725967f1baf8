// What a replay must know of a backend before its world exists, as data:
// one row per backend the CLI names. The worlds report the same traits
// (World::send_completion(), World::p2p_ordering()); a test holds the two to
// each other where a world can be made.
//
//   name        device  processes   ordering       send completion
//   inproc      no      one         by tag         eager
//   mpi         no      one a rank  by tag         rendezvous (large sends)
//   cuda        yes     one         by tag         eager
//   nccl        yes     one a rank  FIFO per rank  rendezvous
//   nccl-lazy   yes     one a rank  FIFO per edge  rendezvous
//
// Lowering for a backend follows from these (runtime/replay_plan.h,
// LowerForBackend): the ordering decides the receive placement, and a
// rendezvous backend with buffers reused mid-step (an arena) needs a program
// safe under strict semantics.
#ifndef JITPIPE_COMM_BACKEND_TRAITS_H_
#define JITPIPE_COMM_BACKEND_TRAITS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "comm/world.h"

namespace jitpipe {

struct BackendTraits {
  std::string name;  // as the CLI spells it: "inproc", "nccl-lazy"
  bool device = false;         // buffers in device memory, work ordered on streams
  bool one_process_per_rank = false;  // launched by mpirun, one world rank each
  P2pOrdering ordering = P2pOrdering::kByTag;
  SendCompletion send_completion = SendCompletion::kEager;
};

// Every backend, in the order messages list them.
const std::vector<BackendTraits>& AllBackendTraits();

// The backend named `name`. Errors: InvalidArgument listing the names:
//   --backend must be inproc, mpi, cuda, nccl or nccl-lazy, not "tcp"
absl::StatusOr<BackendTraits> BackendTraitsOf(absl::string_view name);

}  // namespace jitpipe

#endif  // JITPIPE_COMM_BACKEND_TRAITS_H_
