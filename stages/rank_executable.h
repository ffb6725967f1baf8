// The executable form of a lowered, planned schedule: what every driver (the
// simulator's virtual clock, the in-process threads, MPI processes) walks.
//
// Each rank's lowered program becomes a list of steps, one per action, each
// saying what the rank does and what it waits on:
//   compute (F, I, W, B, OVERLAP_F_B)  parts, each with its buffers and the
//                                     transfer it must see completed first
//   SEND_F / SEND_B                    post the transfer from a buffer
//   RECV_F / RECV_B                    post the transfer into a buffer
//   REDUCE_GRAD                        start the stage's gradient reduction
//   UNSHARD / RESHARD                  gather / free the stage's parameters
// and which buffers of the memory plan come alive before the step, die
// after it, or die once the step's transfer has completed. The drivers add
// only the "how": a driver that performs the steps in order and honours the
// waits executes the schedule; memory follows the plan by construction.
//
// Transfers are numbered over the whole schedule, one per SEND/RECV pair,
// with a tag unique among the transfers between two ranks in one step.
//
// Everything here is a plain value; building is pure.
#ifndef JITPIPE_STAGES_RANK_EXECUTABLE_H_
#define JITPIPE_STAGES_RANK_EXECUTABLE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "memory/buffer_lifetimes.h"
#include "scheduler/ir/model.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

inline constexpr int32_t kNoBuffer = -1;
inline constexpr int32_t kNoTransfer = -1;

// One SEND/RECV pair.
struct Transfer {
  ActionKind kind = ActionKind::kSendF;  // kSendF (activation) or kSendB (gradient)
  int32_t stage = 0;                     // the sending stage
  int32_t microbatch = 0;
  int32_t src_rank = 0;
  int32_t dst_rank = 0;
  int32_t send_index = -1;  // program index of the SEND on src_rank
  int32_t recv_index = -1;  // program index of the RECV on dst_rank
  int64_t bytes = 0;
  uint64_t tag = 0;
};

// The buffers (ids into the rank's RankBuffers) one compute part touches;
// kNoBuffer where the part has none of that kind (e.g. the first stage's
// input gradient).
struct PartBuffers {
  int32_t input = kNoBuffer;
  int32_t stash = kNoBuffer;
  int32_t output = kNoBuffer;
  int32_t output_grad = kNoBuffer;
  int32_t input_grad = kNoBuffer;
  int32_t param_grad = kNoBuffer;
};

// One F, I, W or B (a compound has several).
struct ExecPart {
  ActionKind kind = ActionKind::kForward;
  int32_t stage = 0;
  int32_t microbatch = 0;
  double cost_us = 0;                // from the model
  int32_t waits_for = kNoTransfer;   // the transfer whose data this part consumes
  PartBuffers buffers;
};

struct ExecStep {
  int32_t index = 0;  // program index (the action is ranks[rank][index])
  ActionKind kind = ActionKind::kForward;
  int32_t stage = -1;  // -1 for a compound
  int32_t microbatch = kNoMicrobatch;
  double cost_us = 0;  // compute: the action's time (Model::ComputeUs)
  // Send/recv: the transfer and the buffer sent from or received into.
  // REDUCE_GRAD: buffer = the stage's parameter gradients; UNSHARD/RESHARD:
  // buffer = the stage's gathered parameters (kNoBuffer when not planned).
  int32_t transfer = kNoTransfer;
  int32_t buffer = kNoBuffer;
  // Ranges into RankExecutable::parts and ::buffer_lists.
  int32_t parts_begin = 0, parts_end = 0;
  int32_t allocate_begin = 0, allocate_end = 0;      // alive before the step
  int32_t release_begin = 0, release_end = 0;        // dead after the step
  int32_t release_on_send_begin = 0, release_on_send_end = 0;  // dead when the transfer completes
};

struct RankExecutable {
  int rank = 0;
  std::vector<ExecStep> steps;
  std::vector<ExecPart> parts;
  std::vector<int32_t> buffer_lists;   // concatenated id lists of the steps
  std::vector<int32_t> allocate_at_start;  // eager receive buffers
  std::vector<int32_t> release_at_end;     // held to step end
  std::vector<int64_t> buffer_bytes;       // per buffer id
  std::vector<MemoryCategory> buffer_category;  // per buffer id

  absl::Span<const ExecPart> PartsOf(const ExecStep& s) const {
    return absl::MakeConstSpan(parts).subspan(s.parts_begin, s.parts_end - s.parts_begin);
  }
  absl::Span<const int32_t> AllocatedBefore(const ExecStep& s) const { return List(s.allocate_begin, s.allocate_end); }
  absl::Span<const int32_t> ReleasedAfter(const ExecStep& s) const { return List(s.release_begin, s.release_end); }
  absl::Span<const int32_t> ReleasedOnSend(const ExecStep& s) const {
    return List(s.release_on_send_begin, s.release_on_send_end);
  }

 private:
  absl::Span<const int32_t> List(int32_t begin, int32_t end) const {
    return absl::MakeConstSpan(buffer_lists).subspan(begin, end - begin);
  }
};

struct Executable {
  std::vector<Transfer> transfers;
  std::vector<RankExecutable> ranks;
};

// Builds the executable of a lowered schedule whose buffers were planned per
// rank (`buffers[r]` from ComputeBufferLifetimes for rank r, any policy).
// The schedule is expected to pass Validate(); what building needs is checked
// again. Errors: FailedPrecondition for a compute-only schedule;
// InvalidArgument naming rank, index and action for a SEND or RECV without
// its partner, or a consumer whose RECV is missing.
// REQUIRES: buffers.size() == schedule.pp.
absl::StatusOr<Executable> BuildExecutable(const Schedule& schedule, const Model& model,
                                           absl::Span<const RankBuffers> buffers);

// The transfer tag for (kind, stage, microbatch): unique per schedule step.
uint64_t TransferTag(const Schedule& schedule, ActionKind send_kind, int stage, int microbatch);

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_RANK_EXECUTABLE_H_
