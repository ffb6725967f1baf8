#include "memory/buffer_lifetimes.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

constexpr int kNone = -1;

// Where each per-(stage, microbatch) action sits in the program; kNone if absent.
struct Slots {
  int f = kNone, i = kNone, w = kNone, b = kNone;
  int recv_f = kNone, recv_b = kNone, send_f = kNone, send_b = kNone;

  int Backward() const { return b != kNone ? b : i; }  // the first of I/B
  int LastBackward() const { return std::max({i, w, b}); }
};

struct StageSlots {
  int reduce = kNone;
  int first_grad = kNone;                   // first W or B
  std::vector<std::pair<int, int>> shards;  // (UNSHARD, RESHARD or kNone)
};

int* SlotFor(Slots& s, ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward: return &s.f;
    case ActionKind::kBackwardInput: return &s.i;
    case ActionKind::kBackwardWeight: return &s.w;
    case ActionKind::kBackward: return &s.b;
    case ActionKind::kRecvF: return &s.recv_f;
    case ActionKind::kRecvB: return &s.recv_b;
    case ActionKind::kSendF: return &s.send_f;
    case ActionKind::kSendB: return &s.send_b;
    default: return nullptr;
  }
}

// Builds one rank's buffers. Index spaces: program index (0 .. n-1), global
// stage, local stage (position among the rank's stages), microbatch within
// the chain; per-(stage, microbatch) data is dense at local * m + mb.
class LifetimeBuilder {
 public:
  LifetimeBuilder(const Schedule& schedule, const Model& model, int rank,
                  const LifetimeOptions& options)
      : s_(schedule), model_(model), rank_(rank), options_(options),
        program_(schedule.ranks[rank]), n_(static_cast<int>(program_.size())),
        m_(schedule.microbatches_per_chain()), local_(schedule.num_stages(), kNone) {}

  absl::StatusOr<RankBuffers> Build();

 private:
  absl::Status IndexProgram();
  absl::Status Record(const Action& action, int index);
  absl::Status RecordStageWide(const Action& action, int index);
  absl::Status CheckOrder(int stage, int mb);
  void AddMicrobatchBuffers(int stage, int mb);
  void AddStageBuffers(int stage);
  absl::Status Error(int index, absl::string_view what) const;

  Slots& At(int stage, int mb) { return slots_[local_[stage] * m_ + mb]; }
  bool PrevRemote(int stage) const { return !s_.IsFirstStage(stage) && s_.RankOf(stage - 1) != rank_; }
  bool PrevLocal(int stage) const { return !s_.IsFirstStage(stage) && s_.RankOf(stage - 1) == rank_; }
  bool NextRemote(int stage) const { return !s_.IsLastStage(stage) && s_.RankOf(stage + 1) != rank_; }
  bool NextLocal(int stage) const { return !s_.IsLastStage(stage) && s_.RankOf(stage + 1) == rank_; }
  bool Eager() const { return options_.policy == MemoryPolicy::kEager; }
  int ReceiveAt(int recv, int consumer) const;
  void Add(Buffer b) { buffers_.push_back(b); }

  const Schedule& s_;
  const Model& model_;
  const int rank_;
  const LifetimeOptions options_;
  const RankProgram& program_;
  const int n_;
  const int m_;
  std::vector<int> local_;                // global stage -> local stage
  std::vector<int> stages_;               // local stage -> global stage
  std::vector<StageCost> costs_;          // per local stage
  std::vector<Slots> slots_;              // per (local stage, microbatch)
  std::vector<StageSlots> stage_slots_;   // per local stage
  std::vector<int> computes_before_;      // compute actions before each index
  std::vector<int> compute_index_;        // program index of each compute action
  std::vector<Buffer> buffers_;
};

absl::Status LifetimeBuilder::Error(int index, absl::string_view what) const {
  return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, ", index ", index, " (",
                                                 program_[index].ToString(), "): ", what));
}

absl::Status LifetimeBuilder::Record(const Action& action, int index) {
  const int stage = action.stage;
  if (stage < 0 || stage >= s_.num_stages()) {
    return Error(index, absl::StrCat("stage ", stage, " does not exist (the schedule has ",
                                     s_.num_stages(), " stages)"));
  }
  if (local_[stage] == kNone) {
    return Error(index, absl::StrCat("stage ", stage, " is on rank ", s_.RankOf(stage),
                                     ", not on rank ", rank_));
  }
  if (!HasMicrobatch(action.kind)) return RecordStageWide(action, index);
  if (action.microbatch < 0 || action.microbatch >= m_) {
    return Error(index, absl::StrCat("microbatch ", action.microbatch, " is out of range (",
                                     m_, " microbatches per chain)"));
  }
  int* slot = SlotFor(At(stage, action.microbatch), action.kind);
  if (*slot != kNone) {
    return Error(index, absl::StrCat(action.ToString(), " already ran at index ", *slot));
  }
  *slot = index;
  const bool crosses = action.kind == ActionKind::kRecvF || action.kind == ActionKind::kSendB
                           ? PrevRemote(stage)
                           : NextRemote(stage);
  if (IsSendRecv(action.kind) && !crosses) {
    const bool backward_side = action.kind == ActionKind::kRecvF || action.kind == ActionKind::kSendB;
    return Error(index, absl::StrCat("stage ", stage, " has no ",
                                     backward_side ? "previous" : "next",
                                     " stage on another rank to ",
                                     IsSend(action.kind) ? "send to" : "receive from"));
  }
  if (action.kind == ActionKind::kBackward || action.kind == ActionKind::kBackwardWeight) {
    int& first = stage_slots_[local_[stage]].first_grad;
    if (first == kNone) first = index;
  }
  return absl::OkStatus();
}

absl::Status LifetimeBuilder::RecordStageWide(const Action& action, int index) {
  StageSlots& st = stage_slots_[local_[action.stage]];
  if (action.kind == ActionKind::kReduceGrad) {
    if (st.reduce != kNone) {
      return Error(index, absl::StrCat(action.ToString(), " already ran at index ", st.reduce));
    }
    st.reduce = index;
    return absl::OkStatus();
  }
  const bool open = !st.shards.empty() && st.shards.back().second == kNone;
  if (action.kind == ActionKind::kUnshard) {
    if (open) {
      return Error(index, absl::StrCat("stage ", action.stage, " is already unsharded (at index ",
                                       st.shards.back().first, ")"));
    }
    st.shards.push_back({index, kNone});
  } else {  // kReshard
    if (!open) return Error(index, absl::StrCat("stage ", action.stage, " is not unsharded"));
    st.shards.back().second = index;
  }
  return absl::OkStatus();
}

absl::Status LifetimeBuilder::IndexProgram() {
  stages_ = RankToStages(s_.stage_to_rank, s_.pp)[rank_];
  for (size_t l = 0; l < stages_.size(); ++l) {
    local_[stages_[l]] = static_cast<int>(l);
    costs_.push_back(model_.ForStage(stages_[l]));
  }
  slots_.assign(stages_.size() * m_, Slots{});
  stage_slots_.assign(stages_.size(), StageSlots{});
  computes_before_.resize(n_);
  for (int index = 0; index < n_; ++index) {
    const Action& action = program_[index];
    computes_before_[index] = static_cast<int>(compute_index_.size());
    if (IsCompute(action.kind)) compute_index_.push_back(index);
    if (action.is_bubble()) {
      return Error(index, "a bubble in a lowered program");
    }
    if (action.is_compound()) {
      for (const Action& part : action.sub_actions) RETURN_IF_ERROR(Record(part, index));
    } else {
      RETURN_IF_ERROR(Record(action, index));
    }
  }
  return absl::OkStatus();
}

// Checks the orderings the lifetimes rely on for one (stage, microbatch).
absl::Status LifetimeBuilder::CheckOrder(int stage, int mb) {
  const Slots& sl = At(stage, mb);
  const std::string id = absl::StrCat("stage ", stage, " microbatch ", mb);
  for (int later : {sl.i, sl.w, sl.b, sl.send_f, sl.send_b}) {
    if (later != kNone && (sl.f == kNone || later < sl.f)) {
      return Error(later, absl::StrCat("no F of ", id, " before it"));
    }
  }
  if (sl.f == kNone) {
    if (sl.recv_f != kNone) return Error(sl.recv_f, absl::StrCat("no F of ", id, " after it"));
    return absl::OkStatus();
  }
  if (PrevRemote(stage) && (sl.recv_f == kNone || sl.recv_f > sl.f)) {
    return Error(sl.f, absl::StrCat("no RECV_F of ", id, " before it"));
  }
  if (NextRemote(stage) && sl.send_f == kNone) {
    return Error(sl.f, absl::StrCat("the output of ", id, " is never sent (no SEND_F)"));
  }
  const int bw = sl.Backward();
  if (sl.send_b != kNone && (bw == kNone || sl.send_b < bw)) {
    return Error(sl.send_b, absl::StrCat("no I or B of ", id, " before it"));
  }
  if (bw == kNone) {
    if (sl.recv_b != kNone) return Error(sl.recv_b, absl::StrCat("no I or B of ", id, " after it"));
    return absl::OkStatus();
  }
  if (NextRemote(stage) && (sl.recv_b == kNone || sl.recv_b > bw)) {
    return Error(bw, absl::StrCat("no RECV_B of ", id, " before it"));
  }
  if (PrevRemote(stage) && sl.send_b == kNone) {
    return Error(bw, absl::StrCat("the input gradient of ", id, " is never sent (no SEND_B)"));
  }
  return absl::OkStatus();
}

// Where a receive buffer is allocated under jit: at the RECV, or `prefetch`
// compute actions before the consumer when that is earlier.
int LifetimeBuilder::ReceiveAt(int recv, int consumer) const {
  if (options_.prefetch <= 0) return recv;
  const int before = computes_before_[consumer];
  const int at = before >= options_.prefetch ? compute_index_[before - options_.prefetch] : 0;
  return std::min(recv, at);
}

void LifetimeBuilder::AddMicrobatchBuffers(int stage, int mb) {
  const Slots& sl = At(stage, mb);
  if (sl.f == kNone) return;
  const StageCost& cost = costs_[local_[stage]];
  const int end = n_ - 1;
  const int last_input_use = std::max({sl.f, sl.w, sl.b});
  const int bw = sl.Backward();
  const int last_backward = std::max(sl.f, sl.LastBackward());
  auto make = [&](BufferKind kind, int64_t bytes) {
    Buffer b;
    b.kind = kind;
    b.stage = stage;
    b.microbatch = mb;
    b.bytes = bytes;
    return b;
  };
  auto receive = [&](Buffer& b, int recv, int consumer, int last_use) {
    b.received = true;
    b.needed_from = consumer;
    b.needed_until = last_use;
    b.alloc_index = Eager() ? 0 : ReceiveAt(recv, consumer);
    b.alloc_timing = Eager() ? AllocTiming::kStepStart : AllocTiming::kBeforeAction;
    b.free_index = Eager() ? end : last_use;
    b.free_timing = Eager() ? FreeTiming::kStepEnd : FreeTiming::kAfterAction;
  };
  auto produce = [&](Buffer& b, int at, int last_use) {
    b.alloc_index = b.needed_from = at;
    b.free_index = b.needed_until = last_use;
  };
  auto send = [&](Buffer& b, int at, int sent) {
    b.alloc_index = b.needed_from = b.needed_until = at;
    b.free_index = Eager() ? end : sent;
    b.free_timing = Eager() ? FreeTiming::kStepEnd : FreeTiming::kAfterSend;
  };

  if (!PrevLocal(stage)) {  // else the output of stage-1 is this input
    Buffer input = make(BufferKind::kInput, cost.input_bytes);
    if (PrevRemote(stage)) {
      receive(input, sl.recv_f, sl.f, last_input_use);
    } else {
      produce(input, sl.f, last_input_use);
    }
    Add(input);
  }
  Buffer stash = make(BufferKind::kStash, cost.stash_bytes);
  produce(stash, sl.f, last_backward);
  Add(stash);

  Buffer output = make(BufferKind::kOutput, cost.output_bytes);
  if (NextLocal(stage)) {
    const Slots& next = At(stage + 1, mb);
    output.handoff_stage = stage + 1;
    output.bytes = std::max(cost.output_bytes, costs_[local_[stage + 1]].input_bytes);
    produce(output, sl.f, std::max({sl.f, next.f, next.w, next.b}));
  } else if (NextRemote(stage)) {
    send(output, sl.f, sl.send_f);
  } else {
    produce(output, sl.f, sl.f);
  }
  Add(output);

  if (bw == kNone) return;
  if (NextRemote(stage)) {
    Buffer grad = make(BufferKind::kOutputGrad, cost.output_bytes);
    receive(grad, sl.recv_b, bw, last_backward);
    Add(grad);
  }
  if (s_.IsFirstStage(stage)) return;
  Buffer grad = make(BufferKind::kInputGrad, cost.input_bytes);
  if (PrevLocal(stage)) {
    const Slots& prev = At(stage - 1, mb);
    grad.handoff_stage = stage - 1;
    grad.bytes = std::max(cost.input_bytes, costs_[local_[stage - 1]].output_bytes);
    produce(grad, bw, std::max(bw, prev.LastBackward()));
  } else {
    send(grad, bw, sl.send_b);
  }
  Add(grad);
}

void LifetimeBuilder::AddStageBuffers(int stage) {
  const StageSlots& st = stage_slots_[local_[stage]];
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
  if (st.first_grad != kNone) {
    held(BufferKind::kParamGrad, model_.GradBytes(stage), st.first_grad, end, FreeTiming::kStepEnd);
  }
  if (st.reduce != kNone && model_.dp.ReducesInOtherDtype()) {
    held(BufferKind::kReduce, model_.ReduceBytes(stage), st.reduce, end, FreeTiming::kStepEnd);
  }
  for (const auto& [unshard, reshard] : st.shards) {
    held(BufferKind::kParams, costs_[local_[stage]].param_bytes, unshard,
         reshard == kNone ? end : reshard,
         reshard == kNone ? FreeTiming::kStepEnd : FreeTiming::kAfterAction);
  }
}

absl::StatusOr<RankBuffers> LifetimeBuilder::Build() {
  RETURN_IF_ERROR(IndexProgram());
  // Stages ascending, microbatches ascending: the creation order that ties
  // between equal alloc indices keep.
  for (int stage : stages_) {
    for (int mb = 0; mb < m_; ++mb) RETURN_IF_ERROR(CheckOrder(stage, mb));
  }
  for (int stage : stages_) {
    for (int mb = 0; mb < m_; ++mb) AddMicrobatchBuffers(stage, mb);
    AddStageBuffers(stage);
  }
  // Stable counting sort by alloc index: ids follow allocation order.
  std::vector<int> start(n_ + 1, 0);
  for (const Buffer& b : buffers_) ++start[b.alloc_index + 1];
  for (int i = 0; i < n_; ++i) start[i + 1] += start[i];
  RankBuffers out;
  out.rank = rank_;
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
  absl::StrAppend(&out, " ", bytes, " B [", alloc_index, ", ", free_index, "]");
  if (received) absl::StrAppend(&out, " received");
  if (alloc_timing == AllocTiming::kStepStart) absl::StrAppend(&out, " from step start");
  if (free_timing == FreeTiming::kAfterSend) absl::StrAppend(&out, " after send");
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
  RETURN_IF_ERROR(CheckModelFits(model, schedule.num_stages()));
  return LifetimeBuilder(schedule, model, rank, options).Build();
}

}  // namespace jitpipe
