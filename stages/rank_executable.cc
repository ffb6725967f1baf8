#include "stages/rank_executable.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

absl::Status Error(int rank, int index, const Action& action, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("rank ", rank, ", index ", index, " (", action.ToString(), "): ", what));
}

// Transfer ids by (direction, sending stage, microbatch); direction 0 = F.
class TransferIndex {
 public:
  TransferIndex(int stages, int mbs) : mbs_(mbs), ids_(2 * static_cast<size_t>(stages) * mbs, kNoTransfer) {}
  int32_t& At(ActionKind send_kind, int stage, int mb) {
    size_t dir = send_kind == ActionKind::kSendB ? 1 : 0;
    return ids_[(dir * (ids_.size() / 2)) + static_cast<size_t>(stage) * mbs_ + mb];
  }

 private:
  int mbs_;
  std::vector<int32_t> ids_;
};

absl::StatusOr<std::vector<Transfer>> BuildTransfers(const Schedule& s,
                                                     const std::vector<StageCost>& costs,
                                                     TransferIndex& index) {
  std::vector<Transfer> transfers;
  for (int r = 0; r < s.pp; ++r) {  // sends first: they own the transfer
    const RankProgram& program = s.ranks[r];
    for (int i = 0; i < static_cast<int>(program.size()); ++i) {
      const Action& a = program[i];
      if (!IsSend(a.kind)) continue;
      const bool forward = a.kind == ActionKind::kSendF;
      if (forward ? s.IsLastStage(a.stage) : s.IsFirstStage(a.stage)) {
        return Error(r, i, a, "a chain's end has no neighbour to send to");
      }
      const int peer_stage = forward ? a.stage + 1 : a.stage - 1;
      int32_t& id = index.At(a.kind, a.stage, a.microbatch);
      if (id != kNoTransfer) return Error(r, i, a, "sent twice");
      id = static_cast<int32_t>(transfers.size());
      const StageCost& cost = costs[a.stage];
      transfers.push_back({a.kind, a.stage, a.microbatch, r, s.RankOf(peer_stage), i, -1,
                           forward ? cost.output_bytes : cost.input_bytes,
                           TransferTag(s, a.kind, a.stage, a.microbatch)});
    }
  }
  for (int r = 0; r < s.pp; ++r) {
    const RankProgram& program = s.ranks[r];
    for (int i = 0; i < static_cast<int>(program.size()); ++i) {
      const Action& a = program[i];
      if (!IsRecv(a.kind)) continue;
      const bool forward = a.kind == ActionKind::kRecvF;
      if (forward ? s.IsFirstStage(a.stage) : s.IsLastStage(a.stage)) {
        return Error(r, i, a, "a chain's end has no neighbour to receive from");
      }
      const int from = forward ? a.stage - 1 : a.stage + 1;
      int32_t id = index.At(forward ? ActionKind::kSendF : ActionKind::kSendB, from, a.microbatch);
      if (id == kNoTransfer || transfers[id].dst_rank != r || transfers[id].recv_index >= 0) {
        return Error(r, i, a, "no matching SEND");
      }
      transfers[id].recv_index = i;
    }
  }
  for (const Transfer& t : transfers) {
    if (t.recv_index < 0) {
      return Error(t.src_rank, t.send_index, s.ranks[t.src_rank][t.send_index], "no matching RECV");
    }
  }
  return transfers;
}

// Buffer ids by role for one rank. Index spaces: local stage (position among
// the rank's stages) x microbatch, dense; per-stage roles by local stage;
// FSDP and reduction buffers by the program index that allocates them.
class BufferIndex {
 public:
  BufferIndex(const Schedule& s, int rank, const RankBuffers& buffers)
      : mbs_(s.microbatches_per_chain()), local_(s.num_stages(), -1) {
    int n = 0;
    for (int stage = 0; stage < s.num_stages(); ++stage) {
      if (s.RankOf(stage) == rank) local_[stage] = n++;
    }
    for (auto* table : {&input_, &stash_, &output_, &output_grad_, &input_grad_}) {
      table->assign(static_cast<size_t>(n) * mbs_, kNoBuffer);
    }
    param_grad_.assign(n, kNoBuffer);
    by_alloc_index_.assign(buffers.num_actions, kNoBuffer);
    for (int32_t id = 0; id < static_cast<int32_t>(buffers.buffers.size()); ++id) Add(id, buffers.buffers[id]);
  }

  PartBuffers For(int stage, int mb) const {
    const size_t k = Key(stage, mb);
    const int local = local_[stage];
    return {input_[k], stash_[k], output_[k], output_grad_[k], input_grad_[k],
            local >= 0 ? param_grad_[local] : kNoBuffer};
  }
  int32_t AllocatedAt(int index) const { return by_alloc_index_[index]; }
  int32_t ParamGrad(int stage) const { return param_grad_[local_[stage]]; }

 private:
  size_t Key(int stage, int mb) const { return static_cast<size_t>(local_[stage]) * mbs_ + mb; }

  void Add(int32_t id, const Buffer& b) {
    switch (b.kind) {
      case BufferKind::kInput: input_[Key(b.stage, b.microbatch)] = id; break;
      case BufferKind::kStash: stash_[Key(b.stage, b.microbatch)] = id; break;
      case BufferKind::kOutput:
        output_[Key(b.stage, b.microbatch)] = id;
        if (b.handoff_stage >= 0) input_[Key(b.handoff_stage, b.microbatch)] = id;
        break;
      case BufferKind::kOutputGrad: output_grad_[Key(b.stage, b.microbatch)] = id; break;
      case BufferKind::kInputGrad:
        input_grad_[Key(b.stage, b.microbatch)] = id;
        if (b.handoff_stage >= 0) output_grad_[Key(b.handoff_stage, b.microbatch)] = id;
        break;
      case BufferKind::kParamGrad: param_grad_[local_[b.stage]] = id; break;
      case BufferKind::kReduce:
      case BufferKind::kParams:
        if (b.alloc_timing == AllocTiming::kBeforeAction) by_alloc_index_[b.alloc_index] = id;
        break;
    }
  }

  int mbs_;
  std::vector<int> local_;
  std::vector<int32_t> input_, stash_, output_, output_grad_, input_grad_, param_grad_;
  std::vector<int32_t> by_alloc_index_;
};

// Groups the buffers' alloc/free events by program index into the step
// ranges of `exe`: a counting sort per list (count per index, then place),
// so the id lists stay ascending and no per-step vector is allocated.
void AttachMemoryEvents(const RankBuffers& buffers, RankExecutable& exe) {
  const size_t n = exe.steps.size();
  const size_t num_buffers = buffers.buffers.size();
  exe.buffer_bytes.reserve(num_buffers);
  exe.buffer_category.reserve(num_buffers);
  // Per step: how many ids each of its three lists gets (list 0 allocate,
  // 1 release, 2 release on send), then the list's first slot.
  std::vector<int32_t> count(3 * n, 0);
  auto list_of = [](const Buffer& b) {
    return b.free_timing == FreeTiming::kAfterSend ? 2 : 1;
  };
  for (const Buffer& b : buffers.buffers) {
    exe.buffer_bytes.push_back(b.bytes);
    exe.buffer_category.push_back(b.category());
    if (b.alloc_timing != AllocTiming::kStepStart) ++count[3 * b.alloc_index];
    if (b.free_timing != FreeTiming::kStepEnd) ++count[3 * b.free_index + list_of(b)];
  }
  int32_t next = static_cast<int32_t>(exe.buffer_lists.size());
  for (size_t i = 0; i < n; ++i) {
    ExecStep& step = exe.steps[i];
    int32_t* begins[3] = {&step.allocate_begin, &step.release_begin, &step.release_on_send_begin};
    int32_t* ends[3] = {&step.allocate_end, &step.release_end, &step.release_on_send_end};
    for (int k = 0; k < 3; ++k) {
      *begins[k] = next;
      next += count[3 * i + k];
      *ends[k] = *begins[k];  // advanced as ids are placed
    }
  }
  exe.buffer_lists.resize(next);
  for (int32_t id = 0; id < static_cast<int32_t>(num_buffers); ++id) {
    const Buffer& b = buffers.buffers[id];
    if (b.alloc_timing == AllocTiming::kStepStart) {
      exe.allocate_at_start.push_back(id);
    } else {
      exe.buffer_lists[exe.steps[b.alloc_index].allocate_end++] = id;
    }
    if (b.free_timing == FreeTiming::kStepEnd) {
      exe.release_at_end.push_back(id);
    } else {
      ExecStep& step = exe.steps[b.free_index];
      int32_t& end = list_of(b) == 2 ? step.release_on_send_end : step.release_end;
      exe.buffer_lists[end++] = id;
    }
  }
}

class RankBuilder {
 public:
  RankBuilder(const Schedule& s, const std::vector<StageCost>& costs, int rank,
              const RankBuffers& buffers, TransferIndex& transfers)
      : s_(s), costs_(costs), rank_(rank), buffers_(buffers), index_(s, rank, buffers),
        transfers_(transfers) {}

  absl::StatusOr<RankExecutable> Build(const Model& model) {
    RankExecutable exe;
    exe.rank = rank_;
    const RankProgram& program = s_.ranks[rank_];
    exe.steps.reserve(program.size());
    for (int i = 0; i < static_cast<int>(program.size()); ++i) {
      ASSIGN_OR_RETURN(ExecStep step, MakeStep(model, program[i], i, exe));
      exe.steps.push_back(step);
    }
    AttachMemoryEvents(buffers_, exe);
    return exe;
  }

 private:
  absl::StatusOr<ExecStep> MakeStep(const Model& model, const Action& a, int i,
                                    RankExecutable& exe) {
    ExecStep step;
    step.index = i;
    step.kind = a.kind;
    step.stage = a.stage;
    step.microbatch = a.microbatch;
    step.parts_begin = step.parts_end = static_cast<int32_t>(exe.parts.size());
    if (IsCompute(a.kind)) {
      step.cost_us = model.ComputeUs(a);
      absl::Status status;
      ForEachComputePart(a, [&](const Action& part) {
        if (!status.ok()) return;
        absl::StatusOr<ExecPart> p = MakePart(part, a, i);
        if (!p.ok()) {
          status = p.status();
          return;
        }
        exe.parts.push_back(*p);
      });
      RETURN_IF_ERROR(status);
      step.parts_end = static_cast<int32_t>(exe.parts.size());
      return step;
    }
    switch (a.kind) {
      case ActionKind::kSendF:
      case ActionKind::kSendB: {
        step.transfer = transfers_.At(a.kind, a.stage, a.microbatch);
        PartBuffers b = index_.For(a.stage, a.microbatch);
        step.buffer = a.kind == ActionKind::kSendF ? b.output : b.input_grad;
        return step;
      }
      case ActionKind::kRecvF:
      case ActionKind::kRecvB: {
        const bool forward = a.kind == ActionKind::kRecvF;
        step.transfer = transfers_.At(forward ? ActionKind::kSendF : ActionKind::kSendB,
                                      forward ? a.stage - 1 : a.stage + 1, a.microbatch);
        PartBuffers b = index_.For(a.stage, a.microbatch);
        step.buffer = forward ? b.input : b.output_grad;
        return step;
      }
      case ActionKind::kReduceGrad:
        step.buffer = index_.ParamGrad(a.stage);
        return step;
      case ActionKind::kUnshard:
        step.buffer = index_.AllocatedAt(i);
        return step;
      case ActionKind::kReshard:
        return step;
      default:
        return Error(rank_, i, a, "cannot be executed (a bubble or unknown kind)");
    }
  }

  absl::StatusOr<ExecPart> MakePart(const Action& part, const Action& top, int i) {
    ExecPart p;
    p.kind = part.kind;
    p.stage = part.stage;
    p.microbatch = part.microbatch;
    const StageCost& c = costs_[part.stage];
    p.buffers = index_.For(part.stage, part.microbatch);
    bool remote = false;  // the part consumes data from another rank
    switch (part.kind) {
      case ActionKind::kForward:
        p.cost_us = c.forward_us;
        remote = !s_.IsFirstStage(part.stage) && s_.RankOf(part.stage - 1) != rank_;
        if (remote) p.waits_for = transfers_.At(ActionKind::kSendF, part.stage - 1, part.microbatch);
        break;
      case ActionKind::kBackwardInput:
      case ActionKind::kBackward:
        p.cost_us = part.kind == ActionKind::kBackward ? c.backward_us : c.backward_input_us;
        remote = !s_.IsLastStage(part.stage) && s_.RankOf(part.stage + 1) != rank_;
        if (remote) p.waits_for = transfers_.At(ActionKind::kSendB, part.stage + 1, part.microbatch);
        break;
      default:  // W needs nothing from other ranks
        p.cost_us = c.backward_weight_us;
        break;
    }
    if (remote && p.waits_for == kNoTransfer) {
      return Error(rank_, i, top, "consumes data that no SEND provides");
    }
    return p;
  }

  const Schedule& s_;
  const std::vector<StageCost>& costs_;
  const int rank_;
  const RankBuffers& buffers_;
  BufferIndex index_;
  TransferIndex& transfers_;
};

}  // namespace

uint64_t TransferTag(const Schedule& s, ActionKind send_kind, int stage, int microbatch) {
  const uint64_t key = static_cast<uint64_t>(stage) * s.microbatches_per_chain() + microbatch;
  return key * 2 + (send_kind == ActionKind::kSendB ? 1 : 0);
}

absl::StatusOr<Executable> BuildExecutable(const Schedule& schedule, const Model& model,
                                           absl::Span<const RankBuffers> buffers) {
  if (!schedule.lowered) {
    return absl::FailedPreconditionError(
        "execution needs a lowered program; run jitpipe lower first");
  }
  RETURN_IF_ERROR(CheckModelFits(model, schedule.num_stages()));
  std::vector<StageCost> costs;
  costs.reserve(schedule.num_stages());
  for (int s = 0; s < schedule.num_stages(); ++s) costs.push_back(model.ForStage(s));
  TransferIndex index(schedule.num_stages(), schedule.microbatches_per_chain());
  Executable exe;
  ASSIGN_OR_RETURN(exe.transfers, BuildTransfers(schedule, costs, index));
  for (int r = 0; r < schedule.pp; ++r) {
    ASSIGN_OR_RETURN(RankExecutable rank,
                     RankBuilder(schedule, costs, r, buffers[r], index).Build(model));
    exe.ranks.push_back(std::move(rank));
  }
  return exe;
}

}  // namespace jitpipe
