// The simulator: a deterministic discrete-event run of an executable under
// the cost model: the ranks' cursors (scheduler/execution/rank_cursor.h)
// driven by RunRanks on a virtual clock, so the waits and memory events are
// exactly the validator's and the rank executor's (docs/design.md, "Execution
// semantics").
//
// Per rank:
//   - a compute stream runs F, I, W, B and OVERLAP_F_B in program order, each
//     starting once the previous one ended and the transfers it consumes
//     have completed (and, under FSDP, its stage's parameters are gathered);
//   - SEND and RECV are posted when the rank reaches them and never block;
//     a transfer starts once both are posted, as NCCL does, and takes
//     p2p.latency_us + bytes / p2p.gb_per_s;
//   - REDUCE_GRAD starts the stage's reduction on the rank's reduction stream
//     (serialised), costing dp.latency_us + Model::ReduceTrafficBytes / dp
//     bandwidth (nothing when dp.size is 1); the step waits for it at the end
//     and no compute waits for it, unless a WAIT_REDUCE_GRAD does; With dp.buckets = k > 1 the reduction is
//     k buckets of 1/k of the traffic, each paying the latency: bucket i < k-1
//     may start at (i + 1)/k of the stage's last compute action holding one
//     of its B or W parts, the last bucket when REDUCE_GRAD is reached
//     (model.h); each starts once the stream is free;
//   - UNSHARD gathers the stage's parameters on its own stream:
//     dp.latency_us + param_bytes (size-1)/size / bandwidth; RESHARD is free;
//   - a WAIT (WAIT_SEND_F/B, WAIT_REDUCE_GRAD) holds the rank until the
//     transfer of its SEND, or its stage's reduction, has ended; it takes no
//     time of its own. A buffer released after it is released then.
// Memory events happen at simulated times: an allocation when its step
// starts (a REDUCE_GRAD's step starts with its first bucket), a free when its
// step ends, a sent buffer's free when its transfer
// completes (not when the SEND is posted), step-start and step-end buffers at
// 0 and at the rank's end.
//
// Results: makespan (the last rank's end, reductions included); per rank the
// busy time (sum of compute), the span (first compute start to last compute
// end), the end and the peak live bytes at simulated time; the bubble
// fraction (1 - busy / makespan, worst rank) and the span bubble fraction
// (1 - busy / longest span, worst rank: the zero-bubble papers' measure);
// exposed reduction = makespan - the makespan of the same run with free
// reductions (when no compute waits for a reduction, that run's makespan is
// the latest compute end; with a WAIT_REDUCE_GRAD the run is simulated
// again with free reductions). Cost: one pass over the steps (two with a
// WAIT_REDUCE_GRAD), plus sorting each rank's memory events.
//
// Timeline (SimulationOptions::record_timeline): per rank, in program order,
// a span per compute step (kCompute), per SEND / RECV from its post to the
// transfer's completion (kSend / kRecv, with the transfer id), per reduction
// bucket (kReduce, with its bucket number) and per UNSHARD (kUnshard);
// memory samples per rank by category at every time a buffer is allocated or
// freed (the last event at that time); the transfer table (TimelineTransfersOf).
#ifndef JITPIPE_STAGES_PREDICT_SIMULATOR_H_
#define JITPIPE_STAGES_PREDICT_SIMULATOR_H_

#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/ir/model.h"
#include "scheduler/ir/schedule.h"
#include "stages/exec/rank_executable.h"
#include "traces/timeline.h"

namespace jitpipe {

struct SimulationOptions {
  bool record_timeline = false;  // fill SimulationResult::timeline (memory heavy at scale)
};

struct RankSimulation {
  int rank = 0;
  double busy_us = 0;
  double span_us = 0;
  double first_start_us = 0;
  double end_us = 0;       // compute and reductions done
  double reduce_us = 0;    // time its reductions occupied the reduction stream
  int64_t peak_bytes = 0;  // live bytes at simulated time
};

struct SimulationResult {
  double makespan_us = 0;
  double bubble_fraction = 0;
  double span_bubble_fraction = 0;
  double exposed_reduce_us = 0;
  double total_reduce_us = 0;     // sum over ranks of their reductions' durations
  double max_rank_reduce_us = 0;  // the most one rank's reductions take
  std::vector<RankSimulation> ranks;
  Timeline timeline;
};

// Simulates one step of `executable` (built from `schedule` and `model` by
// BuildExecutable). Errors: InvalidArgument when ranks block forever, with
// the deadlock report of every driver (DeadlockStatus, deadlock.h: the wait
// cycle, each stuck rank's index and action and what it waits for), or when
// the model overrides a stage the schedule lacks.
// Pure and thread-compatible.
absl::StatusOr<SimulationResult> Simulate(const Schedule& schedule, const Executable& executable,
                                          const Model& model,
                                          const SimulationOptions& options = {});

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_PREDICT_SIMULATOR_H_
