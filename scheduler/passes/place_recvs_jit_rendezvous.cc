#include "scheduler/passes/place_recvs_jit_rendezvous.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "scheduler/analysis/comm_matching.h"
#include "scheduler/execution/rank_cursor.h"
#include "scheduler/execution/run_ranks.h"
#include "scheduler/analysis/message_index.h"
#include "scheduler/analysis/pass_utils.h"

namespace jitpipe {
namespace {

// Change in the forwards whose stash a rank holds: +1 per F, -1 per B or W.
int ForwardsDelta(const Action& a) {
  int delta = 0;
  ForEachComputePart(a, [&](const Action& leaf) {
    if (leaf.kind == ActionKind::kForward) ++delta;
    if (leaf.kind == ActionKind::kBackward || leaf.kind == ActionKind::kBackwardWeight) --delta;
  });
  return delta;
}

// Rules 1-3, which depend on no other rank: the input without its RECVs,
// each compute preceded by the RECVs it consumes, each of those after the
// earlier messages of its pair not yet placed. `input_index[r][i]` is the
// input's index of rank r's action i (kAbsent for a RECV), for messages.
std::vector<RankProgram> PlaceBeforeConsumers(const Schedule& in, const MessageIndex& msg,
                                              std::vector<std::vector<int32_t>>& input_index) {
  std::vector<RankProgram> out(in.pp);
  input_index.assign(in.pp, {});
  std::vector<int32_t> next_post(msg.num_pairs(), 0);  // per pair: messages placed
  for (int r = 0; r < in.pp; ++r) {
    const RankProgram& program = in.ranks[r];
    out[r].reserve(program.size());
    input_index[r].reserve(program.size());
    auto place = [&](int32_t m) {
      if (m == kNoMessage) return;
      int32_t& next = next_post[msg.pair(m)];
      for (; next <= msg.order(m); ++next) {
        out[r].push_back(msg.RecvAction(msg.sequence(msg.pair(m))[next]));
        input_index[r].push_back(kAbsent);
      }
    };
    for (size_t i = 0; i < program.size(); ++i) {
      const Action& a = program[i];
      if (IsRecv(a.kind)) continue;
      ForEachComputePart(a, [&](const Action& leaf) { place(msg.ConsumedBy(r, leaf)); });
      out[r].push_back(CopyOf(a));
      input_index[r].push_back(static_cast<int32_t>(i));
    }
  }
  return out;
}

// Rule 4: the program replayed by the ranks' cursors under strict semantics
// (scheduler/execution/rank_cursor.h, RunRanks), each cycle of waiting
// ranks broken by moving one RECV to where its receiver is blocked, until
// every rank finishes. Cycles are broken once no rank can move: a cycle
// never opens by itself, and its ranks (and so its repair) stay as they are
// until it is broken, so breaking them as they form would give the same
// program. Index spaces: ranks; each rank's program (edited in place, its
// cursor and the positions kept in step); messages and pairs (MessageIndex).
class Repair {
 public:
  Repair(Schedule& work, const MessageIndex& messages,
         const std::vector<std::vector<int32_t>>& input_index)
      : s_(work), msg_(messages), input_index_(input_index), ran_(work.pp, 0),
        forwards_(work.pp, 0), max_forwards_(work.pp, 0) {
    for (int r = 0; r < work.pp; ++r) {
      int forwards = 0;
      for (const Action& a : work.ranks[r]) {
        forwards += ForwardsDelta(a);
        max_forwards_[r] = std::max(max_forwards_[r], forwards);
      }
    }
  }

  absl::Status Run() {
    ASSIGN_OR_RETURN(positions_, MatchSendRecv(s_));
    cursors_ = MakeCursors(s_, positions_, WaitModel::kStrict);
    auto visit = [this](int r, const Instruction& in) {
      if (in.step != Step::kRun) return;
      const Action& a = s_.ranks[r][in.index];
      if (IsRecv(a.kind)) return;
      ++ran_[r];
      forwards_[r] += ForwardsDelta(a);
    };
    while (!RunRanks(absl::MakeSpan(cursors_), visit)) RETURN_IF_ERROR(BreakAllCycles());
    return absl::OkStatus();
  }

 private:
  int WaitsOn(int r) const { return cursors_[r].current().wait.rank; }

  // Every unfinished rank waits on another: each cycle among them is broken.
  absl::Status BreakAllCycles() {
    std::vector<int> walk(s_.pp, kAbsent);  // the walk that first reached a rank
    std::vector<std::vector<int>> cycles;
    for (int start = 0; start < s_.pp; ++start) {
      int x = start;
      while (!cursors_[x].done() && walk[x] == kAbsent) {
        walk[x] = start;
        x = WaitsOn(x);
      }
      // A walk that ends at a finished rank, or joins an earlier walk, found no new cycle.
      if (cursors_[x].done() || walk[x] != start) continue;
      std::vector<int>& cycle = cycles.emplace_back();
      int y = x;
      do {
        cycle.push_back(y);
        y = WaitsOn(y);
      } while (y != x);
    }
    if (cycles.empty()) return absl::InternalError("ranks wait on ranks that have finished");
    for (const std::vector<int>& cycle : cycles) RETURN_IF_ERROR(BreakCycle(cycle));
    return absl::OkStatus();
  }

  // What receiving message m early at `receiver` (where it is blocked) costs,
  // smaller first: how many of its actions the buffer is held for before its
  // consumer, then how close the receiver is to its most held stashes (a rank
  // that has just run a backward has room), then the rank.
  std::tuple<int32_t, int, int> EarlyRecvCost(int32_t m, int receiver) const {
    return {msg_.consumer(m) - ran_[receiver], forwards_[receiver] - max_forwards_[receiver],
            receiver};
  }

  // Of the cycle's ranks blocked at a SEND, the receiver for which receiving
  // early costs least posts the RECV where it is blocked.
  absl::Status BreakCycle(const std::vector<int>& cycle) {
    int32_t best = kNoMessage;  // the message to receive early
    int receiver = kAbsent;
    for (int r : cycle) {
      const Action& a = s_.ranks[r][cursors_[r].current().index];
      if (!IsSend(a.kind)) continue;  // blocked at a RECV
      const int32_t m = msg_.OfSend(a);
      if (best == kNoMessage ||
          EarlyRecvCost(m, msg_.receiver(m)) < EarlyRecvCost(best, receiver)) {
        best = m;
        receiver = msg_.receiver(m);
      }
    }
    if (best == kNoMessage) return CycleOfReceives(cycle);
    MoveRecvTo(receiver, best, cursors_[receiver].current().index);
    return absl::OkStatus();
  }

  // Moves message m's RECV on `rank` to index p (where the rank is blocked;
  // the RECV is later: its sender waits for it), shifting what stood between
  // by one, and brings the positions and the cursors that wait on `rank` up
  // to date. Only the index's transfer tables are kept up to date: they are
  // all the cursors' wait rules read (its compute tables and per-rank lists
  // go stale, and nothing here reads them). Cost: the distance moved, plus a
  // look at every cursor.
  void MoveRecvTo(int rank, int32_t m, int32_t p) {
    RankProgram& program = s_.ranks[rank];
    const Action recv = msg_.RecvAction(m);
    const bool forward = recv.kind == ActionKind::kRecvF;
    std::vector<int32_t>& recvs = forward ? positions_.recv_f : positions_.recv_b;
    const int32_t q = positions_.At(recvs, recv.stage, recv.microbatch);
    std::rotate(program.begin() + p, program.begin() + q, program.begin() + q + 1);
    for (int32_t i = p; i <= q; ++i) {
      const Action& a = program[i];
      if (!IsTransfer(a.kind)) continue;
      std::vector<int32_t>* table = nullptr;
      switch (a.kind) {
        case ActionKind::kSendF: table = &positions_.send_f; break;
        case ActionKind::kRecvF: table = &positions_.recv_f; break;
        case ActionKind::kSendB: table = &positions_.send_b; break;
        default: table = &positions_.recv_b; break;
      }
      (*table)[static_cast<size_t>(a.stage) * positions_.microbatches + a.microbatch] = i;
    }
    for (RankCursor& c : cursors_) {
      if (!c.done() && (c.rank() == rank || c.current().wait.rank == rank)) c.Reenter();
    }
  }

  // Every rank of the cycle waits at a RECV: the computes wait on each other.
  absl::Status CycleOfReceives(const std::vector<int>& cycle) const {
    std::string message = "the computes wait on each other in a cycle: ";
    for (size_t k = 0; k < cycle.size(); ++k) {
      const int r = cycle[k];
      const RankProgram& program = s_.ranks[r];
      const int32_t at = cursors_[r].current().index;
      int32_t next = at;  // the compute the RECVs in front of it are for
      while (next < static_cast<int32_t>(program.size()) && IsRecv(program[next].kind)) ++next;
      absl::StrAppend(&message, k == 0 ? "" : "; ",
                      Where(r, input_index_[r][next], program[next]), " waits for ",
                      program[at].ToString(), " from rank ", WaitsOn(r));
    }
    return absl::InvalidArgumentError(message);
  }

  Schedule& s_;
  const MessageIndex& msg_;
  const std::vector<std::vector<int32_t>>& input_index_;
  CommPositions positions_;
  std::vector<RankCursor> cursors_;
  std::vector<int32_t> ran_;      // per rank: non-RECV actions run
  std::vector<int> forwards_;     // per rank: forwards run whose stash is still held
  std::vector<int> max_forwards_; // per rank: the most there will ever be
};

}  // namespace

absl::StatusOr<Schedule> PlaceRecvsJitRendezvous(const Schedule& in) {
  ASSIGN_OR_RETURN(const MessageIndex messages, MessageIndex::Build(in));
  std::vector<std::vector<int32_t>> input_index;
  Schedule work = WithPrograms(in, PlaceBeforeConsumers(in, messages, input_index),
                               /*lowered=*/true);
  RETURN_IF_ERROR(Repair(work, messages, input_index).Run());
  return work;
}

}  // namespace jitpipe
