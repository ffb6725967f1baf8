#include "stages/rank_executor.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

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

}  // namespace

absl::StatusOr<std::unique_ptr<RankExecutor>> RankExecutor::Create(
    const Schedule& schedule, const Executable& executable, int rank, Transport* transport,
    absl::Span<Stage* const> stages, BufferProvider* buffers, FlightRecorder* recorder,
    const RankExecutorOptions& options) {
  RETURN_IF_ERROR(CheckOptions(schedule, rank, *transport, options));
  if (buffers->memory_space() == MemorySpace::kDevice && options.device < 0) {
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
// action. Index spaces: step position i (= program index order), part
// index into exe_.parts, RECV slot (the rank's receives, numbered in program
// order), transfer id (over the schedule), buffer id (the rank's plan).
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
      context_{buffers->memory_space(), options.device, options.stream},
      release_after_requests_(buffers->ReleasesAfterRequests()) {
  const RankProgram& program = schedule.ranks[rank];
  absl::flat_hash_map<int32_t, int32_t> slot_of_transfer;
  texts_.reserve(exe_.steps.size());
  infos_.resize(exe_.steps.size());
  recv_slot_.assign(exe_.steps.size(), -1);
  for (size_t i = 0; i < exe_.steps.size(); ++i) {
    const ExecStep& step = exe_.steps[i];
    texts_.push_back(program[step.index].ToString());
    if (IsSendRecv(step.kind) || step.kind == ActionKind::kReduceGrad) {
      infos_[i] = OpInfo{step.stage, step.microbatch, step.index, texts_.back()};
    }
    if (IsRecv(step.kind)) {
      recv_slot_[i] = num_recv_slots_;
      slot_of_transfer[step.transfer] = num_recv_slots_++;
    }
  }
  part_slot_.assign(exe_.parts.size(), -1);
  zero_on_alloc_.assign(exe_.buffer_bytes.size(), false);
  param_grad_of_.assign(schedule.num_stages(), kNoBuffer);
  for (size_t p = 0; p < exe_.parts.size(); ++p) {
    const ExecPart& part = exe_.parts[p];
    if (part.waits_for != kNoTransfer) {
      auto it = slot_of_transfer.find(part.waits_for);
      if (it != slot_of_transfer.end()) part_slot_[p] = it->second;
    }
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
  if (options_.record_timeline) {
    timeline_.spans.reserve(exe_.steps.size() + 8);
    timeline_.memory.reserve(2 * exe_.steps.size() + 4);
  }
  Group group;
  for (int k = 0; k < options_.dp; ++k) group.ranks.push_back(rank + k * schedule.pp);
  reductions_ = std::make_unique<ReductionWorker>(transport, std::move(group), options_.reduce,
                                                  options_.timeout, options_.origin);
}

RankExecutor::~RankExecutor() = default;

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
          {b.stash, {"stash", z.stash_bytes}},         {b.output_grad, {"output_grad", z.output_bytes}},
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
  std::string where = absl::StrCat("rank ", world_rank_);
  if (options_.dp > 1) {
    absl::StrAppend(&where, " (pipeline rank ", rank_, ", replica ", options_.replica, ")");
  }
  if (i >= 0) {
    absl::StrAppend(&where, ", index ", exe_.steps[i].index, " (", texts_[i], ")");
  }
  return absl::Status(status.code(), absl::StrCat(where, ": ", status.message()));
}

absl::StatusOr<StepResult> RankExecutor::RunStep() {
  if (failed_) return absl::FailedPreconditionError("the executor failed in an earlier step");
  StepResult result;
  std::fill(recv_state_.begin(), recv_state_.end(), RecvState::kNotPosted);
  pending_recvs_.clear();
  pending_sends_.clear();
  timeline_.spans.clear();
  timeline_.memory.clear();
  buffers_->ResetPeak();
  result.start_us = NowUs();
  absl::Status status = Allocate(exe_.allocate_at_start);
  SampleMemory();
  for (int32_t i = 0; status.ok() && i < static_cast<int32_t>(exe_.steps.size()); ++i) {
    status = RunProgramStep(i, result);
    if (!status.ok()) status = InContext(status, i);
  }
  if (status.ok()) {
    status = CompleteAll();
    if (!status.ok()) status = InContext(status, -1);
  }
  if (status.ok()) status = FinishStep(result);
  if (!status.ok()) {
    failed_ = true;
    return status;
  }
  result.peak_bytes = buffers_->peak_bytes();
  result.timeline = timeline_;
  return result;
}

absl::Status RankExecutor::RunProgramStep(int32_t i, StepResult& result) {
  const ExecStep& step = exe_.steps[i];
  if (recorder_ != nullptr) recorder_->SetPosition(step.index, texts_[i]);
  if (buffers_->ReusesReleasedBytes() && !release_after_requests_ && !pending_sends_.empty() &&
      step.allocate_begin != step.allocate_end) {
    RETURN_IF_ERROR(CompleteSends());
  }
  RETURN_IF_ERROR(Allocate(exe_.AllocatedBefore(step)));
  SampleMemory();
  if (IsCompute(step.kind)) {
    // The compute span starts once the first part's input has arrived: the
    // wait before it shows on the recv track.
    double compute_start = -1;
    for (const ExecPart& part : exe_.PartsOf(step)) {
      const int32_t slot = part_slot_[&part - exe_.parts.data()];
      if (slot >= 0) RETURN_IF_ERROR(WaitRecv(slot));
      if (compute_start < 0) compute_start = NowUs();
      RETURN_IF_ERROR(RunPart(part, result));
    }
    if (options_.record_timeline) {
      timeline_.spans.push_back(
          {world_rank_, TimelineTrack::kCompute, step.index, -1, compute_start, NowUs()});
    }
  } else if (IsSend(step.kind)) {
    RETURN_IF_ERROR(PostSend(i, step));
  } else if (IsRecv(step.kind)) {
    RETURN_IF_ERROR(PostRecv(i, step));
  } else if (step.kind == ActionKind::kReduceGrad && step.buffer != kNoBuffer) {
    MutableBytes grads = Bytes(step.buffer);
    reductions_->Start({reinterpret_cast<float*>(grads.data()), grads.size() / sizeof(float)},
                       infos_[i]);
  }
  Release(exe_.ReleasedAfter(step));
  if (!pending_sends_.empty() || !pending_recvs_.empty()) RETURN_IF_ERROR(Poll());
  SampleMemory();
  return absl::OkStatus();
}

// Calls the part's Stage with the part's buffers (empty where the role does
// not exist). A chain's first stage loads its input before the forward; a
// chain's last stage adds its loss after it.
absl::Status RankExecutor::RunPart(const ExecPart& part, StepResult& result) {
  Stage& stage = *stages_[part.stage];
  const PartBuffers& b = part.buffers;
  const int mb = part.microbatch;
  switch (part.kind) {
    case ActionKind::kForward:
      if (schedule_.IsFirstStage(part.stage)) {
        RETURN_IF_ERROR(stage.LoadInput(context_, mb, Bytes(b.input)));
      }
      RETURN_IF_ERROR(stage.Forward(context_, mb, Bytes(b.input), Bytes(b.output), Bytes(b.stash)));
      if (schedule_.IsLastStage(part.stage)) result.loss += stage.Loss(mb);
      return absl::OkStatus();
    case ActionKind::kBackwardInput:
      return stage.BackwardInput(context_, mb, Bytes(b.output_grad), Bytes(b.stash),
                                 Bytes(b.input_grad));
    case ActionKind::kBackwardWeight:
      return stage.BackwardWeight(context_, mb, Bytes(b.input), Bytes(b.output_grad),
                                  Bytes(b.stash), Bytes(b.param_grad));
    case ActionKind::kBackward:
      return stage.Backward(context_, mb, Bytes(b.input), Bytes(b.output_grad), Bytes(b.stash),
                            Bytes(b.input_grad), Bytes(b.param_grad));
    default:
      return absl::InternalError(absl::StrCat("a compute part of kind ", KindName(part.kind)));
  }
}

absl::Status RankExecutor::PostSend(int32_t i, const ExecStep& step) {
  const Transfer& t = executable_.transfers[step.transfer];
  const int peer = options_.replica * schedule_.pp + t.dst_rank;
  const double start = NowUs();
  ASSIGN_OR_RETURN(RequestId id, transport_->PostSend(peer, t.tag, Bytes(step.buffer), infos_[i]));
  int32_t span = -1;
  if (options_.record_timeline) {
    span = static_cast<int32_t>(timeline_.spans.size());
    timeline_.spans.push_back(
        {world_rank_, TimelineTrack::kSend, step.index, step.transfer, start, start});
  }
  pending_sends_.push_back({id, i, span});
  if (release_after_requests_) {
    for (int32_t buffer : exe_.ReleasedOnSend(step)) {
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
    recv_span_[slot] = static_cast<int32_t>(timeline_.spans.size());
    timeline_.spans.push_back(
        {world_rank_, TimelineTrack::kRecv, step.index, step.transfer, start, start});
  }
  pending_recvs_.push_back(slot);
  return absl::OkStatus();
}

absl::Status RankExecutor::WaitRecv(int32_t slot) {
  if (recv_state_[slot] == RecvState::kDone) return absl::OkStatus();
  if (recv_state_[slot] == RecvState::kNotPosted) {
    return absl::InternalError("consumes a transfer whose RECV was not posted");
  }
  RETURN_IF_ERROR(transport_->Wait(recv_request_[slot], options_.timeout));
  recv_state_[slot] = RecvState::kDone;
  if (recv_span_[slot] >= 0) timeline_.spans[recv_span_[slot]].end_us = NowUs();
  pending_recvs_.erase(std::find(pending_recvs_.begin(), pending_recvs_.end(), slot));
  return absl::OkStatus();
}

absl::Status RankExecutor::Poll() {
  for (size_t k = 0; k < pending_sends_.size();) {
    const PendingSend& send = pending_sends_[k];
    ASSIGN_OR_RETURN(bool done, transport_->Test(send.request));
    if (!done) {
      ++k;
      continue;
    }
    if (send.span >= 0) timeline_.spans[send.span].end_us = NowUs();
    ReleaseSent(send);
    pending_sends_.erase(pending_sends_.begin() + static_cast<std::ptrdiff_t>(k));
  }
  for (size_t k = 0; k < pending_recvs_.size();) {
    const int32_t slot = pending_recvs_[k];
    ASSIGN_OR_RETURN(bool done, transport_->Test(recv_request_[slot]));
    if (!done) {
      ++k;
      continue;
    }
    recv_state_[slot] = RecvState::kDone;
    if (recv_span_[slot] >= 0) timeline_.spans[recv_span_[slot]].end_us = NowUs();
    pending_recvs_.erase(pending_recvs_.begin() + static_cast<std::ptrdiff_t>(k));
  }
  return absl::OkStatus();
}

absl::Status RankExecutor::CompleteSends() {
  for (const PendingSend& send : pending_sends_) {
    RETURN_IF_ERROR(transport_->Wait(send.request, options_.timeout));
    if (send.span >= 0) timeline_.spans[send.span].end_us = NowUs();
    ReleaseSent(send);
  }
  pending_sends_.clear();
  return absl::OkStatus();
}

absl::Status RankExecutor::CompleteAll() {
  RETURN_IF_ERROR(CompleteSends());
  while (!pending_recvs_.empty()) RETURN_IF_ERROR(WaitRecv(pending_recvs_.back()));
  return absl::OkStatus();
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

void RankExecutor::ReleaseSent(const PendingSend& send) {
  const absl::Span<const int32_t> ids = exe_.ReleasedOnSend(exe_.steps[send.step]);
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
  timeline_.memory.push_back({world_rank_, NowUs(), live_by_category_});
}

// The end of the step: reductions waited for (the exposed part measured),
// FinishStep per stage with its reduced gradients, step-end buffers
// released, the reductions' spans merged into the timeline.
absl::Status RankExecutor::FinishStep(StepResult& result) {
  result.compute_end_us = NowUs();
  if (absl::Status s = reductions_->WaitAll(options_.timeout); !s.ok()) return InContext(s, -1);
  const double reduced = NowUs();
  result.exposed_reduce_us = reduced - result.compute_end_us;
  for (size_t s = 0; s < stages_.size(); ++s) {
    if (stages_[s] == nullptr) continue;
    absl::Status status = stages_[s]->FinishStep(context_, Bytes(param_grad_of_[s]));
    if (!status.ok()) {
      return InContext(absl::Status(status.code(), absl::StrCat("stage ", s, " FinishStep: ",
                                                                status.message())),
                       -1);
    }
  }
  Release(exe_.release_at_end);
  SampleMemory();
  for (const ReductionSpan& r : reductions_->TakeSpans()) {
    if (options_.record_timeline) {
      timeline_.spans.push_back(
          {world_rank_, TimelineTrack::kReduce, r.index, -1, r.start_us, r.end_us});
    }
  }
  if (options_.record_timeline) {
    std::stable_sort(timeline_.spans.begin(), timeline_.spans.end(),
                     [](const TimelineSpan& a, const TimelineSpan& b) { return a.index < b.index; });
  }
  result.end_us = NowUs();
  return absl::OkStatus();
}

}  // namespace jitpipe
