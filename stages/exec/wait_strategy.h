// How a rank executor waits: one implementation per mode, chosen once from
// the transport (and swapped only between steps, by SetCapturing), so the
// executor's instruction loop holds no mode flags. Each answers the same
// questions:
//
//   question                      HostBlockingWait          StreamOrderedWait
//   a compute's input RECV        Test; block the host      StreamWait: the compute
//                                 until it completed        stream waits on the device
//   REDUCE_GRAD                   the reduction thread      posted from this thread on
//                                 (reduction_worker.h)      the transport's reduce stream
//   WAIT_REDUCE_GRAD              until the thread ended    StreamWait on its request
//                                 it (time counts exposed)
//   a chain-final forward's loss  read at once              read after the step-end marker
//   poll transfers mid-step       after every action        only sends whose buffers the
//                                                           provider releases on completion
//   step end                      transfers, reductions     marker behind the compute
//                                                           stream, transfers, reductions;
//                                                           FinishStep's work awaited
//
// GraphCaptureWait (graph_capture_wait.cc) is StreamOrderedWait whose step
// ends without any host wait (the step is being captured into a CUDA graph).
// A WAIT_SEND, sends, receives, buffers and the timeline are the same in
// every mode and stay in the executor.
//
// The strategies are nested classes of RankExecutor: they read and write the
// step's state (result_, the pending transfers, blocked_) through the
// executor they were made for, which owns them and outlives them.
// Thread safety: that of the executor (one driving thread).
#ifndef JITPIPE_STAGES_EXEC_WAIT_STRATEGY_H_
#define JITPIPE_STAGES_EXEC_WAIT_STRATEGY_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/transport.h"
#include "stages/exec/rank_executor.h"
#include "stages/exec/reduction_worker.h"

namespace jitpipe {

class RankExecutor::WaitStrategy {
 public:
  explicit WaitStrategy(RankExecutor& executor) : x_(executor) {}
  virtual ~WaitStrategy() = default;
  WaitStrategy(const WaitStrategy&) = delete;
  WaitStrategy& operator=(const WaitStrategy&) = delete;

  // The mode for `executor`'s transport: stream-ordered over a device
  // transport (Transport::device_streams()), host-blocking otherwise.
  static std::unique_ptr<WaitStrategy> For(RankExecutor& executor);

  // Forgets the previous step's mode state (BeginStep).
  virtual void BeginStep() = 0;
  // A compute's input: the RECV at `slot` (posted). True once the compute
  // may run; false when it must wait (through Block).
  virtual absl::StatusOr<bool> ReachRecv(int32_t slot) = 0;
  // REDUCE_GRAD at program index i over a group of more than one: starts
  // the reduction of `grads`.
  virtual absl::Status StartReduction(int32_t i, MutableBytes grads) = 0;
  // WAIT_REDUCE_GRAD of the REDUCE_GRAD at index `reduce`.
  virtual absl::StatusOr<bool> ReachReduction(int32_t reduce) = 0;
  // A chain-final forward of (stage, mb) ran: its loss is the step's.
  virtual void AddLoss(int stage, int mb) = 0;
  // Whether the pending transfers are tested after an action.
  virtual bool PollsAfterAction() const = 0;
  // kEnd: true once the step has ended (FinishStep ran); false while it
  // waits. The default: ComputeDone, the pending transfers, ReductionsDone,
  // then FinishStep.
  virtual absl::StatusOr<bool> EndStep();
  // After the Stages' FinishStep calls: waits for what they enqueued.
  virtual absl::Status AfterStagesFinished() { return absl::OkStatus(); }
  // The step's reduction spans (its end).
  virtual std::vector<ReductionSpan> TakeReductionSpans() = 0;
  // RunStep's blocking wait for a kind of Blocked this mode made (not
  // kRecv, kSend: the executor's own).
  virtual absl::Status WaitBlocked(const Blocked& blocked) = 0;

 protected:
  // EndStep's pieces. The compute stream's work so far is done.
  virtual absl::StatusOr<bool> ComputeDone() { return true; }
  // Every reduction of the step has ended.
  virtual absl::StatusOr<bool> ReductionsDone() = 0;

  RankExecutor& x_;
};

// CPU transports: the host waits for everything; reductions run on the
// rank's reduction thread.
class RankExecutor::HostBlockingWait final : public WaitStrategy {
 public:
  explicit HostBlockingWait(RankExecutor& executor);

  void BeginStep() override;
  absl::StatusOr<bool> ReachRecv(int32_t slot) override;
  absl::Status StartReduction(int32_t i, MutableBytes grads) override;
  absl::StatusOr<bool> ReachReduction(int32_t reduce) override;
  void AddLoss(int stage, int mb) override;
  bool PollsAfterAction() const override { return true; }
  std::vector<ReductionSpan> TakeReductionSpans() override;
  absl::Status WaitBlocked(const Blocked& blocked) override;

 private:
  absl::StatusOr<bool> ReductionsDone() override;

  std::unique_ptr<ReductionWorker> reductions_;
  std::vector<int64_t> reduce_ticket_;   // per step: its REDUCE_GRAD's ticket, -1 if none
  double reduce_blocked_since_us_ = -1;  // a WAIT_REDUCE_GRAD blocked since then
};

// Device transports: waits are stream dependencies; the host waits only at
// the step's end (see rank_executor.h).
class RankExecutor::StreamOrderedWait : public WaitStrategy {
 public:
  explicit StreamOrderedWait(RankExecutor& executor) : WaitStrategy(executor) {}

  void BeginStep() override;
  absl::StatusOr<bool> ReachRecv(int32_t slot) override;
  absl::Status StartReduction(int32_t i, MutableBytes grads) override;
  absl::StatusOr<bool> ReachReduction(int32_t reduce) override;
  void AddLoss(int stage, int mb) override { loss_reads_.emplace_back(stage, mb); }
  bool PollsAfterAction() const override;
  absl::Status AfterStagesFinished() override;
  std::vector<ReductionSpan> TakeReductionSpans() override;
  absl::Status WaitBlocked(const Blocked& blocked) override;

 protected:
  // A reduction posted from this thread.
  struct PendingReduction {
    RequestId request = 0;
    int32_t index = 0;  // program index of the REDUCE_GRAD
    double start_us = 0;
  };

  // The compute stream's work so far: a marker behind it, its completion
  // the step's compute end; the losses read then.
  absl::StatusOr<bool> ComputeDone() override;
  absl::StatusOr<bool> ReductionsDone() override;

  std::vector<PendingReduction> reductions_;  // posted, not seen complete
  std::vector<ReductionSpan> reduction_spans_;
  // The (stage, microbatch) of each chain-final forward this step, whose
  // losses a device stage has written only once the compute stream reached
  // them (read when the step-end marker has completed).
  std::vector<std::pair<int, int>> loss_reads_;
  RequestId marker_ = 0;
  enum class MarkerState : uint8_t { kNone, kPosted, kDone } marker_state_ = MarkerState::kNone;
};

// A device step being captured into a CUDA graph (SetCapturing): enqueued
// as StreamOrderedWait enqueues it; its end tests and waits for nothing.
class RankExecutor::GraphCaptureWait final : public StreamOrderedWait {
 public:
  explicit GraphCaptureWait(RankExecutor& executor) : StreamOrderedWait(executor) {}

  absl::StatusOr<bool> EndStep() override;
  absl::Status AfterStagesFinished() override { return absl::OkStatus(); }
};

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_EXEC_WAIT_STRATEGY_H_
