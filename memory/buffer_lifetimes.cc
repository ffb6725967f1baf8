#include "memory/buffer_lifetimes.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "memory/program_slots.h"

namespace jitpipe {
namespace {

// Builds one rank's buffers from its ProgramSlots (see program_slots.h for
// the index spaces).
class LifetimeBuilder {
 public:
  LifetimeBuilder(const ProgramSlots& slots, const Model& model, const LifetimeOptions& options)
      : slots_(slots), model_(model), options_(options), n_(slots.num_actions()) {
    for (int stage : slots.stages()) costs_.push_back(model.ForStage(stage));
  }

  RankBuffers Build(int rank);

 private:
  void AddActivations(int stage, int mb);
  void AddGradients(int stage, int mb);
  void AddStageBuffers(int stage);
  const StageCost& Cost(int stage) const { return costs_[slots_.LocalOf(stage)]; }
  bool Eager() const { return options_.policy == MemoryPolicy::kEager; }
  int ReceiveAt(int recv, int consumer) const;
  // Interval setters: made at `at`; received by `recv` for `consumer`; sent by `send`.
  static Buffer Make(BufferKind kind, int stage, int mb, int64_t bytes);
  static void Produced(Buffer& b, int at, int last_use);
  void Received(Buffer& b, int recv, int consumer, int last_use) const;
  void Sent(Buffer& b, int at, int send, int wait) const;
  void Add(const Buffer& b) { buffers_.push_back(b); }

  const ProgramSlots& slots_;
  const Model& model_;
  const LifetimeOptions options_;
  const int n_;
  std::vector<StageCost> costs_;  // per local stage
  std::vector<Buffer> buffers_;
};

// Where a receive buffer is allocated under jit: at the RECV, or `prefetch`
// compute actions before the consumer when that is earlier.
int LifetimeBuilder::ReceiveAt(int recv, int consumer) const {
  if (options_.prefetch <= 0) return recv;
  return std::min(recv, slots_.ComputeActionBefore(consumer, options_.prefetch));
}

Buffer LifetimeBuilder::Make(BufferKind kind, int stage, int mb, int64_t bytes) {
  Buffer b;
  b.kind = kind;
  b.stage = stage;
  b.microbatch = mb;
  b.bytes = bytes;
  return b;
}

void LifetimeBuilder::Produced(Buffer& b, int at, int last_use) {
  b.alloc_index = b.needed_from = at;
  b.free_index = b.needed_until = last_use;
}

void LifetimeBuilder::Received(Buffer& b, int recv, int consumer, int last_use) const {
  b.received = true;
  b.needed_from = consumer;
  b.needed_until = last_use;
  b.alloc_index = Eager() ? 0 : ReceiveAt(recv, consumer);
  b.alloc_timing = Eager() ? AllocTiming::kStepStart : AllocTiming::kBeforeAction;
  b.free_index = Eager() ? n_ - 1 : last_use;
  b.free_timing = Eager() ? FreeTiming::kStepEnd : FreeTiming::kAfterAction;
}

// `wait` is the send's WAIT_SEND (kNoSlot: none): jit frees the buffer after
// it, else once the transfer completes (or, SendRelease::kStepEnd, at the
// step's end).
void LifetimeBuilder::Sent(Buffer& b, int at, int send, int wait) const {
  b.alloc_index = b.needed_from = b.needed_until = at;
  if (Eager()) {
    b.free_index = n_ - 1;
    b.free_timing = FreeTiming::kStepEnd;
  } else if (wait != kNoSlot) {
    b.free_index = wait;
    b.free_timing = FreeTiming::kAfterAction;
  } else if (options_.send_release == SendRelease::kStepEnd) {
    b.free_index = n_ - 1;
    b.free_timing = FreeTiming::kStepEnd;
  } else {
    b.free_index = b.send_index = send;
    b.free_timing = FreeTiming::kAfterSend;
  }
}

// Input, stash and output of (stage, mb), all from its F.
void LifetimeBuilder::AddActivations(int stage, int mb) {
  const MicrobatchSlots sl = slots_.At(stage, mb);
  const StageCost& cost = Cost(stage);
  const int last_input_use = std::max({sl.f, sl.w, sl.b});
  if (!slots_.PrevLocal(stage)) {  // else the output of stage - 1 is this input
    Buffer input = Make(BufferKind::kInput, stage, mb, cost.input_bytes);
    if (slots_.PrevRemote(stage)) {
      Received(input, sl.recv_f, sl.f, last_input_use);
    } else {
      Produced(input, sl.f, last_input_use);
    }
    Add(input);
  }
  // One buffer per stash segment, consecutive ids, segment order.
  const int32_t segments = std::max<int32_t>(1, static_cast<int32_t>(cost.stash_segments.size()));
  for (int32_t k = 0; k < segments; ++k) {
    Buffer stash = Make(BufferKind::kStash, stage, mb,
                        cost.stash_segments.empty() ? cost.stash_bytes : cost.stash_segments[k]);
    stash.segment = k;
    stash.segments = segments;
    Produced(stash, sl.f, std::max(sl.f, sl.LastBackward()));
    Add(stash);
  }

  Buffer output = Make(BufferKind::kOutput, stage, mb, cost.output_bytes);
  if (slots_.NextLocal(stage)) {
    const MicrobatchSlots next = slots_.At(stage + 1, mb);
    output.handoff_stage = stage + 1;
    output.bytes = std::max(cost.output_bytes, Cost(stage + 1).input_bytes);
    Produced(output, sl.f, std::max({sl.f, next.f, next.w, next.b}));
  } else if (slots_.NextRemote(stage)) {
    Sent(output, sl.f, sl.send_f, sl.wait_send_f);
  } else {
    Produced(output, sl.f, sl.f);
  }
  Add(output);
}

// The received output grad and the produced input grad of (stage, mb).
void LifetimeBuilder::AddGradients(int stage, int mb) {
  const MicrobatchSlots sl = slots_.At(stage, mb);
  const StageCost& cost = Cost(stage);
  const int bw = sl.Backward();
  if (slots_.NextRemote(stage)) {  // else none (last stage) or the input grad of stage + 1
    Buffer grad = Make(BufferKind::kOutputGrad, stage, mb, cost.output_bytes);
    Received(grad, sl.recv_b, bw, sl.LastBackward());
    Add(grad);
  }
  // Nobody needs the first stage's input grad.
  if (slots_.schedule().IsFirstStage(stage)) return;
  Buffer grad = Make(BufferKind::kInputGrad, stage, mb, cost.input_bytes);
  if (slots_.PrevLocal(stage)) {
    const MicrobatchSlots prev = slots_.At(stage - 1, mb);
    grad.handoff_stage = stage - 1;
    grad.bytes = std::max(cost.input_bytes, Cost(stage - 1).output_bytes);
    Produced(grad, bw, std::max(bw, prev.LastBackward()));
  } else {
    Sent(grad, bw, sl.send_b, sl.wait_send_b);
  }
  Add(grad);
}

void LifetimeBuilder::AddStageBuffers(int stage) {
  const StageSlots& st = slots_.ForStage(stage);
  const int end = n_ - 1;
  auto held = [&](BufferKind kind, int64_t bytes, int from, int until, FreeTiming timing) {
    Buffer b;
    b.kind = kind;
    b.stage = stage;
    b.bytes = bytes;
    b.alloc_index = b.needed_from = from;
    b.free_index = b.needed_until = until;
    b.free_timing = timing;
    Add(b);
  };
  if (st.first_grad != kNoSlot) {
    held(BufferKind::kParamGrad, model_.GradBytes(stage), st.first_grad, end, FreeTiming::kStepEnd);
  }
  if (st.reduce != kNoSlot && model_.dp.ReducesInOtherDtype()) {
    if (st.wait_reduce != kNoSlot) {
      held(BufferKind::kReduce, model_.ReduceBytes(stage), st.reduce, st.wait_reduce,
           FreeTiming::kAfterAction);
    } else {
      held(BufferKind::kReduce, model_.ReduceBytes(stage), st.reduce, end, FreeTiming::kStepEnd);
    }
  }
  for (const auto& [unshard, reshard] : st.shards) {
    held(BufferKind::kParams, Cost(stage).param_bytes, unshard,
         reshard == kNoSlot ? end : reshard,
         reshard == kNoSlot ? FreeTiming::kStepEnd : FreeTiming::kAfterAction);
  }
}

RankBuffers LifetimeBuilder::Build(int rank) {
  // At most five buffers per (stage, microbatch), two per stage and one per
  // UNSHARD.
  size_t most = 0;
  for (int stage : slots_.stages()) {
    most += 5 * static_cast<size_t>(slots_.microbatches()) + 2 + slots_.ForStage(stage).shards.size();
  }
  buffers_.reserve(most);
  // Stages ascending, then microbatches ascending: the creation order that
  // ties between equal alloc indices keep.
  for (int stage : slots_.stages()) {
    for (int mb = 0; mb < slots_.microbatches(); ++mb) {
      if (slots_.At(stage, mb).f == kNoSlot) continue;
      AddActivations(stage, mb);
      if (slots_.At(stage, mb).Backward() != kNoSlot) AddGradients(stage, mb);
    }
    AddStageBuffers(stage);
  }
  // Stable counting sort by alloc index: ids follow allocation order.
  std::vector<int> start(n_ + 1, 0);
  for (const Buffer& b : buffers_) ++start[b.alloc_index + 1];
  for (int i = 0; i < n_; ++i) start[i + 1] += start[i];
  RankBuffers out;
  out.rank = rank;
  out.num_actions = n_;
  out.buffers.resize(buffers_.size());
  for (const Buffer& b : buffers_) out.buffers[start[b.alloc_index]++] = b;
  return out;
}

}  // namespace

absl::string_view BufferKindName(BufferKind kind) {
  switch (kind) {
    case BufferKind::kInput: return "input";
    case BufferKind::kStash: return "stash";
    case BufferKind::kOutput: return "output";
    case BufferKind::kOutputGrad: return "output_grad";
    case BufferKind::kInputGrad: return "input_grad";
    case BufferKind::kParamGrad: return "param_grad";
    case BufferKind::kReduce: return "reduce";
    case BufferKind::kParams: return "params";
  }
  return "?";
}

absl::string_view MemoryCategoryName(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kActivations: return "activations";
    case MemoryCategory::kStash: return "stash";
    case MemoryCategory::kReceive: return "receive";
    case MemoryCategory::kGradients: return "gradients";
    case MemoryCategory::kParameters: return "parameters";
  }
  return "?";
}

MemoryCategory Buffer::category() const {
  if (received) return MemoryCategory::kReceive;
  switch (kind) {
    case BufferKind::kInput:
    case BufferKind::kOutput: return MemoryCategory::kActivations;
    case BufferKind::kStash: return MemoryCategory::kStash;
    case BufferKind::kParams: return MemoryCategory::kParameters;
    default: return MemoryCategory::kGradients;
  }
}

std::string Buffer::ToString() const {
  std::string out = absl::StrCat(BufferKindName(kind), " ", stage);
  if (microbatch != kNoMicrobatch) absl::StrAppend(&out, "/", microbatch);
  if (segments > 1) absl::StrAppend(&out, " segment ", segment + 1, " of ", segments);
  absl::StrAppend(&out, " ", bytes, " B [", alloc_index, ", ", free_index, "]");
  if (received) absl::StrAppend(&out, " received");
  if (alloc_timing == AllocTiming::kStepStart) absl::StrAppend(&out, " from step start");
  if (free_timing == FreeTiming::kAfterSend) {
    absl::StrAppend(&out, " after send");
    if (send_index != free_index) absl::StrAppend(&out, " at ", send_index);
  }
  if (free_timing == FreeTiming::kStepEnd) absl::StrAppend(&out, " to step end");
  if (handoff_stage >= 0) {
    absl::StrAppend(&out, ", ", kind == BufferKind::kOutput ? "input" : "output_grad",
                    " of stage ", handoff_stage);
  }
  return out;
}

absl::string_view MemoryPolicyName(MemoryPolicy policy) {
  return policy == MemoryPolicy::kJit ? "jit" : "eager";
}

absl::StatusOr<MemoryPolicy> ParseMemoryPolicy(absl::string_view name) {
  if (name == "jit") return MemoryPolicy::kJit;
  if (name == "eager") return MemoryPolicy::kEager;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown memory policy \"", name, "\"; expected jit or eager"));
}

absl::StatusOr<RankBuffers> ComputeBufferLifetimes(const Schedule& schedule, const Model& model,
                                                   int rank, const LifetimeOptions& options) {
  if (!schedule.lowered) {
    return absl::FailedPreconditionError("plan needs a lowered program; run jitpipe lower first");
  }
  RETURN_IF_ERROR(ValidateHeader(schedule));
  return ComputeBufferLifetimes(schedule, ProgramIndex::BuildForRank(schedule, rank), model, rank,
                                options);
}

absl::StatusOr<RankBuffers> ComputeBufferLifetimes(const Schedule& schedule,
                                                   const ProgramIndex& index, const Model& model,
                                                   int rank, const LifetimeOptions& options) {
  if (!schedule.lowered) {
    return absl::FailedPreconditionError("plan needs a lowered program; run jitpipe lower first");
  }
  RETURN_IF_ERROR(CheckModelFits(model, schedule.num_stages()));
  ASSIGN_OR_RETURN(const ProgramSlots slots, ProgramSlots::Build(schedule, index, rank));
  return LifetimeBuilder(slots, model, options).Build(rank);
}

}  // namespace jitpipe
