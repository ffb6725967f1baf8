// The least exposed gradient reduction any order of a schedule's W actions
// can reach under the simulator's bucket model (stages/simulator.h): the
// "theoretical minimum" `simulate --compare-overlap` prints beside what the
// overlap pass (scheduler/passes/overlap_reduce.h) reaches.
//
// A lower bound over the orders the overlap pass may choose (Ws moved, every
// other action in place). The rank that finishes its compute last (at T)
// keeps T whatever the order of its Ws when it never idles; its last compute
// action is then a W, or its last other compute action if that is a B, and
// completes some stage s's gradients. With k buckets of b_s = dp latency +
// (s's reduction traffic / k) / bandwidth, bucket i is ready at (i + 1)/k of
// that action (duration d), the last one at its end, and the reduction
// stream runs them one at a time, so at least
//   max(b_s, k b_s - d (k - 1) / k)
// of s's reduction runs after T. The bound is the smallest of these over
// the actions that can end that rank (for stages that reduce), the largest
// over the ranks that finish at T; 0 without data parallelism. It assumes
// the stream is free when those buckets come, so it may not be reachable.
// It bounds `lowered`'s own backward forms: where the overlap pass merged a
// rank's last I and W into a B (overlap_merge.h), that B is the rank's last
// other compute action and the floor drops with it; a program kept split is
// bounded as split.
//
// Pure; thread-compatible.
#ifndef JITPIPE_PLANNING_REDUCTION_FLOOR_H_
#define JITPIPE_PLANNING_REDUCTION_FLOOR_H_

#include "scheduler/ir/model.h"
#include "scheduler/ir/schedule.h"
#include "stages/predict/simulator.h"

namespace jitpipe {

// `lowered` is the program `sim` simulated under `model`.
double MinimumExposedReduceUs(const Schedule& lowered, const Model& model,
                              const SimulationResult& sim);

}  // namespace jitpipe

#endif  // JITPIPE_PLANNING_REDUCTION_FLOOR_H_
