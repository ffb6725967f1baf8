// The rank executor: runs one rank's RankExecutable for a step, for real,
// over any Transport (in-process threads, MPI processes), driving the rank's
// Stages and taking every buffer from a BufferProvider. It walks the same
// steps as the simulator (stages/simulator.h) with the same semantics
// (DESIGN.md "Execution semantics"), so measured and predicted memory agree
// by construction.
//
// Per program step, in order:
//   1. SetPosition on the flight recorder (where a dump says the rank is);
//      allocate the step's buffers (AllocatedBefore; at step start also
//      allocate_at_start); parameter gradients are zeroed at allocation.
//   2. compute (F, I, W, B, OVERLAP_F_B): for each part, wait for the
//      transfer it consumes (Wait with the timeout), then call the Stage:
//      LoadInput + Forward, BackwardInput, BackwardWeight or Backward;
//      SEND_F/SEND_B: post the send of the buffer to the peer with the
//      transfer's tag; RECV_F/RECV_B: post the receive into the buffer;
//      REDUCE_GRAD: hand the stage's parameter gradients to the reduction
//      thread (reduction_worker.h) and go on; UNSHARD/RESHARD: nothing but
//      the plan's memory events (the reference stages keep whole
//      parameters).
//   3. release the step's buffers (ReleasedAfter); poll pending sends and
//      receives with Test; a sent buffer (ReleasedOnSend) is released once
//      its send has completed, never when it was merely posted — or, with a
//      provider that ReleasesAfterRequests (a device's stream-ordered free),
//      handed to the provider together with the send's request when the
//      send is posted.
// At the end of the step: wait for the pending sends, then for all
// reductions (the step's exposed reduction is the time spent there), call
// Stage::FinishStep with each stage's reduced gradients, release the
// step-end buffers.
//
// Every Stage call gets the rank's ExecutionContext: the provider's memory
// space, options.device and options.stream. Parameter gradients are zeroed
// through the provider (BufferProvider::Zero).
//
// With a provider that reuses released bytes (ArenaBuffers) and releases
// only when told, pending sends are completed (Wait) before anything is
// allocated after their planned release, so a slow transfer never sees its
// bytes reused; over a backend whose sends wait for their receives, the
// program must then be deadlock-free under strict semantics (validate
// --strict; the jit lowering is). With the in-process backend's eager
// protocol a send completes when it is posted, so memory follows the
// program-order plan exactly: the measured peak equals RankMemoryPlan::peak,
// for jit and eager.
//
// Ranks: pipeline rank `rank` of data-parallel replica `replica` is world
// rank replica * pp + rank (transport->rank() must say so); its
// data-parallel group is {rank, rank + pp, ..., rank + (dp - 1) * pp}.
//
// Errors from RunStep(): the first failure, prefixed with
// "rank <world rank>, index <i> (<action>): " — a Stage's own status, the
// transport's DeadlineExceeded (nothing arrived within the timeout) or
// Aborted (another rank failed). After a failure the executor must not run
// again; buffers stay allocated so the transport never writes into freed
// memory; the caller aborts the world before destroying the executor.
//
// Thread safety: one thread calls RunStep(); the executor owns the rank's
// reduction thread.
#ifndef JITPIPE_STAGES_RANK_EXECUTOR_H_
#define JITPIPE_STAGES_RANK_EXECUTOR_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/flight_recorder.h"
#include "comm/transport.h"
#include "scheduler/ir/model.h"
#include "scheduler/ir/schedule.h"
#include "stages/buffer_provider.h"
#include "stages/rank_executable.h"
#include "stages/reduction_worker.h"
#include "stages/stage.h"
#include "traces/timeline.h"

namespace jitpipe {

struct RankExecutorOptions {
  int replica = 0;  // this rank's data-parallel replica
  int dp = 1;       // replicas in the world
  ReduceKind reduce = ReduceKind::kAllReduce;
  absl::Duration timeout = absl::Seconds(60);  // bounds every wait
  // Time zero of the measured timeline (shared by all ranks of a run).
  std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
  bool record_timeline = true;
  // The rank's device and the stream its Stage calls enqueue on, handed to
  // them in the ExecutionContext: -1 and null on the host. A provider whose
  // memory_space() is kDevice needs a device.
  int device = -1;
  void* stream = nullptr;
};

struct StepResult {
  double loss = 0;            // sum of Stage::Loss over this rank's chain-final forwards
  double start_us = 0;        // since options.origin
  double compute_end_us = 0;  // the last program step ended
  double end_us = 0;          // reductions done, step-end buffers released
  // Time spent at the end of the step waiting for reductions still running:
  // the part of the reductions the compute did not hide.
  double exposed_reduce_us = 0;
  int64_t peak_bytes = 0;  // the provider's live-byte peak during the step
  // Spans (timeline rank = world rank) and memory samples, when recorded.
  Timeline timeline;
};

class RankExecutor {
 public:
  // Borrowed, and must outlive the executor: schedule (lowered),
  // executable (BuildExecutable of it), transport, buffers, recorder (may be
  // null), and the Stages: stages[s] for every stage s on `rank` (others
  // ignored, may be null). Errors: InvalidArgument when a stage of the rank
  // has no Stage, a Stage's Sizes() differ from the planned buffer sizes
  // (naming rank, index, action and the role), the transport's rank or size
  // does not match (replica, dp), options are out of range, or a device
  // provider comes without options.device.
  static absl::StatusOr<std::unique_ptr<RankExecutor>> Create(
      const Schedule& schedule, const Executable& executable, int rank, Transport* transport,
      absl::Span<Stage* const> stages, BufferProvider* buffers, FlightRecorder* recorder,
      const RankExecutorOptions& options);

  RankExecutor(const RankExecutor&) = delete;
  RankExecutor& operator=(const RankExecutor&) = delete;
  ~RankExecutor();

  // Runs one step of the rank's program. Errors: see the file comment.
  absl::StatusOr<StepResult> RunStep();

  int world_rank() const { return world_rank_; }
  const ExecutionContext& context() const { return context_; }

 private:
  struct PendingSend {
    RequestId request = 0;
    int32_t step = 0;  // position in exe_.steps
    int32_t span = -1; // its timeline span, -1 when not recorded
  };
  enum class RecvState : uint8_t { kNotPosted, kPending, kDone };

  RankExecutor(const Schedule& schedule, const Executable& executable, int rank,
               Transport* transport, std::vector<Stage*> stages, BufferProvider* buffers,
               FlightRecorder* recorder, const RankExecutorOptions& options);

  absl::Status CheckSizes() const;

  // One program step (position `i` in exe_.steps), and its pieces.
  absl::Status RunProgramStep(int32_t i, StepResult& result);
  absl::Status RunPart(const ExecPart& part, StepResult& result);
  absl::Status PostSend(int32_t i, const ExecStep& step);
  absl::Status PostRecv(int32_t i, const ExecStep& step);
  absl::Status WaitRecv(int32_t slot);
  // Tests the pending sends and receives; releases completed sends' buffers.
  absl::Status Poll();
  // The buffers the plan releases on `send`'s completion, now that it has
  // completed: released, or, where the provider took them at the post
  // (ReleasesAfterRequests), the completion reported to it.
  void ReleaseSent(const PendingSend& send);
  // Waits for every pending send (and releases their buffers); for every
  // pending send and receive.
  absl::Status CompleteSends();
  absl::Status CompleteAll();
  absl::Status Allocate(absl::Span<const int32_t> ids);
  void Release(absl::Span<const int32_t> ids);
  void SampleMemory();
  absl::Status FinishStep(StepResult& result);
  absl::Status InContext(const absl::Status& status, int32_t i) const;
  MutableBytes Bytes(int32_t id) const { return id == kNoBuffer ? MutableBytes() : span_of_[id]; }
  double NowUs() const;

  const Schedule& schedule_;
  const Executable& executable_;
  const RankExecutable& exe_;
  const int rank_;
  const int world_rank_;
  Transport* const transport_;
  const std::vector<Stage*> stages_;  // by stage id
  BufferProvider* const buffers_;
  FlightRecorder* const recorder_;
  const RankExecutorOptions options_;
  const ExecutionContext context_;
  // The provider takes sent buffers with their requests (device).
  const bool release_after_requests_;

  // Precomputed once (const after construction).
  std::vector<std::string> texts_;      // per step: the action's text
  std::vector<OpInfo> infos_;           // per step: for transport operations
  std::vector<int32_t> recv_slot_;      // per step: RECV slot, -1 otherwise
  std::vector<int32_t> part_slot_;      // per part: the RECV slot it waits for, -1 none
  int32_t num_recv_slots_ = 0;
  std::vector<bool> zero_on_alloc_;     // per buffer: parameter gradients
  std::vector<int32_t> param_grad_of_;  // per stage: its param_grad buffer, kNoBuffer

  std::unique_ptr<ReductionWorker> reductions_;

  // The state of the step in progress (sized once, reset per step).
  bool failed_ = false;
  std::vector<MutableBytes> span_of_;   // per buffer id, while live
  std::vector<RequestId> recv_request_; // per RECV slot
  std::vector<RecvState> recv_state_;   // per RECV slot
  std::vector<int32_t> recv_span_;      // per RECV slot: its timeline span
  std::vector<int32_t> pending_recvs_;  // slots posted, not yet seen complete
  std::vector<PendingSend> pending_sends_;
  std::array<int64_t, kNumMemoryCategories> live_by_category_{};
  bool memory_changed_ = false;
  Timeline timeline_;
};

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_RANK_EXECUTOR_H_
