// How every backend names a transport operation in its errors, timeouts and
// watchdog reports: "send 1SEND_F3 to rank 1 (index 17)", "receive 2RECV_B3
// from rank 3 (index 4)", "all-reduce 0REDUCE_GRAD over 2 ranks (index 9)".
// An OpLabel keeps the fields and words them only when asked: the in-process
// fabric keeps one per request, and wording each one eagerly was 8% of the
// instructions of a step of empty stages. The MPI backend words the same
// shape itself (comm/mpi/mpi_transport.cc), from its own request record.
#ifndef JITPIPE_COMM_OP_LABEL_H_
#define JITPIPE_COMM_OP_LABEL_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "comm/transport.h"

namespace jitpipe {

struct OpLabel {
  absl::string_view verb;      // a literal: "send", "receive", "all-reduce", ...
  absl::string_view relation;  // a literal: "to rank", "from rank", "over"
  int number = 0;              // the peer, or the group's size
  std::string action;          // OpInfo::action (short: no allocation)
  int program_index = -1;

  static OpLabel Send(int peer, const OpInfo& info) {
    return {"send", "to rank", peer, info.action, info.program_index};
  }
  static OpLabel Receive(int peer, const OpInfo& info) {
    return {"receive", "from rank", peer, info.action, info.program_index};
  }
  static OpLabel Collective(bool reduce_scatter, size_t members, const OpInfo& info) {
    return {reduce_scatter ? "reduce-scatter" : "all-reduce", "over", static_cast<int>(members),
            info.action, info.program_index};
  }

  std::string ToString() const;
};

// The sizes a reduce-scatter over `members` ranks needs: an input of
// members x output elements. InvalidArgument otherwise, e.g.
//   rank 1: reduce-scatter 0REDUCE_GRAD over 2 ranks (index 9): the input
//   holds 5 elements; expected 4 (2 per member)
absl::Status CheckReduceScatterSizes(int rank, const OpLabel& what, size_t input_elements,
                                     size_t output_elements, size_t members);

}  // namespace jitpipe

#endif  // JITPIPE_COMM_OP_LABEL_H_
