// From a schedule file to something RunReplay (runtime/replay.h) can
// run: the steps `jitpipe replay` and the runtime tests share.
//
//   compute-only Schedule --Lower(reduce_grad)--> lowered Schedule
//   Model + Stage sizes   --ModelWithStageSizes--> Model (byte sizes of the stages)
//   lowered + Model       --PlanReplay--> Validate, PlanMemory(policy), BuildExecutable
//
// Pure functions apart from ModelWithStageSizes, which asks a factory's
// stages; thread-compatible.
#ifndef JITPIPE_RUNTIME_REPLAY_PLAN_H_
#define JITPIPE_RUNTIME_REPLAY_PLAN_H_

#include <vector>

#include "absl/status/statusor.h"
#include "comm/nccl/communicator_plan.h"
#include "comm/world.h"
#include "memory/buffer_lifetimes.h"
#include "memory/memory_plan.h"
#include "comm/backend_traits.h"
#include "runtime/replay_options.h"
#include "scheduler/ir/model.h"
#include "scheduler/ir/schedule.h"
#include "scheduler/passes/lower.h"
#include "stages/exec/rank_executable.h"
#include "stages/exec/stage.h"

namespace jitpipe {

// A lowered schedule as it is; a compute-only one lowered with the default
// lowering plus REDUCE_GRAD (Lower(), receives placed by `recv`: just in
// time by default; kJitRendezvous for an executor that waits for sends to
// complete mid-step over a rendezvous transport, e.g. arena buffers over
// MPI, lower.h). Errors: those of Lower().
absl::StatusOr<Schedule> LowerForReplay(const Schedule& schedule,
                                        RecvPlacement recv = RecvPlacement::kJit);

// A lowered schedule safe over a backend that matches transfers by
// `ordering` (comm/world.h, P2pOrdering), placing receives as the validator
// needs for it:
//   kByTag         (in-process, MPI, one-GPU CUDA) --recv jit: relaxed
//                  semantics
//   kFifoPerEdge   (nccl-lazy: a communicator per directed pair) --recv jit
//                  when every pair's receives keep their sends' order
//                  (CheckPairOrder), else --recv jit-rendezvous
//   kFifoPerRank   (nccl: one communicator, one stream, every transfer of a
//                  rank in one FIFO) --recv jit-rendezvous: strict
//                  semantics (validate --strict)
// A schedule that is lowered already is returned as it is (check it with
// CheckProgramOrder). Errors: those of Lower().
absl::StatusOr<Schedule> LowerForOrdering(const Schedule& schedule, P2pOrdering ordering);

// The lowering for a backend, once, from its traits (comm/backend_traits.h):
// a backend that matches in FIFO order as LowerForOrdering places receives
// for it; a rendezvous backend (MPI) with buffers reused mid-step (arena)
// --recv jit-rendezvous, so the executor's waits for sends cannot deadlock;
// otherwise --recv jit. A lowered schedule is returned as it is. Errors:
// those of Lower().
absl::StatusOr<Schedule> LowerForBackend(const Schedule& schedule, const BackendTraits& backend,
                                         BufferMode buffers);

// OK when a lowered program cannot deadlock or mismatch over a backend
// that matches by `ordering`: relaxed validation for kByTag, plus the
// per-pair order for kFifoPerEdge, strict validation for kFifoPerRank.
// Errors: InvalidArgument "<what the backend needs>: <the validator's
// message>", e.g. "one FIFO per rank (nccl) needs a program that is
// deadlock-free under strict semantics (lower it with --recv
// jit-rendezvous): deadlock under strict rendezvous semantics: ...".
absl::Status CheckProgramOrder(const Schedule& lowered, P2pOrdering ordering);

// The directed pairs of world ranks that exchange data when `executable`
// runs over pp x dp ranks (world rank = replica * pp + rank): every
// transfer's, in every replica. Sorted, distinct.
std::vector<Edge> P2pEdges(const Executable& executable, int pp, int dp);

// `model` with every stage's byte sizes replaced by what its Stage reports
// (a Stage of replica 0 is made for each stage and asked): input, output
// and stash bytes, and param_bytes such that Model::GradBytes equals the
// stage's param_grad_bytes. Times and the rest are kept. Errors: the
// factory's; InvalidArgument when param_grad_bytes is not a whole number of
// dp.grad_dtype elements.
absl::StatusOr<Model> ModelWithStageSizes(Model model, int num_stages, StageFactory& factory);

struct ReplayPlan {
  Schedule schedule;  // lowered
  Model model;
  std::vector<RankMemoryPlan> plans;  // per rank, with an arena
  Executable executable;
};

// How the plan models a backend's send completion: kReceive for a
// rendezvous backend (MPI, NCCL: a send completes once its receive is
// posted), kPost for an eager one (in-process, one-GPU CUDA).
SendCompletionModel PlanSendCompletion(const BackendTraits& backend);

// Validates `lowered` (relaxed semantics: the in-process backend's sends
// never block), plans its memory under `policy` and `send` with an arena
// (under kReceive every sent buffer's arena interval covers its bound, so no
// later buffer shares its bytes while the transfer may be in flight), and
// builds the executable. Errors: FailedPrecondition for a compute-only schedule;
// InvalidArgument from Validate() (naming rank, index and action), the
// model (CheckModelFits) or the planner.
absl::StatusOr<ReplayPlan> PlanReplay(Schedule lowered, Model model, MemoryPolicy policy,
                                      SendCompletionModel send = SendCompletionModel::kPost);

}  // namespace jitpipe

#endif  // JITPIPE_RUNTIME_REPLAY_PLAN_H_
