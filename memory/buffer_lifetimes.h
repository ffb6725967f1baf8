// Buffer lifetimes: which buffers one rank's lowered program needs, how big
// they are and in which program interval each must exist. This is the policy
// half of the planner (TFLite's ArenaPlanner::PlanAllocations); arena.h
// places the intervals at offsets.
//
// Index convention: a rank's program has actions 0 .. n-1. "Allocated at i"
// means before action i runs, "freed after j" means after action j finishes;
// a buffer is live during every action in [alloc_index, free_index]. Step
// start is "allocated at 0", step end is "freed after n-1" (the timing field
// says which).
//
// Buffers, per (stage s, microbatch m) on the rank (sizes from Model::ForStage):
//   input       input_bytes. The chain's first stage: the microbatch's data,
//               allocated at F. Previous stage on another rank: allocated at
//               RECV_F (jit; with prefetch K at the K-th compute action before
//               F if that is earlier) or at step start (eager). Previous
//               stage on this rank (the V turn): no buffer of its own, it IS
//               the output of F(s-1,m) (see handoff_stage). Needed by F, W and
//               B; freed after the last of them (eager: received ones at step
//               end).
//   stash       stash_bytes, allocated at F, freed after the last of I/W/B;
//               one buffer per segment (StageCost::stash_segments: a layered
//               model's layers), consecutive ids in segment order.
//   output      output_bytes, allocated at F. Last stage: freed after F. Next
//               stage remote: jit frees it after SEND_F, marked kAfterSend
//               (the transfer completes later in time; SendCompletionModel
//               kReceive plans it live until a later bound,
//               send_completion.h), or, when the program
//               waits for that send (WAIT_SEND_F), after the WAIT (it is
//               over only once the transfer completed); eager at step end.
//               Next stage on this rank: becomes that stage's input.
//   output_grad output_bytes, received for I/B; none on the last stage. Next
//               stage remote: allocated at RECV_B (jit, prefetch as above) or
//               step start (eager). Next stage on this rank: no buffer of its
//               own, it IS the input_grad of (s+1,m). Freed after the last of
//               I/W/B (eager: received ones at step end).
//   input_grad  input_bytes, produced by I or B; none on the first stage.
//               Previous stage remote: jit frees after SEND_B (kAfterSend),
//               or after its WAIT_SEND_B when there is one; eager at step
//               end. Previous stage on this rank: becomes the
//               output_grad of (s-1,m).
// Per stage:
//   param_grad  Model::GradBytes, allocated at the stage's first W or B, held
//               to step end (the optimizer needs it).
//   reduce      Model::ReduceBytes, only when the stage has a REDUCE_GRAD and
//               dp.reduce_dtype differs from grad_dtype: allocated at
//               REDUCE_GRAD, held to step end (the async reduction is waited
//               there), or freed after its WAIT_REDUCE_GRAD when there is
//               one.
//   params      param_bytes, FSDP only: from each UNSHARD to the next RESHARD
//               of the stage (step end without one).
// An OVERLAP_F_B is one index: both halves' allocations happen before it, both
// halves' frees after it.
//
// A handed-off buffer (same-rank V turn) has one id and two roles; its size is
// the larger of the two roles' sizes (equal in a consistent model).
#ifndef JITPIPE_MEMORY_BUFFER_LIFETIMES_H_
#define JITPIPE_MEMORY_BUFFER_LIFETIMES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/analysis/program_index.h"
#include "scheduler/ir/model.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

enum class BufferKind : uint8_t {
  kInput,
  kStash,
  kOutput,
  kOutputGrad,
  kInputGrad,
  kParamGrad,
  kReduce,
  kParams,
};

// "input", "stash", "output", "output_grad", "input_grad", "param_grad",
// "reduce", "params".
absl::string_view BufferKindName(BufferKind kind);

enum class AllocTiming : uint8_t {
  kBeforeAction,  // before action alloc_index runs
  kStepStart,     // at step start (eager receive buffers); alloc_index is 0
};

enum class FreeTiming : uint8_t {
  kAfterAction,  // after action free_index finishes
  kAfterSend,    // released once the transfer of the SEND at send_index completes;
                 // planned live through free_index (>= send_index: the SEND
                 // itself, or a later bound, send_completion.h)
  kStepEnd,      // at step end; free_index is n-1
};

// Categories of the per-category live-byte series (traces).
enum class MemoryCategory : uint8_t {
  kActivations,  // inputs and outputs not received
  kStash,
  kReceive,      // buffers allocated to receive into (inputs, output grads)
  kGradients,    // output/input/parameter gradients not received, reduce buffers
  kParameters,   // FSDP-unsharded parameters
};
inline constexpr int kNumMemoryCategories = 5;

// "activations", "stash", "receive", "gradients", "parameters".
absl::string_view MemoryCategoryName(MemoryCategory category);

struct Buffer {
  BufferKind kind = BufferKind::kInput;
  AllocTiming alloc_timing = AllocTiming::kBeforeAction;
  FreeTiming free_timing = FreeTiming::kAfterAction;
  bool received = false;  // filled by a RECV_F / RECV_B
  int32_t stage = 0;
  int32_t microbatch = kNoMicrobatch;  // kNoMicrobatch for per-stage buffers
  // The V turn: the output of `stage` is also the input of handoff_stage, the
  // input_grad of `stage` also the output_grad of handoff_stage. -1: none.
  int32_t handoff_stage = -1;
  // A stash in segments: this buffer is segment `segment` (0-based) of
  // `segments`; 0 of 1 for every other buffer.
  int32_t segment = 0;
  int32_t segments = 1;
  int64_t bytes = 0;
  int32_t alloc_index = 0;
  int32_t free_index = 0;
  // kAfterSend: the program index of the SEND whose completion releases it;
  // -1 otherwise.
  int32_t send_index = -1;
  // What any placement of the receives and sends must keep live: from the
  // first action that writes or reads it (a received buffer: its first
  // consumer) to the last (a sent buffer: its producer, as the transfer may
  // complete at once). The liveness lower bound sums these intervals.
  int32_t needed_from = 0;
  int32_t needed_until = 0;

  MemoryCategory category() const;
  // e.g. "output 3/5 1048576 B [12, 14] after send, input of stage 4",
  // "stash 2/0 segment 2 of 4 134217728 B [3, 40]".
  std::string ToString() const;
};

enum class MemoryPolicy : uint8_t {
  kEager,  // PyTorch's released runtime: receives at step start, sends held to step end
  kJit,    // receive buffers at their RECV, sent outputs freed after the SEND completes
};

// "eager", "jit". ParseMemoryPolicy errors: InvalidArgument
// `unknown memory policy "x"; expected jit or eager`.
absl::string_view MemoryPolicyName(MemoryPolicy policy);
absl::StatusOr<MemoryPolicy> ParseMemoryPolicy(absl::string_view name);

// kJit only: when a sent buffer without a WAIT_SEND of its send is freed.
// One with a WAIT_SEND is freed after that WAIT under either.
enum class SendRelease : uint8_t {
  kOnCompletion,  // once its transfer completes (jitpipe; PyTorch main's polling)
  kStepEnd,       // at the step's end (PyTorch's end-of-step drain)
};

struct LifetimeOptions {
  MemoryPolicy policy = MemoryPolicy::kJit;
  // kJit only: allocate each receive buffer at the prefetch-th compute action
  // before its first consumer (index 0 if there are fewer), or at its RECV if
  // that is earlier. 0: at the RECV.
  int prefetch = 0;
  SendRelease send_release = SendRelease::kOnCompletion;
};

// One rank's buffers, ordered by alloc_index; ties in creation order: by
// stage, a stage's per-microbatch buffers (by microbatch, then in the order
// listed above) before its per-stage ones. A buffer's id is its position.
struct RankBuffers {
  int rank = 0;
  int num_actions = 0;
  std::vector<Buffer> buffers;
};

// Computes the buffers of `rank`'s program. The program is expected to pass
// Validate(); only what lifetimes need is checked here.
// Errors: FailedPrecondition for a compute-only schedule ("plan needs a
// lowered program; run jitpipe lower first"); InvalidArgument from
// ValidateHeader and naming the rank, index and action (as Validate words
// it) for a stage not on the rank, a microbatch out of range, an action
// repeated, a receive or send between stages of one rank or
// from a chain's end, a consumer before its RECV or producer, a SEND before
// its producer, a missing SEND/RECV for a cross-rank neighbour, and
// UNSHARD/RESHARD out of pairs; InvalidArgument from CheckModelFits.
// REQUIRES: 0 <= rank < schedule.pp, options.prefetch >= 0.
absl::StatusOr<RankBuffers> ComputeBufferLifetimes(const Schedule& schedule, const Model& model,
                                                   int rank, const LifetimeOptions& options);

// The same through `index` = ProgramIndex::Build(schedule) (or
// BuildForRank(schedule, rank)), for a caller that plans every rank: one
// index of every program instead of one per rank.
// REQUIRES: also ValidateHeader(schedule) passed.
absl::StatusOr<RankBuffers> ComputeBufferLifetimes(const Schedule& schedule,
                                                   const ProgramIndex& index, const Model& model,
                                                   int rank, const LifetimeOptions& options);

}  // namespace jitpipe

#endif  // JITPIPE_MEMORY_BUFFER_LIFETIMES_H_
