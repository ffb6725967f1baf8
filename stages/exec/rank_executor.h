// The rank executor: runs one rank's RankExecutable for a step, for real,
// over any Transport (in-process threads, MPI processes), driving the rank's
// Stages and taking every buffer from a BufferProvider. It is the
// real-transport driver of the rank cursor (scheduler/execution/
// rank_cursor.h): the simulator and the deadlock check walk the very same
// instructions, so waits and memory follow one set of rules and measured
// and predicted memory agree by construction.
//
// What each instruction does here:
//   kBegin     allocate the step-start buffers (eager receive buffers)
//   kWait      a compute's input: Test the request of the RECV it names
//              (blocked until it completed); an UNSHARD: nothing (the
//              reference stages keep whole parameters); a WAIT_SEND: Test
//              the request of the SEND it names (blocked until it
//              completed; its buffers released as on any completion); a
//              WAIT_REDUCE_GRAD: until the reduction thread has ended that
//              REDUCE_GRAD's reduction (the time blocked there counts as
//              exposed reduction)
//   kAllocate  allocate (parameter gradients zeroed through the provider);
//              with a provider that reuses released bytes and releases only
//              when told, first complete the pending sends (see below)
//   kRun       compute: the Stage call (LoadInput + Forward, BackwardInput,
//              BackwardWeight or Backward per part); SEND/RECV: post it with
//              the transfer's tag; REDUCE_GRAD: hand the stage's parameter
//              gradients to the reduction thread (reduction_worker.h);
//              UNSHARD/RESHARD and the WAITs: nothing
//   kRelease   release; then Test the pending sends and receives: a sent
//              buffer is released once its send has completed, never when
//              it was merely posted -- or, with a provider that
//              ReleasesAfterRequests (a device's stream-ordered free), handed
//              to the provider with the send's request when it is posted
//   kEnd       complete every pending send and receive, then every
//              reduction (the time spent there is the step's exposed
//              reduction), Stage::FinishStep with each stage's reduced
//              gradients, release the step-end buffers
// (the pending transfers are tested after every action, released or not).
// The flight recorder's position moves to an action when the cursor reaches
// it, so a dump names the action a rank waits at.
//
// Two ways to drive it. RunStep() blocks in the transport's Wait whenever
// the cursor waits: one thread per rank. Advance() never blocks: it runs
// until a wait does not hold and returns, so one thread can drive several
// ranks (RunStepsTogether) and a device driver can turn the wait into a
// stream dependency. Both end a wait that lasts longer than the timeout
// with DeadlineExceeded naming the operation.
//
// Every Stage call gets the rank's ExecutionContext: the provider's memory
// space, options.device and options.stream.
//
// Over a device transport (Transport::device_streams(): comm/cuda,
// comm/nccl) the step is stream-ordered and the host does not wait in the
// steady state: options.device and options.stream default to the
// transport's device and compute stream; a kWait on a transfer becomes a
// device dependency (Transport::StreamWait: the compute stream waits for
// the receive's completion event) and the cursor moves on at once -- only a
// transfer not yet issued to the device (one-GPU mode: its sender has not
// posted) holds the host, until it is; REDUCE_GRAD posts the collective
// from this thread (the transport orders it after the compute stream, on
// its reduction stream: no reduction thread); sent buffers go to the
// provider at the post (ReleasesAfterRequests) and nothing is polled
// mid-step. The host waits only at kEnd: for a marker behind the compute
// stream's work (Transport::PostMarker: compute_end_us), then every
// transfer and reduction, each bounded by the timeout.
//
// Structure: this file's loop carries out the cursor's instructions and
// owns what every mode shares (buffers, sends, receives, WAIT_SEND, the
// timeline); how a rank waits -- for a receive, a reduction, the step's end
// -- and how its compute is ordered is one WaitStrategy per mode
// (wait_strategy.h: host_blocking_wait.cc, stream_ordered_wait.cc), chosen
// from the transport at construction; a step captured into a CUDA graph
// ends through graph_capture_wait.cc (SetCapturing).

//
// With a provider that reuses released bytes (ArenaBuffers) and releases
// only when told, pending sends are completed before anything is allocated
// after their planned release, so a slow transfer never sees its bytes
// reused; over a backend whose sends wait for their receives, the program
// must then be deadlock-free under strict semantics (validate --strict; the
// jit-rendezvous lowering is). With the in-process backend's eager protocol
// a send completes when it is posted, so memory follows the program-order
// plan exactly: the measured peak equals RankMemoryPlan::peak, for jit and
// eager.
//
// Ranks: pipeline rank `rank` of data-parallel replica `replica` is world
// rank replica * pp + rank (transport->rank() must say so); its
// data-parallel group is {rank, rank + pp, ..., rank + (dp - 1) * pp}.
//
// Errors from a step: the first failure, prefixed with "rank <world rank>,
// index <i> (<action>): " -- a Stage's own status, DeadlineExceeded (nothing
// arrived within the timeout) or Aborted (another rank failed). After a
// failure the executor must not run again; buffers stay allocated so the
// transport never writes into freed memory; the caller aborts the world
// before destroying the executor.
//
// Thread safety: one thread at a time drives an executor; the executor owns
// the rank's reduction thread.
#ifndef JITPIPE_STAGES_EXEC_RANK_EXECUTOR_H_
#define JITPIPE_STAGES_EXEC_RANK_EXECUTOR_H_

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
#include "scheduler/execution/rank_cursor.h"
#include "scheduler/ir/schedule.h"
#include "stages/exec/buffer_provider.h"
#include "stages/exec/rank_executable.h"
#include "stages/exec/stage.h"
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
  // them in the ExecutionContext: -1 and null on the host; over a device
  // transport, when left so, the transport's. A provider whose
  // memory_space() is kDevice needs a device.
  int device = -1;
  void* stream = nullptr;
};

struct StepResult {
  double loss = 0;            // sum of Stage::Loss over this rank's chain-final forwards
  double start_us = 0;        // since options.origin
  double compute_end_us = 0;  // the last program step ended
  double end_us = 0;          // reductions done, step-end buffers released
  // Time spent waiting for reductions still running, at WAIT_REDUCE_GRADs
  // and at the end of the step: the part of the reductions the compute did
  // not hide.
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
  // ignored, may be null). Errors: InvalidArgument when the executable does not
  // fit the schedule (CheckExecutableFits), a stage of the rank
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

  // Runs one step of the rank's program, blocking in the transport while
  // it waits. Errors: see the file comment.
  absl::StatusOr<StepResult> RunStep();

  // The same step, polled. BeginStep() starts it; Advance() runs it as far
  // as it can without blocking and says whether it ended and whether
  // anything happened; once it ended, TakeResult() hands over the step's
  // result. Errors: those of RunStep(), from Advance(); a wait that has
  // lasted longer than options.timeout is DeadlineExceeded.
  // REQUIRES: BeginStep before Advance; no step in progress for BeginStep.
  struct Progress {
    bool done = false;   // the step ended
    bool moved = false;  // some instruction was carried out
  };
  absl::Status BeginStep();
  absl::StatusOr<Progress> Advance();
  StepResult TakeResult();

  // Over a device transport: the steps from now on (true) are being captured
  // into a CUDA graph (comm/cuda/step_graph.h), so nothing of them may be
  // tested or waited for on the host: a step only enqueues, and its end
  // posts no marker, tests no transfer or reduction, does not wait for
  // FinishStep's work and reads no loss (StepResult::loss stays 0: the
  // caller reads the stages' losses once the graph has run). The requests
  // it posted are left to the transport; sent buffers are reported
  // complete to the provider at the end (a provider that ReleasesAfterRequests
  // orders their reuse on the device). Errors: FailedPrecondition without a
  // device transport and a provider that ReleasesAfterRequests, or with a
  // step in progress.
  absl::Status SetCapturing(bool capturing);

  int world_rank() const { return world_rank_; }
  const ExecutionContext& context() const { return context_; }

 private:
  // How the rank waits, one implementation per mode (wait_strategy.h):
  // HostBlockingWait (CPU transports), StreamOrderedWait (device
  // transports) and GraphCaptureWait (a device step being captured,
  // graph_capture_wait.cc). Nested so that they reach the step's state.
  class WaitStrategy;
  class HostBlockingWait;
  class StreamOrderedWait;
  class GraphCaptureWait;

  struct PendingSend {
    RequestId request = 0;
    int32_t step = 0;  // the SEND's program index
    int32_t span = -1; // its timeline span, -1 when not recorded
  };
  // kStreamOrdered: the compute stream waits for it on the device; the host
  // has not seen it complete yet (device transports).
  enum class RecvState : uint8_t { kNotPosted, kPending, kStreamOrdered, kDone };
  // What a step that cannot go on waits for. kRecvIssue: a receive to be
  // issued to the device (its sender to post); kMarker: the compute
  // stream's work (device transports).
  struct Blocked {
    enum class Kind : uint8_t {
      kNone, kRecv, kRecvIssue, kSend, kReduction, kReductions, kMarker
    } kind = Kind::kNone;
    // kRecv, kRecvIssue: the RECV slot; kSend: the position in
    // pending_sends_; kReduction: the REDUCE_GRAD's program index.
    int32_t slot = -1;
    absl::Time since;   // when it was first found blocked
  };

  RankExecutor(const Schedule& schedule, const Executable& executable, int rank,
               Transport* transport, std::vector<Stage*> stages, BufferProvider* buffers,
               FlightRecorder* recorder, const RankExecutorOptions& options);

  absl::Status CheckSizes() const;
  absl::Status CheckStash(const StageSizes& sizes, const PartBuffers& b, int stage) const;

  // Carries out the cursor's current instruction; false when it must wait
  // (blocked_ says for what). Each piece below serves one instruction; what
  // differs between the modes is asked of wait_.
  absl::StatusOr<bool> Execute(const Instruction& in);
  absl::StatusOr<bool> ReachWait(const Wait& wait);
  absl::StatusOr<bool> SendDone(int32_t send);
  absl::Status RunAction(int32_t i);
  absl::Status RunPart(const ExecPart& part);
  // After an action and its releases: test the pending transfers (where the
  // mode polls), sample.
  absl::StatusOr<bool> AfterAction();
  absl::Status PostSend(int32_t i, const ExecStep& step, absl::Span<const int32_t> sent);
  absl::Status PostRecv(int32_t i, const ExecStep& step);
  // The step's pending sends, then its pending receives, completed; false
  // while one is not (blocked_ says which).
  absl::StatusOr<bool> TransfersDone();
  // Whether the receive in `slot` has completed (Test).
  absl::StatusOr<bool> RecvDone(int32_t slot);
  // The receive in `slot` has completed: its span closed, no longer pending.
  void RecvCompleted(int32_t slot);
  // Tests the pending sends and receives; releases completed sends' buffers.
  absl::Status Poll();
  // Whether every pending send has completed (and released its buffers).
  absl::StatusOr<bool> SendsDone();
  // The buffers the plan releases on `send`'s completion, now that it has
  // completed: released, or, where the provider took them at the post
  // (ReleasesAfterRequests), the completion reported to it.
  void ReleaseSent(const PendingSend& send);
  // Not done yet: record what the step waits for (and since when), or fail
  // once that has lasted longer than the timeout.
  absl::StatusOr<bool> Block(Blocked::Kind kind, int32_t slot);
  absl::Status TimedOut() const;  // DeadlineExceeded naming what blocked_ names
  // Blocks in the transport for a receive or send that blocked_ names, the
  // rest in wait_, at most the timeout (RunStep's way of waiting).
  absl::Status WaitBlocked();
  std::string DescribeBlocked() const;
  absl::Status Allocate(absl::Span<const int32_t> ids);
  void Release(absl::Span<const int32_t> ids);
  void SampleMemory();
  // The step's end once everything the mode waits for is over: exposed
  // reduction, FinishStep per stage, step-end buffers, timeline.
  absl::Status FinishStep();
  // Records the reductions' spans and orders the timeline (step end).
  void CloseTimeline();
  absl::Status InContext(const absl::Status& status, int32_t i) const;
  MutableBytes Bytes(int32_t id) const { return id == kNoBuffer ? MutableBytes() : span_of_[id]; }
  // A part's stash: its one buffer, or its segments' (through stash_spans_,
  // valid until the next call).
  StashView Stash(const PartBuffers& b);
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
  // Allocation waits for the pending sends (an arena that releases only when told).
  const bool allocate_after_sends_;
  const Group dp_group_;  // this rank's data-parallel group
  const int dp_member_;   // its index there

  // Precomputed once (const after construction).
  std::vector<std::string> texts_;      // per step: the action's text
  std::vector<OpInfo> infos_;           // per step: for transport operations
  std::vector<int32_t> recv_slot_;      // per step: RECV slot, -1 otherwise
  int32_t num_recv_slots_ = 0;
  std::vector<bool> zero_on_alloc_;     // per buffer: parameter gradients
  std::vector<int32_t> param_grad_of_;  // per stage: its param_grad buffer, kNoBuffer

  // The mode's waits (and, on the host, the reduction thread); replaced
  // only between steps (SetCapturing).
  std::unique_ptr<WaitStrategy> wait_;

  // The state of the step in progress (sized once, reset per step).
  RankCursor cursor_;
  bool failed_ = false;
  bool in_step_ = false;
  bool capturing_ = false;  // SetCapturing
  int32_t position_ = -1;  // the action the flight recorder was last told
  Blocked blocked_;
  StepResult result_;
  std::vector<MutableBytes> span_of_;   // per buffer id, while live
  std::vector<MutableBytes> stash_spans_;  // Stash()'s segments
  std::vector<RequestId> recv_request_; // per RECV slot
  std::vector<RecvState> recv_state_;   // per RECV slot
  std::vector<int32_t> recv_span_;      // per RECV slot: its timeline span
  std::vector<int32_t> pending_recvs_;  // slots posted, not yet seen complete
  std::vector<PendingSend> pending_sends_;
  double waited_reduce_us_ = 0;          // this step's time in WAIT_REDUCE_GRADs
  int reductions_started_ = 0;           // this step's collectives (none at dp 1)
  std::array<int64_t, kNumMemoryCategories> live_by_category_{};
  bool memory_changed_ = false;
};

// Runs one step of every executor in `executors` from this thread, polling
// each in turn (Advance) and yielding, then sleeping briefly, when none
// moved: ranks of one process without a thread each. `results` receives
// the steps' results in the executors' order. Errors: the first executor's
// failure, as from RunStep (the caller aborts the world). REQUIRES: no two
// executors of one rank; every executor that a rank here waits for is here
// or driven elsewhere.
absl::Status RunStepsTogether(absl::Span<RankExecutor* const> executors,
                              std::vector<StepResult>& results);

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_EXEC_RANK_EXECUTOR_H_
