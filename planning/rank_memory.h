// Memory per pipeline rank, all of it: what a training step holds on each
// rank's device, against its limit.
//
//   parameters   its stages' param_bytes (dp.param_dtype); under ZeRO-3 /
//                FSDP (optimizer.zero 3, or a program lowered with --fsdp,
//                whose UNSHARD/RESHARD say when each stage is unsharded)
//                the resident shard, 1/dp of them, plus a whole working copy
//                for a stage the program never unshards
//   unsharded    the FSDP working copies live at the activations' peak: the
//                planner's buffers from each UNSHARD to its RESHARD, counted
//                here once (not as activations, not as parameters)
//   gradients    the planner's parameter-gradient buffers live at the peak:
//                as many elements as the parameters, in dp.grad_dtype, from
//                the stage's first backward to the step's end (PyTorch
//                allocates .grad there; Megatron's buffer exists from the
//                start, which differs only on a rank whose peak precedes its
//                first backward). Whole under every ZeRO stage: the
//                microbatches accumulate into the unsharded gradient until
//                the step's reduction (Megatron; PyTorch's pipelining syncs an
//                FSDP module on its last microbatch only), so ZeRO-2's shard
//                saves memory between steps, not at the peak
//   optimizer    OptimizerSpec::StateBytes of its parameters: states in
//                their dtype, fp32 master weights, split over dp from ZeRO-1
//                (the distributed optimizer) on
//   activations  every other planned buffer (memory/memory_plan.h):
//                received inputs, stashes, outputs until sent, output and
//                input gradients, reduction buffers. Gradients, unsharded
//                and activations are split at one index, where everything
//                the planner plans peaks together: the jit peak of `plan`'s
//                first table, and of the trace's mem.live less the resident
//                parameters and optimizer state
//   total        the sum; it fits when within the device's limit for that
//                rank less the reserve (layered_model.h, MemoryReserve: the
//                CUDA context, NCCL, fragmentation)
//
// The heaviest rank is reported, never an average: with uneven stages
// (embedding and loss heads, V placements, DualPipe's two copies) averaging
// misses the rank that runs out of memory (Megatron-Bridge #5077: -31.8%).
//
// Pure functions; thread-compatible.
#ifndef JITPIPE_PLANNING_RANK_MEMORY_H_
#define JITPIPE_PLANNING_RANK_MEMORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "memory/buffer_lifetimes.h"
#include "scheduler/ir/layered_model.h"
#include "scheduler/ir/model.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// What the per-stage cost model does not carry.
struct TrainingMemory {
  OptimizerSpec optimizer = {.kind = OptimizerKind::kNone};
  DeviceSpec device = {};
};

// The optimizer and device of a layered model.
TrainingMemory TrainingMemoryOf(const LayeredModel& model);

struct RankMemory {
  int rank = 0;
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t optimizer = 0;
  int64_t activations = 0;
  int64_t unsharded = 0;            // FSDP working copies at the activations' peak
  int activations_peak_index = -1;  // -1 when no activation buffer holds bytes
  int64_t limit = 0;                // 0: none
  int64_t reserve = 0;              // of the limit, for what the step does not plan

  int64_t total() const { return parameters + unsharded + gradients + optimizer + activations; }
  bool has_limit() const { return limit > 0; }
  // What the step's own buffers may use: the limit less the reserve.
  int64_t usable() const { return limit - reserve; }
  bool fits() const { return !has_limit() || total() <= usable(); }
  // usable - total: how much is left (> 0) or missing (< 0). REQUIRES: has_limit().
  int64_t margin() const { return usable() - total(); }
};

struct MemoryReport {
  std::vector<RankMemory> ranks;
  int heaviest = 0;  // the rank with the largest total (the first on a tie)

  const RankMemory& Heaviest() const { return ranks[heaviest]; }
  // Every rank within its limit.
  bool fits() const;
  // The rank closest to (or furthest over) its limit: the smallest margin;
  // the heaviest when no rank has a limit.
  const RankMemory& Tightest() const;
};

// Memory of every rank of a lowered schedule under `model`'s per-stage
// costs, its activations planned under `policy`.
// Errors: those of ComputeBufferLifetimes (FailedPrecondition for a
// compute-only schedule, InvalidArgument for a malformed program).
absl::StatusOr<MemoryReport> PlanRankMemories(const Schedule& lowered, const Model& model,
                                              const TrainingMemory& training,
                                              MemoryPolicy policy = MemoryPolicy::kJit);

// The same from buffers planned already (`buffers[r]` from
// ComputeBufferLifetimes for rank r of `lowered`, any policy).
// REQUIRES: buffers.size() == lowered.pp.
MemoryReport RankMemoriesFromBuffers(const Schedule& lowered, const Model& model,
                                     const TrainingMemory& training,
                                     const std::vector<RankBuffers>& buffers);

// Parameters (or their FSDP shard), optimizer state and limits of every
// rank: what a rank holds the whole step besides its planned buffers
// (activations, gradients and unsharded copies 0).
MemoryReport ResidentRankMemory(const Schedule& lowered, const Model& model,
                                const TrainingMemory& training);

// The activations part alone for one rank (as RankMemory splits it).
// Errors: those of ComputeBufferLifetimes.
absl::StatusOr<int64_t> ActivationPeak(const Schedule& lowered, const Model& model, int rank,
                                       MemoryPolicy policy = MemoryPolicy::kJit);

}  // namespace jitpipe

#endif  // JITPIPE_PLANNING_RANK_MEMORY_H_
