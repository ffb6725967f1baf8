#include "scheduler/passes/place_recvs_just_in_time.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "scheduler/passes/pass_utils.h"

namespace jitpipe {
namespace {

constexpr int32_t kNone = -1;

// Change in the forwards whose stash a rank holds: +1 per F, -1 per B or W.
int ForwardsDelta(const Action& a) {
  int delta = 0;
  ForEachComputePart(a, [&](const Action& leaf) {
    if (leaf.kind == ActionKind::kForward) ++delta;
    if (leaf.kind == ActionKind::kBackward || leaf.kind == ActionKind::kBackwardWeight) --delta;
  });
  return delta;
}

// The messages of a lowered program, numbered by their RECV: RECV_F of
// (stage s, microbatch mb) is PhaseKey(s, mb), RECV_B is PhaseTableSize() +
// PhaseKey(s, mb). A message goes over a directed "pair" (sender, receiver)
// of ranks, whose messages match in the sender's order.
class Messages {
 public:
  explicit Messages(const Schedule& s)
      : s_(s),
        links_(LinksOf(s)),
        mbs_(static_cast<size_t>(s.microbatches_per_chain())),
        table_(PhaseTableSize(s)),
        info_(2 * table_),
        consumer_(2 * table_, 0),
        pair_index_(static_cast<size_t>(s.pp) * s.pp, kNone) {}

  // Indexes the program and checks that SENDs and RECVs match one to one,
  // and every action's indices (CheckActionIndices) in the same sweep.
  // REQUIRES: ValidateHeader(s) passed.
  absl::Status Index();

  // The message `leaf` (F, I or B) consumes on `rank`; kNone when there is
  // no RECV for it there (its input comes from this rank, or it is a W).
  int32_t ConsumedBy(int rank, const Action& leaf) const {
    const int32_t m = Consumes(leaf);
    return m != kNone && info_[m].receiver == rank ? m : kNone;
  }
  // The message a SEND sends.
  int32_t OfSend(const Action& send) const {
    return send.kind == ActionKind::kSendF ? Id(true, send.stage + 1, send.microbatch)
                                           : Id(false, send.stage - 1, send.microbatch);
  }
  Action RecvAction(int32_t m) const;

  int sender(int32_t m) const { return info_[m].sender; }
  int receiver(int32_t m) const { return info_[m].receiver; }
  int32_t pair(int32_t m) const { return info_[m].pair; }
  int32_t order(int32_t m) const { return info_[m].order; }  // position within its pair
  // Position of m's consumer among the non-RECV actions of its receiver's
  // program (so it does not depend on where the input put the RECVs).
  int32_t consumer(int32_t m) const { return info_[m].consumer; }
  const std::vector<int32_t>& sequence(int32_t pair) const { return sequences_[pair]; }
  size_t num_pairs() const { return sequences_.size(); }

 private:
  int32_t Id(bool forward, int stage, int mb) const {
    return static_cast<int32_t>((forward ? 0 : table_) + static_cast<size_t>(stage) * mbs_ +
                                static_cast<size_t>(mb));
  }
  int32_t Consumes(const Action& leaf) const {
    if (leaf.kind == ActionKind::kForward) return Id(true, leaf.stage, leaf.microbatch);
    if (leaf.kind == ActionKind::kBackward || leaf.kind == ActionKind::kBackwardInput) {
      return Id(false, leaf.stage, leaf.microbatch);
    }
    return kNone;
  }
  absl::Status IndexRecv(int rank, size_t index, const Action& a);
  absl::Status IndexSend(int rank, size_t index, const Action& a);
  absl::Status CheckMatched() const;

  // Per message, together so that the replay's lookups share a cache line.
  struct Info {
    int32_t sender = kNone;    // rank of its SEND; kNone when absent
    int32_t receiver = kNone;  // rank of its RECV; kNone when absent
    int32_t pair = kNone;
    int32_t order = kNone;     // position within its pair
    int32_t consumer = kNone;
  };

  const Schedule& s_;
  const std::vector<StageLinks> links_;
  const size_t mbs_;  // microbatches per chain: the stride of a stage's ids
  const size_t table_;
  std::vector<Info> info_;
  std::vector<uint8_t> consumer_;  // a compute that would consume it exists
  std::vector<int32_t> pair_index_;              // sender * pp + receiver -> pair
  std::vector<std::vector<int32_t>> sequences_;  // per pair, in the sender's order
};

Action Messages::RecvAction(int32_t m) const {
  const bool forward = static_cast<size_t>(m) < table_;
  const size_t key = static_cast<size_t>(m) - (forward ? 0 : table_);
  const size_t mbs = mbs_;
  return SimpleAction(forward ? ActionKind::kRecvF : ActionKind::kRecvB,
                      static_cast<int32_t>(key / mbs), static_cast<int32_t>(key % mbs));
}

absl::Status Messages::IndexRecv(int rank, size_t index, const Action& a) {
  const bool forward = a.kind == ActionKind::kRecvF;
  const StageLinks& link = links_[a.stage];
  if ((forward ? link.prev_rank : link.next_rank) == kNoRank) {
    return absl::FailedPreconditionError(absl::StrCat(
        Where(rank, index, a), ": nothing sends to this stage in that direction"));
  }
  const int32_t m = Id(forward, a.stage, a.microbatch);
  if (info_[m].receiver != kNone) {
    return absl::FailedPreconditionError(
        absl::StrCat(Where(rank, index, a), ": a second receive of the same message"));
  }
  info_[m].receiver = rank;
  return absl::OkStatus();
}

absl::Status Messages::IndexSend(int rank, size_t index, const Action& a) {
  auto fail = [&](absl::string_view what) {
    return absl::FailedPreconditionError(absl::StrCat(Where(rank, index, a), ": ", what));
  };
  const bool forward = a.kind == ActionKind::kSendF;
  const int to = forward ? links_[a.stage].next_rank : links_[a.stage].prev_rank;
  if (to == kNoRank) return fail("the stage has no neighbour in that direction");
  const int32_t m = OfSend(a);
  Info& info = info_[m];
  if (info.sender != kNone) return fail("a second send of the same message");
  if (to == rank) return fail("a send between two stages of one rank");
  info.sender = rank;
  int32_t& p = pair_index_[static_cast<size_t>(rank) * s_.pp + to];
  if (p == kNone) {
    p = static_cast<int32_t>(sequences_.size());
    sequences_.emplace_back();
  }
  info.pair = p;
  info.order = static_cast<int32_t>(sequences_[p].size());
  sequences_[p].push_back(m);
  return absl::OkStatus();
}

absl::Status Messages::Index() {
  // One sweep over every rank's program (index spaces: rank, program index).
  for (int r = 0; r < s_.pp; ++r) {
    const RankProgram& program = s_.ranks[r];
    int32_t non_recvs = 0;  // non-RECV actions before index i
    for (size_t i = 0; i < program.size(); ++i) {
      const Action& a = program[i];
      if (a.is_bubble()) {
        return absl::FailedPreconditionError(
            absl::StrCat(Where(r, i, a), ": expected a lowered program without bubbles"));
      }
      RETURN_IF_ERROR(CheckActionIndices(s_, r, i, a));
      if (IsRecv(a.kind)) {
        RETURN_IF_ERROR(IndexRecv(r, i, a));
        continue;
      }
      if (IsSend(a.kind)) {
        RETURN_IF_ERROR(IndexSend(r, i, a));
      } else {
        ForEachComputePart(a, [&](const Action& leaf) {
          const int32_t m = Consumes(leaf);
          if (m == kNone) return;
          consumer_[m] = 1;
          if (info_[m].consumer == kNone) info_[m].consumer = non_recvs;
        });
      }
      ++non_recvs;
    }
  }
  return CheckMatched();
}

absl::Status Messages::CheckMatched() const {
  for (size_t m = 0; m < info_.size(); ++m) {
    const Info& info = info_[m];
    if (info.receiver == kNone && info.sender == kNone) continue;
    const Action recv = RecvAction(static_cast<int32_t>(m));
    if (info.sender == kNone) {
      return absl::FailedPreconditionError(
          absl::StrCat("rank ", info.receiver, ": ", recv.ToString(), " has no matching send"));
    }
    if (info.receiver == kNone) {
      return absl::FailedPreconditionError(
          absl::StrCat("rank ", info.sender, ": a send to stage ", recv.stage,
                       " has no matching ", recv.ToString(), " on rank ", s_.RankOf(recv.stage)));
    }
    // A stage's actions all live on its rank, so the consumer is on the RECV's rank.
    if (!consumer_[m]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", info.receiver, ": ", recv.ToString(), " has no consumer on that rank"));
    }
  }
  return absl::OkStatus();
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
// replay skips, and its pending RECVs; messages and pairs (Messages).
class Replay {
 public:
  Replay(const Schedule& in, const Messages& messages)
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
    size_t pos = 0;        // next action of `program`, never a RECV
    int32_t ran = 0;       // non-RECV actions of `program` done
    PendingRecvs pending;  // posted RECVs, unmatched
    int waits_on = kNone;  // the rank it is blocked on
    bool queued = false;
    bool done = false;
    int forwards = 0;      // forwards run whose stash is still held (their B or W not run)
    int max_forwards = 0;  // the most there will ever be
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
    if (m == kNone) return false;
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
    running_ = kNone;
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
    std::vector<int> walk(in_.pp, kNone);  // the walk that first reached a rank
    bool broken = false;
    for (int start = 0; start < in_.pp; ++start) {
      int x = start;
      while (!ranks_[x].done && walk[x] == kNone) {
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
    int32_t best = kNone;  // the message to receive early
    int receiver = kNone;
    for (int r : cycle) {
      const RankState& st = ranks_[r];
      if (!st.pending.empty()) continue;  // blocked at a RECV
      const int32_t m = msg_.OfSend(Next(st));
      if (best == kNone || EarlyRecvCost(m, msg_.receiver(m)) < EarlyRecvCost(best, receiver)) {
        best = m;
        receiver = msg_.receiver(m);
      }
    }
    if (best == kNone) return CycleOfReceives(cycle);
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
  const Messages& msg_;
  std::vector<RankState> ranks_;
  std::vector<int32_t> next_post_;  // per pair: how many of its messages are posted
  std::vector<int> work_;           // ranks to advance
  int running_ = kNone;             // the rank Advance() is running
  std::vector<int> cycle_;          // CycleFrom()'s result
  int finished_ = 0;
};

}  // namespace

absl::StatusOr<Schedule> PlaceRecvsJustInTime(const Schedule& in) {
  RETURN_IF_ERROR(ValidateHeader(in));
  if (!in.lowered) {
    return absl::FailedPreconditionError(
        "expected a lowered program (sends and receives placed, e.g. by "
        "LowerSendRecvEarly); this one is compute-only");
  }
  Messages messages(in);
  RETURN_IF_ERROR(messages.Index());
  ASSIGN_OR_RETURN(std::vector<RankProgram> ranks, Replay(in, messages).Run());
  return WithPrograms(in, std::move(ranks), /*lowered=*/true);
}

}  // namespace jitpipe
