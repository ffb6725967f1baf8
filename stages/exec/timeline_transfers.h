// The transfer table of a Timeline (traces/timeline.h) recorded over an
// Executable: what the trace writer needs of each transfer -- its ends'
// ranks, its bytes, and the compute that produces and consumes its data --
// so that traces/ never needs the Executable. The simulator and the replay
// driver fill Timeline::transfers with it once per timeline.
#ifndef JITPIPE_STAGES_EXEC_TIMELINE_TRANSFERS_H_
#define JITPIPE_STAGES_EXEC_TIMELINE_TRANSFERS_H_

#include <vector>

#include "stages/exec/rank_executable.h"
#include "traces/timeline.h"

namespace jitpipe {

// One entry per executable.transfers[t], same ids: kind, stage, microbatch,
// src_rank, dst_rank and bytes copied; producer_index the program index of
// the step on src_rank holding the part that produces the data (F for
// SEND_F, I or B for SEND_B); consumer_index that of the step on dst_rank
// whose part waits for the transfer (-1 where none does). Pure.
std::vector<TimelineTransfer> TimelineTransfersOf(const Executable& executable);

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_EXEC_TIMELINE_TRANSFERS_H_
