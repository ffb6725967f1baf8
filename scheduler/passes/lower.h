// Lowering: from a compute-only program to one with every send, receive and
// reduction explicit, through a pipeline of passes (pass_pipeline.h), each
// in its own file with a before/after example:
//
//   [split_backward | merge_backward]   BackwardForm kSplit | kMerge
//   [add_unshard_reshard]               fsdp (max_active_stages, unshard_lookahead)
//   [add_reduce_grad]                   reduce_grad
//   lower_send_recv_early               always (PyTorch's _add_send_recv)
//   [place_recvs_just_in_time]          recv == kJit (the default)
//   [place_recvs_jit_rendezvous]        recv == kJitRendezvous
//   [place_recvs_ahead]                 recv == kOffset (k per receive from recv_offsets)
//   [overlap_reduce]                    overlap (needs reduce_grad)
//   [defer_reduce_wait]                 defer_reduce_wait (needs reduce_grad)
//   [add_wait_send]                     wait_send (PyTorch main's placement)
//   [add_wait_send_budget]              send_budget > 0
//
// With recv = kEarly, fsdp and reduce_grad the result equals PyTorch's
// _PipelineScheduleRuntime lowering (its pipeline_order_with_comms) exactly;
// with recv = kEarly alone it equals _add_send_recv of the compute order.
// What each placement guarantees (validate.h defines the semantics):
//
//   recv             Validate() passes under    jit plan peak
//   kEarly           relaxed and strict         >= the lower bound (a receive
//                                               buffer from its SEND's round on)
//   kJit             relaxed                    = the liveness lower bound
//   kJitRendezvous   relaxed and strict         >= the lower bound (RECVs
//                                               posted early where needed)
//   kOffset          relaxed                    between kJit's and kEarly's
//                                               (each RECV k computes ahead)
//
// Over NCCL-like communicators whose operations complete in FIFO order
// (comm_fifo.h), kJit is not safe: on one communicator for the group most
// schedules deadlock, and per edge the V schedules do (their receives from
// one peer leave send order). A program deadlock-free under strict
// semantics is under FIFO completion in either layout (run the strict
// execution's rendezvous in order: each is at the head of both its queues
// once the earlier ones completed, and each rank reaches it), so with
// `comms` set, kJit lowers with the kJitRendezvous placement, and the
// lowering checks the result under that layout too.
//
// kJit suits runtimes that match messages by tag and never make a SEND wait
// for its RECV: PyTorch's, and jitpipe's in-process backend (it copies on
// send). kJitRendezvous suits ordered rendezvous transports (a single NCCL
// stream, MPI_Ssend) and any runtime that waits for a send to complete
// before it goes on: e.g. rank_executor.h with an arena over MPI, where a
// large MPI_Isend completes only once the peer has posted its RECV.
//
// Pure functions; thread-compatible.
#ifndef JITPIPE_SCHEDULER_PASSES_LOWER_H_
#define JITPIPE_SCHEDULER_PASSES_LOWER_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/execution/comm_fifo.h"
#include "scheduler/ir/schedule.h"
#include "scheduler/passes/add_unshard_reshard.h"
#include "scheduler/passes/overlap_reduce.h"
#include "scheduler/passes/pass_pipeline.h"
#include "scheduler/passes/place_recvs_ahead.h"

namespace jitpipe {

enum class RecvPlacement {
  kEarly,          // where PyTorch's _add_send_recv puts them: when the sender sends
  kJit,            // right before the consumer (place_recvs_just_in_time.h)
  kJitRendezvous,  // as late as ordered rendezvous allows (place_recvs_jit_rendezvous.h)
  kOffset,         // k computes before the consumer, k per receive (place_recvs_ahead.h)
};

// Chooses each receive's offset for kOffset from LowerSendRecvEarly's
// output (planning/recv_offsets.h: the cost model's smallest k that hides
// the transfer within a memory cap).
using RecvOffsetFunction = std::function<absl::StatusOr<RecvOffsets>(const Schedule& early)>;

// "early", "jit", "jit-rendezvous", "offset": the names `jitpipe lower --recv` takes.
absl::string_view RecvPlacementName(RecvPlacement recv);
// The inverse of RecvPlacementName. Errors: InvalidArgument
//   unknown receive placement "late"; expected early, jit, jit-rendezvous or offset
absl::StatusOr<RecvPlacement> ParseRecvPlacement(absl::string_view name);

enum class BackwardForm {
  kKeep,   // as given
  kSplit,  // every B becomes I then W
  kMerge,  // an I immediately followed by its W becomes B (PyTorch's _merge_bw)
};

struct LowerOptions {
  RecvPlacement recv = RecvPlacement::kJit;
  RecvOffsetFunction recv_offsets = nullptr;  // kOffset only, and required there
  BackwardForm backward = BackwardForm::kKeep;
  bool fsdp = false;         // UNSHARD/RESHARD (add_unshard_reshard.h)
  // fsdp's residency window and issue distance (defaults: PyTorch's 3,
  // issued as far ahead as the window reaches).
  int max_active_stages = kDefaultMaxActiveStages;
  UnshardLookahead unshard_lookahead = {};
  bool reduce_grad = false;  // REDUCE_GRAD right after each stage's last B or W
  // Reorder Ws so reductions hide under compute (overlap_reduce.h); needs
  // reduce_grad. overlap_peak is its memory limit (unset: activation units).
  bool overlap = false;
  RankPeakFunction overlap_peak = nullptr;
  StepTimeFunction overlap_step_time = nullptr;  // overlap_reduce.h's steps 3-4; unset: skipped
  // Step 4: whether the rank that ends the step may merge its last I and W.
  LastBackward overlap_last_backward = LastBackward::kMergeWhereShorter;
  // PyTorch main's explicit waits: each reduction's WAIT_REDUCE_GRAD before
  // the rank's next reduction (defer_reduce_wait.h; needs reduce_grad and
  // two stages per rank); each SEND_F's WAIT_SEND_F after the local backward
  // of its microbatch (add_wait_send.h); at most send_budget sent buffers
  // held per rank (add_wait_send_budget.h; 0: no budget).
  bool defer_reduce_wait = false;
  bool wait_send = false;
  int send_budget = 0;
  // Lower for NCCL-like communicators in this layout (see above): the
  // just-in-time placement safe for them. Unset: tag-matched transports.
  std::optional<CommLayout> comms = std::nullopt;
  std::string dump_after = {};  // pass name whose output the pipeline records ("" = none)
  // Validate after every pass (ValidateStructure; once sends exist, Validate()
  // under relaxed semantics, and strict ones too unless recv is kJit). A
  // failure there is Internal: a bug.
  bool check_invariants = kCheckInvariantsByDefault;
};

// Lowers a compute-only schedule; the result has lowered = true and no
// bubbles. Errors: FailedPrecondition if `schedule` is already lowered;
// InvalidArgument if it fails ValidateStructure() (that message, naming the
// rank, index and action), if a pass refuses it ("pass <name>: ...", e.g. a
// cyclic wait in lower_send_recv_early, or a send budget that cannot be
// kept), if dump_after names no pass that runs with these options, if
// overlap or defer_reduce_wait is set without reduce_grad, recv is kOffset
// without recv_offsets or with comms (it is a relaxed-semantics placement),
// max_active_stages or unshard_lookahead differ from their defaults
// without fsdp or do not fit (CheckUnshardReshardOptions), or send_budget
// is negative.
absl::StatusOr<Schedule> Lower(const Schedule& schedule, const LowerOptions& options = {});
// The same, owning the schedule: it is released once the first pass has read
// it, so that it is not in memory beside the lowered program.
absl::StatusOr<Schedule> Lower(Schedule&& schedule, const LowerOptions& options = {});

struct LowerResult {
  Schedule lowered;
  std::optional<Schedule> dumped;  // the output of options.dump_after, when set
};

// Lower(), also returning the program after the pass options.dump_after names.
absl::StatusOr<LowerResult> LowerWithDump(const Schedule& schedule, const LowerOptions& options);
absl::StatusOr<LowerResult> LowerWithDump(Schedule&& schedule, const LowerOptions& options);

// The names of the passes Lower() runs with `options`, in order.
std::vector<std::string> LoweringPassNames(const LowerOptions& options);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_LOWER_H_
