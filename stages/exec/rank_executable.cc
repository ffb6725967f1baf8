#include "stages/exec/rank_executable.h"

#include <algorithm>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "scheduler/execution/rank_cursor.h"

namespace jitpipe {
namespace {

absl::Status Error(int rank, int index, const Action& action, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(WhereInProgram(rank, index, action.ToString()), ": ", what));
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

// The transfers of a matched schedule, sends in rank then program order.
std::vector<Transfer> BuildTransfers(const Schedule& s, const CommPositions& positions,
                                     const std::vector<StageCost>& costs, TransferIndex& index) {
  // Reserved exactly: at pp 128 the transfers are 50 MB, and growing them
  // touched and copied up to twice that.
  size_t sends = 0;
  for (const RankProgram& program : s.ranks) {
    sends += static_cast<size_t>(std::count_if(program.begin(), program.end(),
                                               [](const Action& a) { return IsSend(a.kind); }));
  }
  std::vector<Transfer> transfers;
  transfers.reserve(sends);
  for (int r = 0; r < s.pp; ++r) {
    const RankProgram& program = s.ranks[r];
    for (int i = 0; i < static_cast<int>(program.size()); ++i) {
      const Action& a = program[i];
      if (!IsSend(a.kind)) continue;
      const bool forward = a.kind == ActionKind::kSendF;
      const Endpoint peer = Partner(positions, a);
      index.At(a.kind, a.stage, a.microbatch) = static_cast<int32_t>(transfers.size());
      const StageCost& cost = costs[a.stage];
      transfers.push_back({a.kind, a.stage, a.microbatch, r, peer.rank, i, peer.index,
                           forward ? cost.output_bytes : cost.input_bytes,
                           TransferTag(s, a.kind, a.stage, a.microbatch)});
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
    stash_segments_.assign(static_cast<size_t>(n) * mbs_, 0);
    param_grad_.assign(n, kNoBuffer);
    by_alloc_index_.assign(buffers.num_actions, kNoBuffer);
    for (int32_t id = 0; id < static_cast<int32_t>(buffers.buffers.size()); ++id) Add(id, buffers.buffers[id]);
  }

  PartBuffers For(int stage, int mb) const {
    const size_t k = Key(stage, mb);
    const int local = local_[stage];
    return {input_[k], stash_[k], stash_segments_[k], output_[k], output_grad_[k],
            input_grad_[k], local >= 0 ? param_grad_[local] : kNoBuffer};
  }
  int32_t AllocatedAt(int index) const { return by_alloc_index_[index]; }
  int32_t ParamGrad(int stage) const { return param_grad_[local_[stage]]; }

 private:
  size_t Key(int stage, int mb) const { return static_cast<size_t>(local_[stage]) * mbs_ + mb; }

  void Add(int32_t id, const Buffer& b) {
    switch (b.kind) {
      case BufferKind::kInput: input_[Key(b.stage, b.microbatch)] = id; break;
      case BufferKind::kStash:
        if (b.segment == 0) {
          stash_[Key(b.stage, b.microbatch)] = id;
          stash_segments_[Key(b.stage, b.microbatch)] = b.segments;
        }
        break;
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
  std::vector<int32_t> stash_segments_;
  std::vector<int32_t> by_alloc_index_;
};

// The buffers' alloc/free events by program index, as the cursor's
// RankMemoryEvents: a counting sort per list (count per index, then place),
// so the id lists stay ascending and no per-step vector is allocated.
void AttachMemoryEvents(const RankBuffers& buffers, RankExecutable& exe) {
  const size_t n = exe.steps.size();
  const size_t num_buffers = buffers.buffers.size();
  exe.buffer_bytes.reserve(num_buffers);
  exe.buffer_category.reserve(num_buffers);
  RankMemoryEvents& m = exe.memory;
  // List k of action i (0 allocate, 1 release, 2 release on completion) is
  // slot 3 i + k; first its size, then its start.
  auto list_of = [](const Buffer& b) { return b.free_timing == FreeTiming::kAfterSend ? 2 : 1; };
  // A sent buffer is released when its SEND's transfer completes, whatever
  // bound the plan counted it live to (memory/send_completion.h).
  auto release_at = [](const Buffer& b) {
    return b.free_timing == FreeTiming::kAfterSend ? b.send_index : b.free_index;
  };
  m.offsets.assign(3 * n + 1, 0);
  for (const Buffer& b : buffers.buffers) {
    exe.buffer_bytes.push_back(b.bytes);
    exe.buffer_category.push_back(b.category());
    if (b.alloc_timing != AllocTiming::kStepStart) ++m.offsets[3 * b.alloc_index + 1];
    if (b.free_timing != FreeTiming::kStepEnd) ++m.offsets[3 * release_at(b) + list_of(b) + 1];
  }
  for (size_t k = 1; k <= 3 * n; ++k) m.offsets[k] += m.offsets[k - 1];
  m.ids.resize(m.offsets[3 * n]);
  std::vector<int32_t> next(m.offsets.begin(), m.offsets.end() - 1);
  for (int32_t id = 0; id < static_cast<int32_t>(num_buffers); ++id) {
    const Buffer& b = buffers.buffers[id];
    if (b.alloc_timing == AllocTiming::kStepStart) {
      m.at_start.push_back(id);
    } else {
      m.ids[next[3 * b.alloc_index]++] = id;
    }
    if (b.free_timing == FreeTiming::kStepEnd) {
      m.at_end.push_back(id);
    } else {
      m.ids[next[3 * release_at(b) + list_of(b)]++] = id;
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
    size_t parts = 0;
    for (const Action& a : program) ForEachComputePart(a, [&](const Action&) { ++parts; });
    exe.parts.reserve(parts);
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
      ForEachComputePart(a, [&](const Action& part) { exe.parts.push_back(MakePart(part)); });
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
      case ActionKind::kWaitSendF:
      case ActionKind::kWaitSendB: {
        const ActionKind send = WaitedSendKind(a.kind);
        step.transfer = transfers_.At(send, a.stage, a.microbatch);
        PartBuffers b = index_.For(a.stage, a.microbatch);
        step.buffer = send == ActionKind::kSendF ? b.output : b.input_grad;
        return step;
      }
      case ActionKind::kReduceGrad:
      case ActionKind::kWaitReduceGrad:
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

  // A compute part and the transfer it consumes (matched already: a part
  // that needs one has it).
  ExecPart MakePart(const Action& part) {
    ExecPart p;
    p.kind = part.kind;
    p.stage = part.stage;
    p.microbatch = part.microbatch;
    const StageCost& c = costs_[part.stage];
    p.buffers = index_.For(part.stage, part.microbatch);
    switch (part.kind) {
      case ActionKind::kForward:
        p.cost_us = c.forward_us;
        if (!s_.IsFirstStage(part.stage) && s_.RankOf(part.stage - 1) != rank_) {
          p.consumes = transfers_.At(ActionKind::kSendF, part.stage - 1, part.microbatch);
        }
        break;
      case ActionKind::kBackwardInput:
      case ActionKind::kBackward:
        p.cost_us = part.kind == ActionKind::kBackward ? c.backward_us : c.backward_input_us;
        if (!s_.IsLastStage(part.stage) && s_.RankOf(part.stage + 1) != rank_) {
          p.consumes = transfers_.At(ActionKind::kSendB, part.stage + 1, part.microbatch);
        }
        break;
      default:  // W needs nothing from other ranks
        p.cost_us = c.backward_weight_us;
        break;
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

namespace {

// BuildExecutable over rank r's buffers `buffers_of(r)`; `built(r)` runs once
// rank r's executable no longer needs them.
absl::StatusOr<Executable> Build(const Schedule& schedule, const Model& model,
                                 absl::FunctionRef<const RankBuffers&(int)> buffers_of,
                                 absl::FunctionRef<void(int)> built) {
  if (!schedule.lowered) {
    return absl::FailedPreconditionError(
        "execution needs a lowered program; run jitpipe lower first");
  }
  RETURN_IF_ERROR(CheckModelFits(model, schedule.num_stages()));
  std::vector<StageCost> costs;
  costs.reserve(schedule.num_stages());
  for (int s = 0; s < schedule.num_stages(); ++s) costs.push_back(model.ForStage(s));
  Executable exe;
  ASSIGN_OR_RETURN(exe.positions, MatchSendRecv(schedule));
  TransferIndex index(schedule.num_stages(), schedule.microbatches_per_chain());
  exe.transfers = BuildTransfers(schedule, exe.positions, costs, index);
  exe.ranks.reserve(schedule.pp);
  for (int r = 0; r < schedule.pp; ++r) {
    ASSIGN_OR_RETURN(RankExecutable rank,
                     RankBuilder(schedule, costs, r, buffers_of(r), index).Build(model));
    exe.ranks.push_back(std::move(rank));
    built(r);
  }
  return exe;
}

}  // namespace

absl::StatusOr<Executable> BuildExecutable(const Schedule& schedule, const Model& model,
                                           absl::Span<const RankBuffers> buffers) {
  return Build(
      schedule, model, [&](int r) -> const RankBuffers& { return buffers[r]; }, [](int) {});
}

absl::StatusOr<Executable> BuildExecutable(const Schedule& schedule, const Model& model,
                                           std::vector<RankBuffers>&& buffers) {
  return Build(
      schedule, model, [&](int r) -> const RankBuffers& { return buffers[r]; },
      [&](int r) { buffers[r] = RankBuffers{}; });
}

absl::Status CheckExecutableFits(const Schedule& schedule, const Executable& executable) {
  if (executable.ranks.size() != static_cast<size_t>(schedule.pp)) {
    return absl::InvalidArgumentError(absl::StrCat("the executable has ", executable.ranks.size(),
                                                   " ranks but the schedule ", schedule.pp));
  }
  for (int r = 0; r < schedule.pp; ++r) {
    if (executable.ranks[r].steps.size() != schedule.ranks[r].size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", r, ": the executable has ", executable.ranks[r].steps.size(),
          " steps but the program ", schedule.ranks[r].size(), " actions (built from another "
          "schedule?)"));
    }
  }
  return absl::OkStatus();
}

RankCursor CursorOf(const Schedule& schedule, const Executable& executable, int rank,
                    WaitModel model) {
  return RankCursor(schedule, executable.positions, rank, model,
                    &executable.ranks[rank].memory);
}

}  // namespace jitpipe
