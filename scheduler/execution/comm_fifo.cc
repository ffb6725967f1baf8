#include "scheduler/execution/comm_fifo.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/execution/rank_cursor.h"

namespace jitpipe {
namespace {

// One SEND or RECV of a rank: its communicator's number on the rank, its
// place in that queue and its partner.
struct Op {
  int32_t comm = -1;  // index into the rank's queues; -1: not an operation
  int32_t slot = 0;   // position in that queue
  Endpoint partner;
};

// A rank's operations on one communicator, in posting order.
struct Queue {
  Communicator communicator;
  std::vector<int32_t> indices;  // program indices
  size_t head = 0;               // the first not completed
};

// What blocks something in a stuck run: a rank (at its cursor) or one of
// its operations.
struct Node {
  bool host = true;
  int rank = 0;
  int32_t index = -1;  // the operation (for an op node)
  friend bool operator==(const Node&, const Node&) = default;
};

// The run of comm_fifo.h. Index spaces: rank; program index; per rank, its
// queues (communicators it uses, in first-use order) and positions in them.
class FifoRun {
 public:
  FifoRun(const Schedule& s, const CommPositions& positions, CommLayout layout, bool lazy)
      : s_(s), pos_(positions), layout_(layout), lazy_(lazy),
        cursors_(MakeCursors(s, positions, WaitModel::kRelaxed)), ops_(s.pp), queues_(s.pp),
        done_(s.pp), first_use_(s.pp), first_use_at_(s.pp) {
    for (int r = 0; r < s.pp; ++r) Index(r);
  }

  // Runs to the fixed point; true when everything ran and completed.
  bool Run() {
    std::vector<int> ready;
    std::vector<bool> queued(s_.pp, true);
    for (int r = s_.pp - 1; r >= 0; --r) ready.push_back(r);
    while (!ready.empty()) {
      const int r = ready.back();
      ready.pop_back();
      queued[r] = false;
      touched_.clear();
      Advance(r);
      for (int q : touched_) {
        if (!queued[q]) {
          queued[q] = true;
          ready.push_back(q);
        }
      }
    }
    for (int r = 0; r < s_.pp; ++r) {
      if (!cursors_[r].done()) return false;
      for (const Queue& q : queues_[r]) {
        if (q.head < q.indices.size()) return false;
      }
    }
    return true;
  }

  absl::Status Report() const;

 private:
  void Index(int r) {
    const RankProgram& program = s_.ranks[r];
    ops_[r].resize(program.size());
    done_[r].assign(program.size(), false);
    first_use_at_[r].assign(program.size(), false);
    absl::flat_hash_map<int64_t, int32_t> queue_of;  // communicator key -> queue
    for (int32_t i = 0; i < static_cast<int32_t>(program.size()); ++i) {
      const Action& a = program[i];
      if (!IsSendRecv(a.kind)) continue;
      const Communicator c = CommunicatorOf(pos_, layout_, r, a);
      const int64_t key = (static_cast<int64_t>(c.src) << 32) ^ static_cast<uint32_t>(c.dst);
      auto [it, fresh] = queue_of.try_emplace(key, static_cast<int32_t>(queues_[r].size()));
      if (fresh) {
        queues_[r].push_back({c, {}, 0});
        first_use_[r].push_back(i);
        first_use_at_[r][i] = true;
      }
      Queue& q = queues_[r][it->second];
      ops_[r][i] = {it->second, static_cast<int32_t>(q.indices.size()), Partner(pos_, a)};
      q.indices.push_back(i);
    }
  }

  bool Posted(int r, int32_t i) const { return cursors_[r].pc() > i; }

  // The first use of communicator `c` on rank r: its program index.
  int32_t FirstUseOn(int r, const Communicator& c) const {
    for (size_t k = 0; k < queues_[r].size(); ++k) {
      if (queues_[r][k].communicator == c) return first_use_[r][k];
    }
    return -1;
  }

  // Lazy creation: the members that have not reached their first use of
  // the communicator rank r first uses at action i (kAbsent: none left).
  int CreationBlocker(int r, int32_t i) const {
    const Op& op = ops_[r][i];
    if (!lazy_ || op.comm < 0 || first_use_[r][op.comm] != i) return kAbsent;
    const Communicator& c = queues_[r][op.comm].communicator;
    for (int m = 0; m < s_.pp; ++m) {
      if (m == r) continue;
      if (c.src >= 0 && m != c.src && m != c.dst) continue;
      const int32_t first = FirstUseOn(m, c);
      if (first >= 0 && cursors_[m].pc() < first) return m;
    }
    return kAbsent;
  }

  // Whether the instruction rank r's cursor is at may be carried out.
  bool Holds(int r, const Instruction& in) const {
    if (in.step == Step::kRun) return CreationBlocker(r, in.index) == kAbsent;
    if (in.step != Step::kWait) return true;
    switch (in.wait.kind) {
      case WaitKind::kTransfer:
      case WaitKind::kSendDone:
        return done_[r][in.wait.local];
      default:  // this rank's own UNSHARD or reduction: ran in program order
        return true;
    }
  }

  // Runs rank r's cursor as far as it holds, completing what it can.
  void Advance(int r) {
    RankCursor& c = cursors_[r];
    while (!c.done() && Holds(r, c.current())) {
      const Instruction in = c.current();
      c.Advance();
      if (in.step == Step::kRun && ops_[r][in.index].comm >= 0) {
        touched_.push_back(ops_[r][in.index].partner.rank);
        Complete(r, ops_[r][in.index].comm);
      }
      // A rank that reached a first use may let a creation go on.
      if (lazy_ && c.pc() < static_cast<int32_t>(first_use_at_[r].size()) &&
          first_use_at_[r][c.pc()]) {
        for (int m = 0; m < s_.pp; ++m) touched_.push_back(m);
      }
    }
    for (int32_t k = 0; k < static_cast<int32_t>(queues_[r].size()); ++k) Complete(r, k);
  }

  // Completes the heads of rank r's queue k while they and their partners
  // are posted and at the heads of theirs.
  void Complete(int r, int32_t k) {
    Queue& q = queues_[r][k];
    while (q.head < q.indices.size()) {
      const int32_t i = q.indices[q.head];
      if (!Posted(r, i)) return;
      const Endpoint& p = ops_[r][i].partner;
      const Op& other = ops_[p.rank][p.index];
      Queue& pq = queues_[p.rank][other.comm];
      if (!Posted(p.rank, p.index) || pq.head >= pq.indices.size() ||
          pq.indices[pq.head] != p.index) {
        return;
      }
      done_[r][i] = done_[p.rank][p.index] = true;
      ++q.head;
      ++pq.head;
      touched_.push_back(r);
      touched_.push_back(p.rank);
    }
  }

  // What `n` waits for in the stuck run, and the words for that edge.
  std::pair<Node, std::string> BlockerOf(const Node& n) const;
  std::string Name(int r, int32_t i) const { return s_.ranks[r][i].ToString(); }
  std::string On(const Communicator& c) const {
    return c.src < 0 ? "the group communicator" : absl::StrCat("communicator ", c.ToString());
  }

  const Schedule& s_;
  const CommPositions& pos_;
  const CommLayout layout_;
  const bool lazy_;
  std::vector<RankCursor> cursors_;
  std::vector<std::vector<Op>> ops_;       // per rank, per program index
  std::vector<std::vector<Queue>> queues_;  // per rank
  std::vector<std::vector<bool>> done_;     // per rank, per program index: completed
  std::vector<std::vector<int32_t>> first_use_;  // per rank, per queue
  std::vector<std::vector<bool>> first_use_at_;  // per rank, per program index
  std::vector<int> touched_;  // ranks that may move after the current Advance
};

std::pair<Node, std::string> FifoRun::BlockerOf(const Node& n) const {
  const int r = n.rank;
  if (n.host) {
    const Instruction& in = cursors_[r].current();
    const std::string where =
        absl::StrCat("rank ", r, " at index ", in.index, " (", Name(r, in.index), ")");
    if (in.step == Step::kWait) {
      const int32_t o = in.wait.local;
      return {Node{false, r, o},
              absl::StrCat(where, " waits for ", Name(r, o), " (index ", o, ") to complete")};
    }
    const int m = CreationBlocker(r, in.index);
    const Communicator& c = queues_[r][ops_[r][in.index].comm].communicator;
    const int32_t first = FirstUseOn(m, c);
    return {Node{true, m, -1},
            absl::StrCat(where, " creates communicator ", c.ToString(),
                         " (its first use) and waits for rank ", m,
                         " to create it too (its first use: index ", first, ", ",
                         Name(m, first), ")")};
  }
  const int32_t i = n.index;
  const Op& op = ops_[r][i];
  const Queue& q = queues_[r][op.comm];
  const std::string self = absl::StrCat(Name(r, i), " (rank ", r, ", index ", i, ")");
  if (!Posted(r, i)) {
    return {Node{true, r, -1}, absl::StrCat(self, " is not posted")};
  }
  if (q.indices[q.head] != i) {
    const int32_t h = q.indices[q.head];
    return {Node{false, r, h}, absl::StrCat(self, " is queued on ", On(q.communicator),
                                            " behind ", Name(r, h), " (index ", h, ")")};
  }
  const Endpoint& p = op.partner;
  const std::string partner =
      absl::StrCat("its partner ", Name(p.rank, p.index), " (rank ", p.rank, ", index ",
                   p.index, ")");
  if (!Posted(p.rank, p.index)) {
    return {Node{true, p.rank, -1},
            absl::StrCat(self, " waits for rank ", p.rank, " to post ", Name(p.rank, p.index),
                         " (index ", p.index, ")")};
  }
  const Queue& pq = queues_[p.rank][ops_[p.rank][p.index].comm];
  const int32_t h = pq.indices[pq.head];
  return {Node{false, p.rank, h},
          absl::StrCat(self, " waits for ", partner, ", queued on ", On(pq.communicator),
                       " behind ", Name(p.rank, h), " (index ", h, ")")};
}

absl::Status FifoRun::Report() const {
  // Start at the lowest stuck rank, or at the lowest rank's first
  // operation that never completed when every rank ran to its end.
  Node start;
  bool found = false;
  for (int r = 0; r < s_.pp && !found; ++r) {
    if (!cursors_[r].done()) {
      start = Node{true, r, -1};
      found = true;
    }
  }
  for (int r = 0; r < s_.pp && !found; ++r) {
    for (const Queue& q : queues_[r]) {
      if (q.head < q.indices.size() && !found) {
        start = Node{false, r, q.indices[q.head]};
        found = true;
      }
    }
  }
  if (!found) return absl::InternalError("a FIFO deadlock report without anything stuck");
  std::vector<Node> path;
  std::vector<std::string> edges;
  Node n = start;
  while (std::find(path.begin(), path.end(), n) == path.end()) {
    path.push_back(n);
    auto [next, words] = BlockerOf(n);
    edges.push_back(std::move(words));
    n = next;
  }
  const size_t begin = std::find(path.begin(), path.end(), n) - path.begin();
  std::vector<int> ranks;
  std::vector<std::string> cycle;
  for (size_t k = begin; k < path.size(); ++k) {
    if (ranks.empty() || ranks.back() != path[k].rank) ranks.push_back(path[k].rank);
    cycle.push_back(edges[k]);
  }
  // Rotate the cycle to start at its lowest rank.
  if (ranks.size() > 1 && ranks.front() == ranks.back()) ranks.pop_back();
  const auto lowest = std::min_element(ranks.begin(), ranks.end()) - ranks.begin();
  std::rotate(ranks.begin(), ranks.begin() + lowest, ranks.end());
  ranks.push_back(ranks.front());
  // Every other stuck rank (those in the cycle are described there).
  std::vector<std::string> stuck;
  for (int r = 0; r < s_.pp; ++r) {
    const Node host{true, r, -1};
    if (cursors_[r].done() ||
        std::find(path.begin() + static_cast<std::ptrdiff_t>(begin), path.end(), host) !=
            path.end()) {
      continue;
    }
    stuck.push_back(BlockerOf(host).second);
  }
  std::string message = absl::StrCat(
      "deadlock under FIFO completion on ",
      layout_ == CommLayout::kPerGroup ? "one communicator for the pipeline group"
                                       : "one communicator per directed pair of ranks",
      lazy_ ? " (created lazily)" : "", ": wait cycle ", absl::StrJoin(ranks, " -> "), ": ",
      absl::StrJoin(cycle, "; "));
  if (!stuck.empty()) absl::StrAppend(&message, "; stuck: ", absl::StrJoin(stuck, "; "));
  return absl::InvalidArgumentError(message);
}

}  // namespace

absl::string_view CommLayoutName(CommLayout layout) {
  return layout == CommLayout::kPerEdge ? "per-edge" : "per-group";
}

absl::StatusOr<CommLayout> ParseCommLayout(absl::string_view name) {
  if (name == "per-edge") return CommLayout::kPerEdge;
  if (name == "per-group") return CommLayout::kPerGroup;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown communicator layout \"", name, "\"; expected per-edge or per-group"));
}

std::string Communicator::ToString() const {
  return src < 0 ? "group" : absl::StrCat(src, "->", dst);
}

Communicator CommunicatorOf(const CommPositions& positions, CommLayout layout, int rank,
                            const Action& action) {
  if (layout == CommLayout::kPerGroup) return Communicator{};
  const int peer = Partner(positions, action).rank;
  return IsSend(action.kind) ? Communicator{rank, peer} : Communicator{peer, rank};
}

std::vector<std::vector<FirstUse>> FirstUses(const Schedule& schedule,
                                             const CommPositions& positions, CommLayout layout) {
  std::vector<std::vector<FirstUse>> out(schedule.pp);
  for (int r = 0; r < schedule.pp; ++r) {
    const RankProgram& program = schedule.ranks[r];
    for (int32_t i = 0; i < static_cast<int32_t>(program.size()); ++i) {
      if (!IsSendRecv(program[i].kind)) continue;
      const Communicator c = CommunicatorOf(positions, layout, r, program[i]);
      const bool seen = std::any_of(out[r].begin(), out[r].end(),
                                    [&](const FirstUse& u) { return u.communicator == c; });
      if (!seen) out[r].push_back({c, i});
    }
  }
  return out;
}

absl::Status CheckFifoDeadlockFree(const Schedule& schedule, const CommPositions& positions,
                                   CommLayout layout, bool lazy_creation) {
  FifoRun run(schedule, positions, layout, lazy_creation);
  if (run.Run()) return absl::OkStatus();
  return run.Report();
}

}  // namespace jitpipe
