#include "stages/exec/rank_executor.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "stages/exec/wait_strategy.h"

namespace jitpipe {
namespace {

absl::Status CheckOptions(const Schedule& schedule, int rank, const Transport& transport,
                          const RankExecutorOptions& options) {
  if (!schedule.lowered) {
    return absl::FailedPreconditionError(
        "execution needs a lowered program; run jitpipe lower first");
  }
  if (rank < 0 || rank >= schedule.pp) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is outside pp ", schedule.pp));
  }
  if (options.dp < 1 || options.replica < 0 || options.replica >= options.dp) {
    return absl::InvalidArgumentError(absl::StrCat("replica ", options.replica,
                                                   " is outside dp ", options.dp));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the timeout must be positive");
  }
  const int world_rank = options.replica * schedule.pp + rank;
  if (transport.size() != schedule.pp * options.dp || transport.rank() != world_rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the transport is rank ", transport.rank(), " of ", transport.size(),
        " but pipeline rank ", rank, " of replica ", options.replica, " is world rank ",
        world_rank, " of pp ", schedule.pp, " x dp ", options.dp));
  }
  return absl::OkStatus();
}

// The stage calls' context: the provider's memory space; the device and
// stream given, or a device transport's.
ExecutionContext ContextOf(const BufferProvider& buffers, const Transport& transport,
                           const RankExecutorOptions& options) {
  ExecutionContext ctx{buffers.memory_space(), options.device, options.stream};
  if (const DeviceStreams* device = transport.device_streams(); device != nullptr) {
    if (ctx.device < 0) ctx.device = device->device;
    if (ctx.stream == nullptr) ctx.stream = device->compute;
  }
  return ctx;
}

Group DataParallelGroupOf(int rank, int pp, int dp) {
  Group group;
  for (int k = 0; k < dp; ++k) group.ranks.push_back(rank + k * pp);
  return group;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RankExecutor>> RankExecutor::Create(
    const Schedule& schedule, const Executable& executable, int rank, Transport* transport,
    absl::Span<Stage* const> stages, BufferProvider* buffers, FlightRecorder* recorder,
    const RankExecutorOptions& options) {
  RETURN_IF_ERROR(CheckOptions(schedule, rank, *transport, options));
  RETURN_IF_ERROR(CheckExecutableFits(schedule, executable));
  if (buffers->memory_space() == MemorySpace::kDevice &&
      ContextOf(*buffers, *transport, options).device < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank, ": the buffer provider hands out device memory but no device was given"));
  }
  std::vector<Stage*> by_stage(schedule.num_stages(), nullptr);
  for (int s = 0; s < schedule.num_stages(); ++s) {
    if (schedule.RankOf(s) != rank) continue;
    if (static_cast<size_t>(s) >= stages.size() || stages[s] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank, " holds stage ", s, " but no Stage was given for it"));
    }
    by_stage[s] = stages[s];
  }
  std::unique_ptr<RankExecutor> executor(new RankExecutor(
      schedule, executable, rank, transport, std::move(by_stage), buffers, recorder, options));
  RETURN_IF_ERROR(executor->CheckSizes());
  return executor;
}

// Precomputes what the step loop would otherwise look up or format per
// action. Index spaces: step i (= program index), part index into
// exe_.parts, RECV slot (the rank's receives, numbered in program order),
// transfer id (over the schedule), buffer id (the rank's plan).
RankExecutor::RankExecutor(const Schedule& schedule, const Executable& executable, int rank,
                           Transport* transport, std::vector<Stage*> stages,
                           BufferProvider* buffers, FlightRecorder* recorder,
                           const RankExecutorOptions& options)
    : schedule_(schedule),
      executable_(executable),
      exe_(executable.ranks[rank]),
      rank_(rank),
      world_rank_(options.replica * schedule.pp + rank),
      transport_(transport),
      stages_(std::move(stages)),
      buffers_(buffers),
      recorder_(recorder),
      options_(options),
      context_(ContextOf(*buffers, *transport, options)),
      release_after_requests_(buffers->ReleasesAfterRequests()),
      allocate_after_sends_(buffers->ReusesReleasedBytes() && !release_after_requests_),
      dp_group_(DataParallelGroupOf(rank, schedule.pp, options.dp)),
      dp_member_(options.replica),
      cursor_(CursorOf(schedule, executable, rank)) {
  const RankProgram& program = schedule.ranks[rank];
  texts_.reserve(exe_.steps.size());
  infos_.resize(exe_.steps.size());
  recv_slot_.assign(exe_.steps.size(), -1);
  for (size_t i = 0; i < exe_.steps.size(); ++i) {
    const ExecStep& step = exe_.steps[i];
    texts_.push_back(program[step.index].ToString());
    if (IsSendRecv(step.kind) || step.kind == ActionKind::kReduceGrad) {
      infos_[i] = OpInfo{step.stage, step.microbatch, step.index, texts_.back()};
    }
    if (IsRecv(step.kind)) recv_slot_[i] = num_recv_slots_++;
  }
  zero_on_alloc_.assign(exe_.buffer_bytes.size(), false);
  param_grad_of_.assign(schedule.num_stages(), kNoBuffer);
  for (const ExecPart& part : exe_.parts) {
    if (part.buffers.param_grad != kNoBuffer) {
      zero_on_alloc_[part.buffers.param_grad] = true;
      param_grad_of_[part.stage] = part.buffers.param_grad;
    }
  }
  span_of_.resize(exe_.buffer_bytes.size());
  recv_request_.resize(num_recv_slots_);
  recv_state_.resize(num_recv_slots_);
  recv_span_.resize(num_recv_slots_);
  pending_recvs_.reserve(num_recv_slots_);
  pending_sends_.reserve(exe_.steps.size());
  wait_ = WaitStrategy::For(*this);
}

RankExecutor::~RankExecutor() = default;

// The plan's stash segments of a part must be those its Stage declares.
absl::Status RankExecutor::CheckStash(const StageSizes& z, const PartBuffers& b, int stage) const {
  const std::vector<int64_t> declared = z.StashAllocations();
  std::vector<int64_t> planned;
  for (int32_t k = 0; k < b.stash_segments; ++k) planned.push_back(exe_.buffer_bytes[b.stash + k]);
  if (planned == declared) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "stage ", stage, " needs its stash as buffers of ", absl::StrJoin(declared, ", "),
      " bytes but the plan has buffers of ", absl::StrJoin(planned, ", "),
      " bytes (plan with the Model built from the stages' Sizes())"));
}

// Every part's buffers must have the sizes its Stage reports.
absl::Status RankExecutor::CheckSizes() const {
  std::vector<StageSizes> sizes(stages_.size());
  for (size_t s = 0; s < stages_.size(); ++s) {
    if (stages_[s] != nullptr) sizes[s] = stages_[s]->Sizes();
  }
  for (size_t i = 0; i < exe_.steps.size(); ++i) {
    for (const ExecPart& part : exe_.PartsOf(exe_.steps[i])) {
      const StageSizes& z = sizes[part.stage];
      const PartBuffers& b = part.buffers;
      const std::pair<int32_t, std::pair<const char*, int64_t>> roles[] = {
          {b.input, {"input", z.input_bytes}},         {b.output, {"output", z.output_bytes}},
          {b.output_grad, {"output_grad", z.output_bytes}},
          {b.input_grad, {"input_grad", z.input_bytes}}, {b.param_grad, {"param_grad", z.param_grad_bytes}}};
      for (const auto& [id, role] : roles) {
        if (id == kNoBuffer || exe_.buffer_bytes[id] == role.second) continue;
        return InContext(
            absl::InvalidArgumentError(absl::StrCat(
                "stage ", part.stage, " needs ", role.second, "-byte ", role.first,
                " buffers but the plan has ", exe_.buffer_bytes[id],
                " (plan with the Model built from the stages' Sizes())")),
            static_cast<int32_t>(i));
      }
      if (b.stash == kNoBuffer) continue;
      if (absl::Status stash = CheckStash(z, b, part.stage); !stash.ok()) {
        return InContext(stash, static_cast<int32_t>(i));
      }
    }
  }
  return absl::OkStatus();
}

double RankExecutor::NowUs() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() -
                                                   options_.origin)
      .count();
}

absl::Status RankExecutor::InContext(const absl::Status& status, int32_t i) const {
  std::string where = i >= 0 && i < static_cast<int32_t>(exe_.steps.size())
                          ? WhereInProgram(world_rank_, exe_.steps[i].index, texts_[i])
                          : absl::StrCat("rank ", world_rank_);
  if (options_.dp > 1) {
    absl::StrAppend(&where, " (pipeline rank ", rank_, ", replica ", options_.replica, ")");
  }
  return absl::Status(status.code(), absl::StrCat(where, ": ", status.message()));
}

absl::StatusOr<StepResult> RankExecutor::RunStep() {
  RETURN_IF_ERROR(BeginStep());
  while (true) {
    ASSIGN_OR_RETURN(Progress progress, Advance());
    if (progress.done) return TakeResult();
    if (absl::Status s = WaitBlocked(); !s.ok()) {
      failed_ = true;
      return InContext(s, cursor_.current().index);
    }
  }
}

absl::Status RankExecutor::BeginStep() {
  if (failed_) return absl::FailedPreconditionError("the executor failed in an earlier step");
  if (in_step_) return absl::FailedPreconditionError("a step is in progress");
  in_step_ = true;
  cursor_ = CursorOf(schedule_, executable_, rank_);
  result_ = StepResult();
  if (options_.record_timeline) {
    result_.timeline.spans.reserve(exe_.steps.size() + 8);
    result_.timeline.memory.reserve(2 * exe_.steps.size() + 4);
  }
  std::fill(recv_state_.begin(), recv_state_.end(), RecvState::kNotPosted);
  pending_recvs_.clear();
  pending_sends_.clear();
  waited_reduce_us_ = 0;
  reductions_started_ = 0;
  wait_->BeginStep();
  blocked_ = Blocked();
  position_ = -1;
  buffers_->ResetPeak();
  result_.start_us = NowUs();
  return absl::OkStatus();
}

absl::StatusOr<RankExecutor::Progress> RankExecutor::Advance() {
  if (failed_ || !in_step_) {
    return absl::FailedPreconditionError(failed_ ? "the executor failed in an earlier step"
                                                 : "no step in progress");
  }
  Progress progress;
  while (!cursor_.done()) {
    const Instruction& in = cursor_.current();
    if (in.index != position_ && in.index >= 0 && in.index < cursor_.size()) {
      position_ = in.index;
      if (recorder_ != nullptr) recorder_->SetPosition(exe_.steps[in.index].index, texts_[in.index]);
    }
    const Step step = in.step;
    const int32_t index = in.index;
    absl::StatusOr<bool> went = Execute(in);
    if (went.ok() && *went) {
      blocked_ = Blocked();
      progress.moved = true;
      cursor_.Advance();
      // An action without releases: its pending transfers are tested now.
      if (step == Step::kRun && cursor_.current().step != Step::kRelease) {
        went = AfterAction();
      }
    }
    if (!went.ok()) {
      failed_ = true;
      return InContext(went.status(), index);
    }
    if (!*went) return progress;
  }
  progress.done = true;
  return progress;
}

StepResult RankExecutor::TakeResult() {
  in_step_ = false;
  result_.peak_bytes = buffers_->peak_bytes();
  return std::move(result_);
}

absl::StatusOr<bool> RankExecutor::Execute(const Instruction& in) {
  switch (in.step) {
    case Step::kBegin:
      RETURN_IF_ERROR(Allocate(in.buffers));
      SampleMemory();
      return true;
    case Step::kWait:
      return ReachWait(in.wait);
    case Step::kAllocate:
      if (allocate_after_sends_ && !pending_sends_.empty()) {
        ASSIGN_OR_RETURN(bool sent, SendsDone());
        if (!sent) return Block(Blocked::Kind::kSend, 0);
      }
      RETURN_IF_ERROR(Allocate(in.buffers));
      SampleMemory();
      return true;
    case Step::kRun:
      RETURN_IF_ERROR(RunAction(in.index));
      return true;
    case Step::kRelease:
      Release(in.buffers);
      return AfterAction();
    case Step::kEnd:
      return wait_->EndStep();
    case Step::kDone:
      return true;
  }
  return absl::InternalError("an unknown instruction");
}

absl::StatusOr<bool> RankExecutor::ReachWait(const Wait& wait) {
  switch (wait.kind) {
    case WaitKind::kTransfer:
      return wait_->ReachRecv(recv_slot_[wait.local]);
    case WaitKind::kSendDone:
      return SendDone(wait.local);
    case WaitKind::kReduction:
      return wait_->ReachReduction(wait.local);
    default:  // kLocal, an UNSHARD: nothing to gather here
      return true;
  }
}

// A WAIT_SEND: the SEND at `send` has completed once it is no longer
// pending (a completion found earlier released it already).
absl::StatusOr<bool> RankExecutor::SendDone(int32_t send) {
  for (size_t k = 0; k < pending_sends_.size(); ++k) {
    if (pending_sends_[k].step != send) continue;
    const PendingSend pending = pending_sends_[k];
    ASSIGN_OR_RETURN(bool done, transport_->Test(pending.request));
    if (!done) return Block(Blocked::Kind::kSend, static_cast<int32_t>(k));
    if (pending.span >= 0) result_.timeline.spans[pending.span].end_us = NowUs();
    ReleaseSent(pending);
    pending_sends_.erase(pending_sends_.begin() + static_cast<std::ptrdiff_t>(k));
    return true;
  }
  return true;
}

absl::Status RankExecutor::RunAction(int32_t i) {
  const ExecStep& step = exe_.steps[i];
  if (IsCompute(step.kind)) {
    const double start = NowUs();
    for (const ExecPart& part : exe_.PartsOf(step)) RETURN_IF_ERROR(RunPart(part));
    if (options_.record_timeline) {
      result_.timeline.spans.push_back(
          {world_rank_, TimelineTrack::kCompute, step.index, -1, start, NowUs()});
    }
    return absl::OkStatus();
  }
  if (IsSend(step.kind)) return PostSend(i, step, cursor_.current().buffers);
  if (IsRecv(step.kind)) return PostRecv(i, step);
  // A group of one has nothing to reduce: the sum over one replica is its
  // own gradients, so no collective runs (it cost 38-1283 us of "exposed
  // reduction" at dp 1; issue 35) and a WAIT_REDUCE_GRAD finds none started.
  if (step.kind == ActionKind::kReduceGrad && step.buffer != kNoBuffer &&
      dp_group_.ranks.size() > 1) {
    ++reductions_started_;
    return wait_->StartReduction(i, Bytes(step.buffer));
  }
  return absl::OkStatus();  // UNSHARD, RESHARD: the plan's memory events only
}

StashView RankExecutor::Stash(const PartBuffers& b) {
  if (b.stash_segments <= 1) return StashView(Bytes(b.stash));
  stash_spans_.clear();
  for (int32_t k = 0; k < b.stash_segments; ++k) stash_spans_.push_back(Bytes(b.stash + k));
  return StashView(absl::MakeConstSpan(stash_spans_));
}

// Calls the part's Stage with the part's buffers (empty where the role does
// not exist). A chain's first stage loads its input before the forward; a
// chain's last stage adds its loss after it.
absl::Status RankExecutor::RunPart(const ExecPart& part) {
  Stage& stage = *stages_[part.stage];
  const PartBuffers& b = part.buffers;
  const int mb = part.microbatch;
  switch (part.kind) {
    case ActionKind::kForward:
      if (schedule_.IsFirstStage(part.stage)) {
        RETURN_IF_ERROR(stage.LoadInput(context_, mb, Bytes(b.input)));
      }
      RETURN_IF_ERROR(stage.Forward(context_, mb, Bytes(b.input), Bytes(b.output), Stash(b)));
      if (schedule_.IsLastStage(part.stage)) wait_->AddLoss(part.stage, mb);
      return absl::OkStatus();
    case ActionKind::kBackwardInput:
      return stage.BackwardInput(context_, mb, Bytes(b.output_grad), Stash(b), Bytes(b.input_grad));
    case ActionKind::kBackwardWeight:
      return stage.BackwardWeight(context_, mb, Bytes(b.input), Bytes(b.output_grad),
                                  Stash(b), Bytes(b.param_grad));
    case ActionKind::kBackward:
      return stage.Backward(context_, mb, Bytes(b.input), Bytes(b.output_grad), Stash(b),
                            Bytes(b.input_grad), Bytes(b.param_grad));
    default:
      return absl::InternalError(absl::StrCat("a compute part of kind ", KindName(part.kind)));
  }
}

absl::Status RankExecutor::PostSend(int32_t i, const ExecStep& step,
                                    absl::Span<const int32_t> sent) {
  const Transfer& t = executable_.transfers[step.transfer];
  const int peer = options_.replica * schedule_.pp + t.dst_rank;
  const double start = NowUs();
  ASSIGN_OR_RETURN(RequestId id, transport_->PostSend(peer, t.tag, Bytes(step.buffer), infos_[i]));
  int32_t span = -1;
  if (options_.record_timeline) {
    span = static_cast<int32_t>(result_.timeline.spans.size());
    result_.timeline.spans.push_back(
        {world_rank_, TimelineTrack::kSend, step.index, step.transfer, start, start});
  }
  pending_sends_.push_back({id, i, span});
  if (release_after_requests_) {
    for (int32_t buffer : sent) {
      buffers_->ReleaseAfter(buffer, id);
      span_of_[buffer] = MutableBytes();
    }
  }
  return absl::OkStatus();
}

absl::Status RankExecutor::PostRecv(int32_t i, const ExecStep& step) {
  const Transfer& t = executable_.transfers[step.transfer];
  const int peer = options_.replica * schedule_.pp + t.src_rank;
  const int32_t slot = recv_slot_[i];
  const double start = NowUs();
  ASSIGN_OR_RETURN(recv_request_[slot],
                   transport_->PostRecv(peer, t.tag, Bytes(step.buffer), infos_[i]));
  recv_state_[slot] = RecvState::kPending;
  recv_span_[slot] = -1;
  if (options_.record_timeline) {
    recv_span_[slot] = static_cast<int32_t>(result_.timeline.spans.size());
    result_.timeline.spans.push_back(
        {world_rank_, TimelineTrack::kRecv, step.index, step.transfer, start, start});
  }
  pending_recvs_.push_back(slot);
  return absl::OkStatus();
}

absl::StatusOr<bool> RankExecutor::AfterAction() {
  if (wait_->PollsAfterAction() && (!pending_sends_.empty() || !pending_recvs_.empty())) RETURN_IF_ERROR(Poll());
  SampleMemory();
  return true;
}

// Marks the receive in `slot` done once the transport says so.
absl::StatusOr<bool> RankExecutor::RecvDone(int32_t slot) {
  if (recv_state_[slot] == RecvState::kDone) return true;
  if (recv_state_[slot] == RecvState::kNotPosted) {
    return absl::InternalError("consumes a transfer whose RECV was not posted");
  }
  ASSIGN_OR_RETURN(bool done, transport_->Test(recv_request_[slot]));
  if (!done) return false;
  RecvCompleted(slot);
  return true;
}

void RankExecutor::RecvCompleted(int32_t slot) {
  recv_state_[slot] = RecvState::kDone;
  if (recv_span_[slot] >= 0) result_.timeline.spans[recv_span_[slot]].end_us = NowUs();
  pending_recvs_.erase(std::find(pending_recvs_.begin(), pending_recvs_.end(), slot));
}

absl::Status RankExecutor::Poll() {
  RETURN_IF_ERROR(SendsDone().status());
  for (size_t k = 0; k < pending_recvs_.size();) {
    const int32_t slot = pending_recvs_[k];
    ASSIGN_OR_RETURN(bool done, transport_->Test(recv_request_[slot]));
    if (!done) {
      ++k;
      continue;
    }
    recv_state_[slot] = RecvState::kDone;
    if (recv_span_[slot] >= 0) result_.timeline.spans[recv_span_[slot]].end_us = NowUs();
    pending_recvs_.erase(pending_recvs_.begin() + static_cast<std::ptrdiff_t>(k));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> RankExecutor::SendsDone() {
  for (size_t k = 0; k < pending_sends_.size();) {
    const PendingSend& send = pending_sends_[k];
    ASSIGN_OR_RETURN(bool done, transport_->Test(send.request));
    if (!done) {
      ++k;
      continue;
    }
    if (send.span >= 0) result_.timeline.spans[send.span].end_us = NowUs();
    ReleaseSent(send);
    pending_sends_.erase(pending_sends_.begin() + static_cast<std::ptrdiff_t>(k));
  }
  return pending_sends_.empty();
}

void RankExecutor::ReleaseSent(const PendingSend& send) {
  const absl::Span<const int32_t> ids = exe_.memory.ReleasedOnCompletion(send.step);
  if (!release_after_requests_) {
    Release(ids);
    return;
  }
  buffers_->RequestCompleted(send.request);
  for (int32_t id : ids) {
    live_by_category_[static_cast<int>(exe_.buffer_category[id])] -= exe_.buffer_bytes[id];
    memory_changed_ = true;
  }
}

absl::StatusOr<bool> RankExecutor::Block(Blocked::Kind kind, int32_t slot) {
  const absl::Time now = absl::Now();
  if (blocked_.kind != kind || blocked_.slot != slot) blocked_ = {kind, slot, now};
  if (now - blocked_.since <= options_.timeout) return false;
  return TimedOut();
}

absl::Status RankExecutor::TimedOut() const {
  return absl::DeadlineExceededError(absl::StrCat(
      "timed out after ", absl::FormatDuration(options_.timeout), " waiting for ",
      DescribeBlocked()));
}

// The operation in the words the transports use for it ("receive 1RECV_F1
// from rank 0 (index 2)").
std::string RankExecutor::DescribeBlocked() const {
  auto op = [&](absl::string_view verb, int32_t i, absl::string_view peer, int32_t peer_rank) {
    const int world_peer = options_.replica * schedule_.pp + peer_rank;
    return absl::StrCat(verb, " ", texts_[i], " ", peer, " rank ", world_peer, " (index ",
                        exe_.steps[i].index, ")");
  };
  switch (blocked_.kind) {
    case Blocked::Kind::kRecv:
    case Blocked::Kind::kRecvIssue: {
      const int32_t i = static_cast<int32_t>(
          std::find(recv_slot_.begin(), recv_slot_.end(), blocked_.slot) - recv_slot_.begin());
      return op("receive", i, "from", executable_.transfers[exe_.steps[i].transfer].src_rank);
    }
    case Blocked::Kind::kSend: {
      const int32_t i = pending_sends_[blocked_.slot].step;
      return op("send", i, "to", executable_.transfers[exe_.steps[i].transfer].dst_rank);
    }
    case Blocked::Kind::kReduction:
      return absl::StrCat("the gradient reduction of ", texts_[blocked_.slot], " (index ",
                          exe_.steps[blocked_.slot].index, ")");
    case Blocked::Kind::kReductions:
      return "the gradient reductions";
    case Blocked::Kind::kMarker:
      return "the compute stream";
    case Blocked::Kind::kNone:
      break;
  }
  return "nothing";
}

// RunStep's wait: in the transport for a receive or a send, in the mode
// for the rest; once it is over the step goes on where it stopped.
absl::Status RankExecutor::WaitBlocked() {
  switch (blocked_.kind) {
    case Blocked::Kind::kRecv:
      RETURN_IF_ERROR(transport_->Wait(recv_request_[blocked_.slot], options_.timeout));
      RecvCompleted(blocked_.slot);
      return absl::OkStatus();
    case Blocked::Kind::kSend: {
      const PendingSend send = pending_sends_[blocked_.slot];
      RETURN_IF_ERROR(transport_->Wait(send.request, options_.timeout));
      if (send.span >= 0) result_.timeline.spans[send.span].end_us = NowUs();
      ReleaseSent(send);
      pending_sends_.erase(pending_sends_.begin() + blocked_.slot);
      return absl::OkStatus();
    }
    case Blocked::Kind::kNone:
      return absl::InternalError("waits for nothing");
    default:
      return wait_->WaitBlocked(blocked_);
  }
}

absl::StatusOr<bool> RankExecutor::TransfersDone() {
  if (!pending_sends_.empty()) {
    ASSIGN_OR_RETURN(bool sent, SendsDone());
    if (!sent) return Block(Blocked::Kind::kSend, 0);
  }
  while (!pending_recvs_.empty()) {
    const int32_t slot = pending_recvs_.front();
    ASSIGN_OR_RETURN(bool done, RecvDone(slot));
    if (!done) return Block(Blocked::Kind::kRecv, slot);
  }
  return true;
}

absl::Status RankExecutor::SetCapturing(bool capturing) {
  if (in_step_) return absl::FailedPreconditionError("a step is in progress");
  if (capturing && (transport_->device_streams() == nullptr || !release_after_requests_)) {
    return absl::FailedPreconditionError(
        "only a step over a device transport, with a provider that releases sent buffers after "
        "their requests, can be captured");
  }
  if (capturing != capturing_) {
    wait_ = capturing ? std::make_unique<GraphCaptureWait>(*this) : WaitStrategy::For(*this);
  }
  capturing_ = capturing;
  return absl::OkStatus();
}

absl::Status RankExecutor::FinishStep() {
  const double reduced = NowUs();
  result_.exposed_reduce_us =
      reductions_started_ == 0 ? 0 : reduced - result_.compute_end_us + waited_reduce_us_;
  for (size_t s = 0; s < stages_.size(); ++s) {
    if (stages_[s] == nullptr) continue;
    absl::Status status = stages_[s]->FinishStep(context_, Bytes(param_grad_of_[s]));
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("stage ", s, " FinishStep: ", status.message()));
    }
  }
  RETURN_IF_ERROR(wait_->AfterStagesFinished());
  Release(cursor_.current().buffers);  // the step-end buffers
  SampleMemory();
  CloseTimeline();
  result_.end_us = NowUs();
  return absl::OkStatus();
}

void RankExecutor::CloseTimeline() {
  const std::vector<ReductionSpan> spans = wait_->TakeReductionSpans();
  for (const ReductionSpan& r : spans) {
    if (options_.record_timeline) {
      result_.timeline.spans.push_back(
          {world_rank_, TimelineTrack::kReduce, r.index, -1, r.start_us, r.end_us});
    }
  }
  if (options_.record_timeline) {
    std::stable_sort(result_.timeline.spans.begin(), result_.timeline.spans.end(),
                     [](const TimelineSpan& a, const TimelineSpan& b) { return a.index < b.index; });
  }
}

absl::Status RankExecutor::Allocate(absl::Span<const int32_t> ids) {
  for (int32_t id : ids) {
    ASSIGN_OR_RETURN(span_of_[id], buffers_->Allocate(id));
    if (zero_on_alloc_[id] && !span_of_[id].empty()) buffers_->Zero(span_of_[id]);
    live_by_category_[static_cast<int>(exe_.buffer_category[id])] += exe_.buffer_bytes[id];
    memory_changed_ = true;
  }
  return absl::OkStatus();
}

void RankExecutor::Release(absl::Span<const int32_t> ids) {
  for (int32_t id : ids) {
    buffers_->Release(id);
    span_of_[id] = MutableBytes();
    live_by_category_[static_cast<int>(exe_.buffer_category[id])] -= exe_.buffer_bytes[id];
    memory_changed_ = true;
  }
}

void RankExecutor::SampleMemory() {
  if (!memory_changed_ || !options_.record_timeline) return;
  memory_changed_ = false;
  result_.timeline.memory.push_back({world_rank_, NowUs(), live_by_category_});
}

absl::Status RunStepsTogether(absl::Span<RankExecutor* const> executors,
                              std::vector<StepResult>& results) {
  for (RankExecutor* e : executors) RETURN_IF_ERROR(e->BeginStep());
  std::vector<bool> done(executors.size(), false);
  size_t remaining = executors.size();
  int idle_rounds = 0;
  while (remaining > 0) {
    bool moved = false;
    for (size_t k = 0; k < executors.size(); ++k) {
      if (done[k]) continue;
      ASSIGN_OR_RETURN(RankExecutor::Progress p, executors[k]->Advance());
      moved = moved || p.moved;
      if (p.done) {
        done[k] = true;
        --remaining;
      }
    }
    // Nothing moved: every rank here waits on a transfer or a reduction
    // in flight. Yield for a while, then sleep (ranks may outnumber cores).
    idle_rounds = moved ? 0 : idle_rounds + 1;
    if (idle_rounds > 64) {
      absl::SleepFor(absl::Microseconds(50));
    } else if (idle_rounds > 0) {
      std::this_thread::yield();
    }
  }
  results.clear();
  for (RankExecutor* e : executors) results.push_back(e->TakeResult());
  return absl::OkStatus();
}

}  // namespace jitpipe
