#include "scheduler/passes/place_recvs_jit_rendezvous.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "scheduler/passes/message_index.h"
#include "scheduler/passes/pass_utils.h"

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

// Posted, unmatched RECVs of one rank; front() is the one the rank is at.
// A vector with a moving head: pushes at the back are the common case.
class PendingRecvs {
 public:
  bool empty() const { return head_ == items_.size(); }
  int32_t front() const { return items_[head_]; }
  void push_back(int32_t m) { items_.push_back(m); }
  void pop_front() {
    if (++head_ == items_.size()) {
      items_.clear();
      head_ = 0;
    }
  }
  // Moves `m` (posted, or new) to the front.
  void MoveToFront(int32_t m) {
    auto it = std::find(items_.begin() + static_cast<std::ptrdiff_t>(head_), items_.end(), m);
    if (it != items_.end()) items_.erase(it);
    if (head_ > 0) {
      items_[--head_] = m;
    } else {
      items_.insert(items_.begin(), m);
    }
  }

 private:
  std::vector<int32_t> items_;
  size_t head_ = 0;
};

// Replays the program under rendezvous semantics, placing each RECV when its
// consumer is reached, and breaks every cycle of waiting ranks (see the
// header). Index spaces: ranks; per rank its input program, whose RECVs the
// replay skips, and its pending RECVs; messages and pairs (MessageIndex).
class Replay {
 public:
  Replay(const Schedule& in, const MessageIndex& messages)
      : in_(in), msg_(messages), ranks_(in.pp), next_post_(messages.num_pairs(), 0) {
    for (int r = 0; r < in.pp; ++r) {
      RankState& st = ranks_[r];
      st.program = &in.ranks[r];
      st.out.reserve(st.program->size());
      int forwards = 0;
      for (const Action& a : *st.program) {
        forwards += ForwardsDelta(a);
        st.max_forwards = std::max(st.max_forwards, forwards);
      }
      SkipRecvs(st);
    }
  }

  absl::StatusOr<std::vector<RankProgram>> Run() {
    for (int r = in_.pp - 1; r >= 0; --r) Enqueue(r);
    while (true) {
      while (!work_.empty()) {
        const int r = work_.back();
        work_.pop_back();
        RETURN_IF_ERROR(Advance(r));
      }
      if (finished_ == in_.pp) break;
      RETURN_IF_ERROR(BreakAllCycles());
    }
    std::vector<RankProgram> out;
    out.reserve(in_.pp);
    for (RankState& st : ranks_) out.push_back(std::move(st.out));
    return out;
  }

 private:
  struct RankState {
    const RankProgram* program = nullptr;  // the input's, borrowed
    size_t pos = 0;          // next action of `program`, never a RECV
    int32_t ran = 0;         // non-RECV actions of `program` done
    PendingRecvs pending;    // posted RECVs, unmatched
    int waits_on = kNoRank;  // the rank it is blocked on
    bool queued = false;
    bool done = false;
    int forwards = 0;        // forwards run whose stash is still held (their B or W not run)
    int max_forwards = 0;    // the most there will ever be
    RankProgram out;
  };

  void Enqueue(int r) {
    RankState& st = ranks_[r];
    if (r == running_ || st.queued || st.done) return;
    st.queued = true;
    work_.push_back(r);
  }

  static void SkipRecvs(RankState& st) {
    while (st.pos < st.program->size() && IsRecv((*st.program)[st.pos].kind)) ++st.pos;
  }
  // The next action of `st` and what it is.
  static const Action& Next(const RankState& st) { return (*st.program)[st.pos]; }

  bool AtSend(int r, int32_t m) const {
    const RankState& st = ranks_[r];
    return st.pending.empty() && st.pos < st.program->size() && IsSend(Next(st).kind) &&
           msg_.OfSend(Next(st)) == m;
  }
  bool AtRecv(int r, int32_t m) const {
    const RankState& st = ranks_[r];
    return !st.pending.empty() && st.pending.front() == m;
  }

  // Both ranks are at message m: the SEND and the RECV happen.
  void Rendezvous(int32_t m) {
    const int from_rank = msg_.sender(m);
    RankState& from = ranks_[from_rank];
    RankState& to = ranks_[msg_.receiver(m)];
    const Action& send = Next(from);
    to.out.push_back(send.kind == ActionKind::kSendF
                         ? SimpleAction(ActionKind::kRecvF, send.stage + 1, send.microbatch)
                         : SimpleAction(ActionKind::kRecvB, send.stage - 1, send.microbatch));
    from.out.push_back(CopyOf(send));
    ++from.pos;
    ++from.ran;
    SkipRecvs(from);
    to.pending.pop_front();
    Enqueue(from_rank);
    Enqueue(msg_.receiver(m));
  }

  // Posts message m (if not yet posted) after the unposted earlier messages
  // of its pair. Returns whether it posted any.
  bool Post(int r, int32_t m) {
    if (m == kNoMessage) return false;
    int32_t& next = next_post_[msg_.pair(m)];
    const bool posting = next <= msg_.order(m);
    for (; next <= msg_.order(m); ++next) {
      ranks_[r].pending.push_back(msg_.sequence(msg_.pair(m))[next]);
    }
    return posting;
  }

  // Posts the RECVs `a` consumes that are not posted yet; whether it posted any.
  bool PostInputs(int r, const Action& a) {
    bool posted = false;
    ForEachComputePart(a, [&](const Action& leaf) { posted |= Post(r, msg_.ConsumedBy(r, leaf)); });
    return posted;
  }

  // Runs rank r until it blocks or finishes; if it blocks, breaks the cycle
  // of waits it may have closed.
  absl::Status Advance(int r) {
    RankState& st = ranks_[r];
    st.queued = false;
    running_ = r;
    RunUntilBlocked(r, st);
    running_ = kNoRank;
    return st.done ? absl::OkStatus() : BreakCycleThrough(r);
  }

  // Each turn of the loop does one thing: match the pending RECV in front,
  // finish, match a SEND, post the RECVs a compute needs, or run it.
  void RunUntilBlocked(int r, RankState& st) {
    while (true) {
      if (!st.pending.empty()) {
        const int32_t m = st.pending.front();
        if (!AtSend(msg_.sender(m), m)) {
          st.waits_on = msg_.sender(m);
          return;
        }
        Rendezvous(m);
        continue;
      }
      if (st.pos == st.program->size()) {
        st.done = true;
        ++finished_;
        return;
      }
      const Action& a = Next(st);
      if (IsSend(a.kind)) {
        const int32_t m = msg_.OfSend(a);
        if (!AtRecv(msg_.receiver(m), m)) {
          st.waits_on = msg_.receiver(m);
          return;
        }
        Rendezvous(m);
        continue;
      }
      if (PostInputs(r, a)) continue;
      st.out.push_back(CopyOf(a));
      st.forwards += ForwardsDelta(a);
      ++st.pos;
      ++st.ran;
      SkipRecvs(st);
    }
  }

  // Cycles of waits are broken as they form, which gives the same program as
  // breaking them when no rank can move: a cycle never opens by itself, and
  // its ranks (and so the repair) stay as they are until it is broken.
  //
  // A rank not queued and not finished is blocked, and its waits_on is
  // current. A cycle closes at the rank that blocked last, so following the
  // waits from there finds it; the walk is cut after kLocalWalk ranks (waits
  // can form long chains) and BreakAllCycles() catches longer cycles.
  static constexpr int kLocalWalk = 8;

  absl::Status BreakCycleThrough(int r) {
    int x = ranks_[r].waits_on;
    for (int steps = 0; x != r; ++steps) {
      const RankState& st = ranks_[x];
      if (st.done || st.queued || steps == kLocalWalk) return absl::OkStatus();
      x = st.waits_on;
    }
    return BreakCycle(CycleFrom(r));
  }

  // The ranks of the cycle through x, in cycle_ (reused: cycles are many).
  const std::vector<int>& CycleFrom(int x) {
    cycle_.clear();
    int y = x;
    do {
      cycle_.push_back(y);
      y = ranks_[y].waits_on;
    } while (y != x);
    return cycle_;
  }

  // Called when no rank can move: every unfinished rank waits on another.
  absl::Status BreakAllCycles() {
    std::vector<int> walk(in_.pp, kNoRank);  // the walk that first reached a rank
    bool broken = false;
    for (int start = 0; start < in_.pp; ++start) {
      int x = start;
      while (!ranks_[x].done && walk[x] == kNoRank) {
        walk[x] = start;
        x = ranks_[x].waits_on;
      }
      // A walk that ends at a finished rank, or joins an earlier walk, found no new cycle.
      if (ranks_[x].done || walk[x] != start) continue;
      RETURN_IF_ERROR(BreakCycle(CycleFrom(x)));
      broken = true;
    }
    if (!broken) return absl::InternalError("ranks wait on ranks that have finished");
    return absl::OkStatus();
  }

  // What receiving message m early at `receiver` (where it is blocked) costs,
  // smaller first: how many of its actions the buffer is held for before its
  // consumer, then how close the receiver is to its most held stashes (a rank
  // that has just run a backward has room), then the rank.
  std::tuple<int32_t, int, int> EarlyRecvCost(int32_t m, int receiver) const {
    const RankState& st = ranks_[receiver];
    return {msg_.consumer(m) - st.ran, st.forwards - st.max_forwards, receiver};
  }

  // Of the cycle's ranks blocked at a SEND, the receiver for which receiving
  // early costs least posts the RECV where it is blocked.
  absl::Status BreakCycle(const std::vector<int>& cycle) {
    int32_t best = kNoMessage;  // the message to receive early
    int receiver = kNoRank;
    for (int r : cycle) {
      const RankState& st = ranks_[r];
      if (!st.pending.empty()) continue;  // blocked at a RECV
      const int32_t m = msg_.OfSend(Next(st));
      if (best == kNoMessage ||
          EarlyRecvCost(m, msg_.receiver(m)) < EarlyRecvCost(best, receiver)) {
        best = m;
        receiver = msg_.receiver(m);
      }
    }
    if (best == kNoMessage) return CycleOfReceives(cycle);
    int32_t& next = next_post_[msg_.pair(best)];
    // Every earlier message of the pair has been sent, so has been received:
    // `best` is posted (behind another peer's RECV) or the next to post.
    if (msg_.order(best) > next) {
      return absl::InternalError("an earlier message of the pair is still unmatched");
    }
    if (msg_.order(best) == next) ++next;
    ranks_[receiver].pending.MoveToFront(best);
    Enqueue(receiver);
    return absl::OkStatus();
  }

  // Every rank of the cycle waits at a RECV: the computes wait on each other.
  absl::Status CycleOfReceives(const std::vector<int>& cycle) const {
    std::string message = "the computes wait on each other in a cycle: ";
    for (size_t k = 0; k < cycle.size(); ++k) {
      const RankState& st = ranks_[cycle[k]];
      absl::StrAppend(&message, k == 0 ? "" : "; ", Where(cycle[k], st.pos, Next(st)),
                      " waits for ",
                      msg_.RecvAction(st.pending.front()).ToString(), " from rank ", st.waits_on);
    }
    return absl::InvalidArgumentError(message);
  }

  const Schedule& in_;
  const MessageIndex& msg_;
  std::vector<RankState> ranks_;
  std::vector<int32_t> next_post_;  // per pair: how many of its messages are posted
  std::vector<int> work_;           // ranks to advance
  int running_ = kNoRank;             // the rank Advance() is running
  std::vector<int> cycle_;          // CycleFrom()'s result
  int finished_ = 0;
};

}  // namespace

absl::StatusOr<Schedule> PlaceRecvsJitRendezvous(const Schedule& in) {
  ASSIGN_OR_RETURN(const MessageIndex messages, MessageIndex::Build(in));
  ASSIGN_OR_RETURN(std::vector<RankProgram> ranks, Replay(in, messages).Run());
  return WithPrograms(in, std::move(ranks), /*lowered=*/true);
}

}  // namespace jitpipe
