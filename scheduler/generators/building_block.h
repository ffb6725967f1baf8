// Slot arithmetic behind V-Half and V-Min (v_half_min.h), after the
// building-block method of "Pipeline Parallelism with Controllable Memory"
// (Qi et al., NeurIPS 2024) as sail-sg/zero-bubble-pipeline-parallelism
// implements it (scheduler/zbv_greedy.py). Internal to the generators.
//
// A schedule here is a table of integer time slots, one per operation,
// indexed [rank][type][microbatch], one operation per slot and rank. Each
// rank holds two chunks in a V: chunk 0 is stage r, chunk 1 stage 2p-1-r.
// Dependencies (free communication, unit costs):
//   F0(r) after F0(r-1)        F1(r) after F1(r+1); F1(p-1) after F0(p-1)
//   I1(r) after I1(r-1);       I1(0) after F1(0) (the loss)
//   I0(r) after I0(r+1);       I0(p-1) after I1(p-1)
//   W after the matching I; each type runs its microbatches in order.
//
// Memory is counted in chunk activations: an F holds one until its W. With
// explicit W lists the count follows them; without (kImplicit), each I's W
// is assumed to run in the rank's next free slot, as upstream's
// `mem_of_stage` does.
//
// All functions are pure and thread-safe.
#ifndef JITPIPE_SCHEDULER_GENERATORS_BUILDING_BLOCK_H_
#define JITPIPE_SCHEDULER_GENERATORS_BUILDING_BLOCK_H_

#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace jitpipe::building_block {

// Operation types, in upstream's order, which also breaks ties between
// operations in the same slot on different ranks.
enum Type : int {
  kF0 = 0,  // forward, chunk 0
  kF1 = 1,  // forward, chunk 1
  kI1 = 2,  // input gradient, chunk 1
  kI0 = 3,  // input gradient, chunk 0
  kW = 4,   // weight gradient: both chunks in one list, or chunk 1's (split)
  kW0 = 5,  // weight gradient of chunk 0 (split lists only)
};

using RankSlots = std::vector<std::vector<int>>;  // [type][microbatch] -> slot
using Slots = std::vector<RankSlots>;             // [rank]

enum class WeightLists { kOne, kPerChunk };

// Appends W lists to a rank holding the four F/I lists: after each I, its W
// takes the next free slot (chunk 1's first when both wait, under
// kPerChunk); W still pending after the last slot follow it back to back.
// Errors: Internal when two operations share a slot.
absl::Status PutWeights(RankSlots& rank, WeightLists lists);

enum class WeightModel {
  kExplicit,  // the slots include one W list (PutWeights kOne)
  kImplicit,  // only the four F/I lists; W run in free slots
};

// Upstream's "squeeze": walks all operations in slot order (ties: rank,
// type, microbatch) and moves each to the earliest free slot after its
// dependencies that keeps every rank's peak memory at or below the peak
// before squeezing. The steady phase (from chunk 0's first I on rank 0 to
// the last microbatch's F0 there) never moves; nor, under kImplicit, does
// the warmup before it. Errors: Internal when the input breaks a dependency.
absl::StatusOr<Slots> Squeeze(Slots slots, WeightModel model);

// Start slots of an eager execution of each rank's order (unit costs, free
// communication): every operation as early as its dependencies and its
// rank allow. Errors: Internal when the order breaks a dependency.
absl::StatusOr<Slots> EagerStartTimes(const Slots& slots);

// Each rank's (type, microbatch) pairs in slot order.
std::vector<std::vector<std::pair<Type, int>>> RankOrder(const Slots& slots);

}  // namespace jitpipe::building_block

#endif  // JITPIPE_SCHEDULER_GENERATORS_BUILDING_BLOCK_H_
