// The executable form of a lowered, planned schedule: what every driver (the
// simulator's virtual clock, the in-process threads, MPI processes) walks
// with a rank cursor (scheduler/execution/rank_cursor.h).
//
// The cursor says what a rank does next and what it waits for; the
// executable adds what the drivers need to do it. Per rank, one step per
// action:
//   compute (F, I, W, B, OVERLAP_F_B)  parts, each with its buffers and cost
//   SEND_F / SEND_B                    the transfer, the buffer sent from
//   RECV_F / RECV_B                    the transfer, the buffer received into
//   REDUCE_GRAD, WAIT_REDUCE_GRAD      the stage's parameter gradients
//   WAIT_SEND_F / WAIT_SEND_B          the transfer waited for, its sent buffer
//   UNSHARD / RESHARD                  the stage's gathered parameters
// and the rank's memory events (which buffers of the memory plan come alive
// before each step, die after it, or die once its transfer has completed),
// which the cursor hands out in order: memory follows the plan by
// construction, whoever drives.
//
// Transfers are numbered over the whole schedule, one per SEND/RECV pair
// (sends in rank, then program order), with a tag unique among the
// transfers between two ranks in one step.
//
// Everything here is a plain value; building is pure.
#ifndef JITPIPE_STAGES_EXEC_RANK_EXECUTABLE_H_
#define JITPIPE_STAGES_EXEC_RANK_EXECUTABLE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "memory/buffer_lifetimes.h"
#include "scheduler/analysis/comm_matching.h"
#include "scheduler/execution/memory_events.h"
#include "scheduler/execution/rank_cursor.h"
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

  bool operator==(const Transfer&) const = default;
};

// The buffers (ids into the rank's RankBuffers) one compute part touches;
// kNoBuffer where the part has none of that kind (e.g. the first stage's
// input gradient).
struct PartBuffers {
  int32_t input = kNoBuffer;
  // The stash's first segment; its segments are ids stash .. stash +
  // stash_segments - 1 (buffer_lifetimes.h makes them consecutive).
  int32_t stash = kNoBuffer;
  int32_t stash_segments = 0;
  int32_t output = kNoBuffer;
  int32_t output_grad = kNoBuffer;
  int32_t input_grad = kNoBuffer;
  int32_t param_grad = kNoBuffer;

  bool operator==(const PartBuffers&) const = default;
};

// One F, I, W or B (a compound has several).
struct ExecPart {
  ActionKind kind = ActionKind::kForward;
  int32_t stage = 0;
  int32_t microbatch = 0;
  double cost_us = 0;                // from the model
  // The transfer whose data this part consumes (kNoTransfer: none). Data,
  // not a rule: drivers wait as the rank cursor says.
  int32_t consumes = kNoTransfer;
  PartBuffers buffers;

  bool operator==(const ExecPart&) const = default;
};

struct ExecStep {
  int32_t index = 0;  // program index (the action is ranks[rank][index])
  ActionKind kind = ActionKind::kForward;
  int32_t stage = -1;  // -1 for a compound
  int32_t microbatch = kNoMicrobatch;
  double cost_us = 0;  // compute: the action's time (Model::ComputeUs)
  // Send/recv: the transfer and the buffer sent from or received into;
  // WAIT_SEND_F/B: those of the SEND it waits for. REDUCE_GRAD and
  // WAIT_REDUCE_GRAD: buffer = the stage's parameter gradients; UNSHARD/RESHARD:
  // buffer = the stage's gathered parameters (kNoBuffer when not planned).
  int32_t transfer = kNoTransfer;
  int32_t buffer = kNoBuffer;
  // The range of RankExecutable::parts.
  int32_t parts_begin = 0, parts_end = 0;

  bool operator==(const ExecStep&) const = default;
};

struct RankExecutable {
  int rank = 0;
  std::vector<ExecStep> steps;  // steps[i] is the action at index i
  std::vector<ExecPart> parts;
  RankMemoryEvents memory;                      // buffer ids: the rank's plan's
  std::vector<int64_t> buffer_bytes;            // per buffer id
  std::vector<MemoryCategory> buffer_category;  // per buffer id

  absl::Span<const ExecPart> PartsOf(const ExecStep& s) const {
    return absl::MakeConstSpan(parts).subspan(s.parts_begin, s.parts_end - s.parts_begin);
  }
};

struct Executable {
  CommPositions positions;  // MatchSendRecv of the schedule: what the cursors read
  std::vector<Transfer> transfers;
  std::vector<RankExecutable> ranks;
};

// Builds the executable of a lowered schedule whose buffers were planned per
// rank (`buffers[r]` from ComputeBufferLifetimes for rank r, any policy).
// The schedule is expected to pass Validate(); what building needs is checked
// again. Errors: FailedPrecondition for a compute-only schedule;
// InvalidArgument from MatchSendRecv (naming rank, index and action: a SEND
// or RECV without its partner, a consumer whose RECV is missing) or for an
// action that cannot run (a bubble).
// REQUIRES: buffers.size() == schedule.pp.
absl::StatusOr<Executable> BuildExecutable(const Schedule& schedule, const Model& model,
                                           absl::Span<const RankBuffers> buffers);

// The same, releasing each rank's buffers once its executable is built, so
// that the buffers and the executable are never whole in memory together
// (at pp 128 m 1024: 105 MB of buffers, 262 MB of rank executables).
// On success every element of `buffers` is left empty.
absl::StatusOr<Executable> BuildExecutable(const Schedule& schedule, const Model& model,
                                           std::vector<RankBuffers>&& buffers);

// OK when `executable` has a step for every action of every rank of
// `schedule` (as BuildExecutable of it does); InvalidArgument naming the
// first rank that differs otherwise. Drivers check it before they walk.
absl::Status CheckExecutableFits(const Schedule& schedule, const Executable& executable);

// Rank `rank`'s cursor over `executable` (built from `schedule`), with its
// memory events. Both must outlive the cursor.
RankCursor CursorOf(const Schedule& schedule, const Executable& executable, int rank,
                    WaitModel model = WaitModel::kRelaxed);

// The transfer tag for (kind, stage, microbatch): unique per schedule step.
uint64_t TransferTag(const Schedule& schedule, ActionKind send_kind, int stage, int microbatch);

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_EXEC_RANK_EXECUTABLE_H_
