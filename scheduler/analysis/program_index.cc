#include "scheduler/analysis/program_index.h"

#include <array>
#include <string>

#include "absl/strings/str_cat.h"
#include "scheduler/analysis/action_error.h"

namespace jitpipe {
namespace {

bool IsPhase(ActionKind kind) {
  return kind == ActionKind::kForward || kind == ActionKind::kBackward ||
         kind == ActionKind::kBackwardInput || kind == ActionKind::kBackwardWeight;
}

// One sweep over every rank's program (see program_index.h).
class Indexer {
 public:
  Indexer(const Schedule& s, ProgramIndex& index)
      : s_(s), x_(index), mbs_(static_cast<uint32_t>(s.microbatches_per_chain())),
        unsharded_(s.num_stages(), kAbsent) {
    for (size_t kind = 0; kind < kTabled.size(); ++kind) {
      if (!kTabled[kind]) continue;
      std::vector<int32_t>& table = x_.TableOf(static_cast<ActionKind>(kind));
      if (!table.empty()) tables_[kind] = table.data();
    }
  }

  // The hot loop: a simple action of a kind with a table (F, B, I, W,
  // SEND/RECV, WAIT_SEND) whose indices are in range takes its slot inline;
  // everything else (compounds, bubbles, stage-wide actions, faults) goes
  // through Index().
  void Run(int r) {
    const RankProgram& program = s_.ranks[r];
    RankFault& ff = x_.faults[r];  // the rank's first fault
    const size_t num_stages = s_.stage_to_rank.size();
    const int* const stage_rank = s_.stage_to_rank.data();
    const int32_t* const rows = x_.rows.data();
    const size_t mbs = mbs_;
    const bool lowered = s_.lowered;
    // Locals, so that the stores into the tables (int32s the compiler cannot
    // tell from these) do not force reloads.
    const Action* const actions = program.data();
    const auto n = static_cast<int32_t>(program.size());
    int32_t* const* const tables = tables_.data();
    for (int32_t i = 0; i < n; ++i) {
      const Action& a = actions[i];
      const auto kind = static_cast<size_t>(a.kind);
      const auto stage = static_cast<size_t>(a.stage);
      const auto mb = static_cast<size_t>(static_cast<uint32_t>(a.microbatch));
      if (kTabled[kind] && stage < num_stages && stage_rank[stage] == r && mb < mbs &&
          (lowered || IsPhase(a.kind))) {
        int32_t* table = tables[kind];
        if (table == nullptr) table = Allocate(a.kind);
        int32_t& slot = table[static_cast<size_t>(rows[stage]) * mbs + mb];
        if (slot == kAbsent) {
          slot = i;
        } else {
          Fail(ff, IndexFault::kRepeat, i, 0, slot);
        }
        continue;
      }
      Index(r, i, a, ff);
    }
  }

 private:
  bool InRange(int rank, const Action& a) const {
    return static_cast<size_t>(a.stage) < s_.stage_to_rank.size() &&
           s_.stage_to_rank[a.stage] == rank &&
           (!HasMicrobatch(a.kind) || static_cast<uint32_t>(a.microbatch) < mbs_);
  }

  // Kinds with a (stage, microbatch) table.
  static constexpr auto kTabled = [] {
    std::array<bool, kNumActionKinds> tabled{};
    for (ActionKind kind : {ActionKind::kForward, ActionKind::kBackward,
                            ActionKind::kBackwardInput, ActionKind::kBackwardWeight,
                            ActionKind::kSendF, ActionKind::kRecvF, ActionKind::kSendB,
                            ActionKind::kRecvB, ActionKind::kWaitSendF, ActionKind::kWaitSendB}) {
      tabled[static_cast<size_t>(kind)] = true;
    }
    return tabled;
  }();

  // The kind's table, given its rows on first use.
  int32_t* Allocate(ActionKind kind) {
    std::vector<int32_t>& table = x_.TableOf(kind);
    if (table.empty()) table.assign(x_.table_size, kAbsent);
    return tables_[static_cast<size_t>(kind)] = table.data();
  }
  std::vector<int32_t>& Rows(ActionKind kind) {
    Allocate(kind);
    return x_.TableOf(kind);
  }

  // Records a fault; the rank keeps its first.
  void Fail(RankFault& ff, IndexFault what, int32_t index, int32_t part = 0,
            int32_t first = kAbsent) {
    x_.clean = false;
    if (ff.fault == IndexFault::kNone) ff = {what, index, part, first};
  }

  void Take(RankFault& ff, int32_t& slot, int32_t index, int32_t part) {
    if (slot == kAbsent) {
      slot = index;
    } else {
      Fail(ff, IndexFault::kRepeat, index, part, slot);
    }
  }

  void IndexPhase(int rank, int32_t i, int32_t part_no, const Action& part, RankFault& ff) {
    if (!IsPhase(part.kind)) return Fail(ff, IndexFault::kNotAPhase, i, part_no);
    if (!InRange(rank, part)) return Fail(ff, IndexFault::kBadIndices, i, part_no);
    Take(ff, Rows(part.kind)[x_.Key(part.stage, part.microbatch)], i, part_no);
  }

  void Index(int rank, int32_t i, const Action& a, RankFault& ff) {
    switch (a.kind) {
      case ActionKind::kForward:
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
      case ActionKind::kBackwardWeight:
        return IndexPhase(rank, i, 0, a, ff);
      case ActionKind::kOverlapFB: {
        if (a.sub_actions.empty()) return Fail(ff, IndexFault::kEmptyCompound, i);
        int32_t part_no = 0;
        for (const Action& part : a.sub_actions) IndexPhase(rank, i, part_no++, part, ff);
        return;
      }
      case ActionKind::kBubble:
        if (s_.lowered) Fail(ff, IndexFault::kBubbleInLowered, i);
        return;
      default:
        break;
    }
    if (!s_.lowered) return Fail(ff, IndexFault::kNotComputeOnly, i);
    if (!InRange(rank, a)) return Fail(ff, IndexFault::kBadIndices, i);
    if (HasMicrobatch(a.kind)) {  // SEND/RECV, WAIT_SEND
      return Take(ff, Rows(a.kind)[x_.Key(a.stage, a.microbatch)], i, 0);
    }
    switch (a.kind) {
      case ActionKind::kReduceGrad:
        return Take(ff, x_.reduce_grad[a.stage], i, 0);
      case ActionKind::kWaitReduceGrad:
        if (x_.reduce_grad[a.stage] == kAbsent) return Fail(ff, IndexFault::kReduceWaitFirst, i);
        return Take(ff, x_.wait_reduce_grad[a.stage], i, 0);
      default: {  // kUnshard, kReshard
        int32_t& open = unsharded_[a.stage];
        if (!ShardOrderWhat(a, open).empty()) {
          return Fail(ff, IndexFault::kShardOrder, i, 0, open);
        }
        if (a.kind == ActionKind::kUnshard) {
          x_.shards[a.stage].push_back({i, kAbsent});
        } else {
          x_.shards[a.stage].back().second = i;
        }
        open = ShardNext(a.kind, open, i);
        return;
      }
    }
  }

  const Schedule& s_;
  ProgramIndex& x_;
  const uint32_t mbs_;
  std::vector<int32_t> unsharded_;  // by stage: its open UNSHARD
  std::array<int32_t*, kNumActionKinds> tables_{};  // by kind; null until allocated
};

}  // namespace

std::vector<StageLink> StageLinksOf(const Schedule& schedule) {
  std::vector<StageLink> links(schedule.num_stages());
  for (int stage = 0; stage < schedule.num_stages(); ++stage) {
    StageLink& link = links[stage];
    link.rank = schedule.RankOf(stage);
    if (!schedule.IsFirstStage(stage)) link.prev_rank = schedule.RankOf(stage - 1);
    if (!schedule.IsLastStage(stage)) link.next_rank = schedule.RankOf(stage + 1);
  }
  return links;
}

namespace {

// An index with `rows` (by stage) and empty tables for them.
ProgramIndex EmptyIndex(const Schedule& schedule, std::vector<int32_t> rows, int num_rows) {
  ProgramIndex x;
  x.microbatches = schedule.microbatches_per_chain();
  const int num_stages = schedule.num_stages();
  x.rows = std::move(rows);
  x.table_size = static_cast<size_t>(num_rows) * static_cast<size_t>(x.microbatches);
  x.forward.assign(x.table_size, kAbsent);
  if (schedule.lowered) {  // the other tables get their rows when first written
    for (auto* table : {&x.send_f, &x.recv_f, &x.send_b, &x.recv_b}) {
      table->assign(x.table_size, kAbsent);
    }
  }
  x.reduce_grad.assign(num_stages, kAbsent);
  x.wait_reduce_grad.assign(num_stages, kAbsent);
  x.shards.resize(num_stages);
  x.stages = StageLinksOf(schedule);
  x.faults.resize(schedule.pp);
  return x;
}

}  // namespace

ProgramIndex ProgramIndex::Build(const Schedule& schedule) {
  std::vector<int32_t> rows(schedule.num_stages());
  for (int stage = 0; stage < schedule.num_stages(); ++stage) rows[stage] = stage;
  ProgramIndex x = EmptyIndex(schedule, std::move(rows), schedule.num_stages());
  Indexer indexer(schedule, x);
  for (int r = 0; r < schedule.pp; ++r) indexer.Run(r);
  return x;
}

ProgramIndex ProgramIndex::BuildForRank(const Schedule& schedule, int rank) {
  std::vector<int32_t> rows(schedule.num_stages(), kAbsent);
  int num_rows = 0;
  for (int stage = 0; stage < schedule.num_stages(); ++stage) {
    if (schedule.RankOf(stage) == rank) rows[stage] = num_rows++;
  }
  ProgramIndex x = EmptyIndex(schedule, std::move(rows), num_rows);
  Indexer(schedule, x).Run(rank);
  return x;
}

const std::vector<int32_t>& ProgramIndex::TableOf(ActionKind kind) const {
  switch (kind) {
    case ActionKind::kForward: return forward;
    case ActionKind::kBackward: return backward;
    case ActionKind::kBackwardInput: return backward_input;
    case ActionKind::kBackwardWeight: return backward_weight;
    case ActionKind::kSendF: return send_f;
    case ActionKind::kRecvF: return recv_f;
    case ActionKind::kSendB: return send_b;
    case ActionKind::kRecvB: return recv_b;
    case ActionKind::kWaitSendF: return wait_send_f;
    default: return wait_send_b;  // kWaitSendB
  }
}

std::vector<int32_t>& ProgramIndex::TableOf(ActionKind kind) {
  return const_cast<std::vector<int32_t>&>(std::as_const(*this).TableOf(kind));
}

absl::Status ProgramIndex::FaultStatus(const Schedule& schedule, int rank) const {
  const RankFault& f = faults[rank];
  if (f.fault == IndexFault::kNone) return absl::OkStatus();
  const Action& top = schedule.ranks[rank][f.index];
  const Action& part = top.is_compound() && !top.sub_actions.empty() ? top.sub_actions[f.part] : top;
  switch (f.fault) {
    case IndexFault::kBadIndices:
      return CheckPartIndices(schedule, rank, f.index, top, part);
    case IndexFault::kEmptyCompound:
      return ActionError(rank, f.index, top, "an OVERLAP_F_B without sub-actions");
    case IndexFault::kNotAPhase:
      return ActionError(rank, f.index, top, "is not a compute action");
    case IndexFault::kBubbleInLowered:
      return ActionError(rank, f.index, top, "a bubble in a lowered program");
    case IndexFault::kNotComputeOnly:
      return ActionError(rank, f.index, top,
                         absl::StrCat(KindName(top.kind),
                                      " in a compute-only program (lowered is false)"));
    case IndexFault::kRepeat:
      return ActionError(rank, f.index, top, RepeatWhat(part, f.first));
    case IndexFault::kReduceWaitFirst:
      return ActionError(rank, f.index, top,
                         absl::StrCat("waits for the gradient reduction of stage ", top.stage,
                                      ", which has not started (no REDUCE_GRAD before it)"));
    case IndexFault::kShardOrder:
      return ActionError(rank, f.index, top, ShardOrderWhat(top, f.first));
    case IndexFault::kNone:
      break;
  }
  return absl::OkStatus();
}

}  // namespace jitpipe
