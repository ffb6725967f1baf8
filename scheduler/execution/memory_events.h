// The memory events of one rank's program, as a rank cursor hands them to
// its driver (rank_cursor.h): which buffers come alive before each action,
// which die after it, which die once the transfer of its SEND has completed
// (never when the SEND is merely posted), and which live from the step's
// start or until its end. A sent buffer whose SEND has a WAIT_SEND dies
// after that WAIT (a "release after" of the WAIT's index): the wait is over
// only once the transfer completed (wait_rules.h), so the buffer is never
// freed under a transfer in flight, and it lives exactly as long as the
// program says. Buffer ids are the rank's (a memory plan's buffer
// ids, memory/buffer_lifetimes.h); what a buffer is, how big and where it
// lives is the driver's business.
//
// A plain value, filled by whoever planned the buffers (BuildExecutable);
// a program without a plan has no events (Empty()).
#ifndef JITPIPE_SCHEDULER_EXECUTION_MEMORY_EVENTS_H_
#define JITPIPE_SCHEDULER_EXECUTION_MEMORY_EVENTS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace jitpipe {

struct RankMemoryEvents {
  // The three lists of each action, back to back in `ids`: for action i,
  // list k (0 allocate before, 1 release after, 2 release once its transfer
  // completed) is ids[offsets[3 i + k], offsets[3 i + k + 1]).
  // offsets.size() == 3 * actions + 1 (or 0: no events).
  std::vector<int32_t> ids;
  std::vector<int32_t> offsets;
  std::vector<int32_t> at_start;  // allocated when the step begins (eager receive buffers)
  std::vector<int32_t> at_end;    // released when the step ends (held to the end)

  bool Empty() const { return offsets.empty() && at_start.empty() && at_end.empty(); }
  absl::Span<const int32_t> AllocatedBefore(int32_t index) const { return List(3 * index); }
  absl::Span<const int32_t> ReleasedAfter(int32_t index) const { return List(3 * index + 1); }
  absl::Span<const int32_t> ReleasedOnCompletion(int32_t index) const {
    return List(3 * index + 2);
  }

 private:
  absl::Span<const int32_t> List(int32_t k) const {
    if (offsets.empty()) return {};
    return absl::Span<const int32_t>(ids.data() + offsets[k],
                                     static_cast<size_t>(offsets[k + 1] - offsets[k]));
  }
};

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_EXECUTION_MEMORY_EVENTS_H_
