#include "scheduler/passes/lower_send_recv_early.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "scheduler/analysis/program_index.h"
#include "scheduler/analysis/pass_utils.h"

namespace jitpipe {
namespace {

constexpr int kMaxStuckRanksNamed = 8;

// The round-robin of PyTorch's _add_send_recv. "Placed" sets are dense flags
// per (stage, microbatch): a stage lives on one rank, so "F of s-1 placed on
// this rank" is "F of s-1 placed, and s-1 lives here".
class RoundRobin {
 public:
  explicit RoundRobin(const Schedule& in)
      : in_(in),
        links_(StageLinksOf(in)),
        forward_done_(PhaseTableSize(in), 0),
        backward_done_(PhaseTableSize(in), 0),
        recv_f_(PhaseTableSize(in), 0),
        recv_b_(PhaseTableSize(in), 0),
        head_(in.pp, 0),
        out_(in.pp) {
    // Each compute leaf adds at most one SEND here and one RECV on its
    // consumer's rank, which holds the consumer, a leaf too.
    for (int r = 0; r < in.pp; ++r) {
      size_t leaves = 0;
      for (const Action& a : in.ranks[r]) leaves += a.is_compound() ? a.sub_actions.size() : 1;
      out_[r].reserve(in.ranks[r].size() + 2 * leaves);
    }
  }

  absl::StatusOr<std::vector<RankProgram>> Run() {
    std::vector<int> active;  // ranks with actions left, ascending
    for (int r = 0; r < in_.pp; ++r) {
      if (!in_.ranks[r].empty()) active.push_back(r);
    }
    while (!active.empty()) {
      bool progress = false;
      for (int r : active) {
        const Action& head = in_.ranks[r][head_[r]];
        if (!Ready(r, head)) continue;
        if (!head.is_bubble()) Place(r, head);
        ++head_[r];
        progress = true;
      }
      if (!progress) return NoProgressError(active);
      std::erase_if(active, [&](int r) { return head_[r] == in_.ranks[r].size(); });
    }
    return std::move(out_);
  }

 private:
  size_t Key(int stage, int mb) const { return static_cast<size_t>(stage) * mbs_ + mb; }

  bool LeafReady(int rank, const Action& leaf) const {
    const int s = leaf.stage;
    const StageLink& link = links_[s];
    if (leaf.kind == ActionKind::kForward && link.prev_rank != kAbsent) {
      return recv_f_[Key(s, leaf.microbatch)] ||
             (link.prev_rank == rank && forward_done_[Key(s - 1, leaf.microbatch)]);
    }
    if ((leaf.kind == ActionKind::kBackward || leaf.kind == ActionKind::kBackwardInput) &&
        link.next_rank != kAbsent) {
      return recv_b_[Key(s, leaf.microbatch)] ||
             (link.next_rank == rank && backward_done_[Key(s + 1, leaf.microbatch)]);
    }
    return true;
  }

  bool Ready(int rank, const Action& a) const {
    if (a.is_bubble()) return true;  // it only spends its round-robin turn
    if (!a.is_compound()) return LeafReady(rank, a);
    for (const Action& sub : a.sub_actions) {
      if (!LeafReady(rank, sub)) return false;
    }
    return true;
  }

  void Place(int rank, const Action& a) {
    out_[rank].push_back(CopyOf(a));
    if (!a.is_compound()) {
      PlaceLeaf(rank, a);
      return;
    }
    for (const Action& sub : a.sub_actions) PlaceLeaf(rank, sub);
  }

  // Marks the leaf placed and, when its result goes to another rank, appends
  // the SEND here and the RECV there.
  void PlaceLeaf(int rank, const Action& leaf) {
    const int s = leaf.stage;
    const int mb = leaf.microbatch;
    const StageLink& link = links_[s];
    if (leaf.kind == ActionKind::kForward) {
      forward_done_[Key(s, mb)] = 1;
      if (link.next_rank == kAbsent || link.next_rank == rank) return;
      out_[rank].push_back(SimpleAction(ActionKind::kSendF, s, mb));
      out_[link.next_rank].push_back(SimpleAction(ActionKind::kRecvF, s + 1, mb));
      recv_f_[Key(s + 1, mb)] = 1;
    } else if (leaf.kind == ActionKind::kBackward || leaf.kind == ActionKind::kBackwardInput) {
      backward_done_[Key(s, mb)] = 1;
      if (link.prev_rank == kAbsent || link.prev_rank == rank) return;
      out_[rank].push_back(SimpleAction(ActionKind::kSendB, s, mb));
      out_[link.prev_rank].push_back(SimpleAction(ActionKind::kRecvB, s - 1, mb));
      recv_b_[Key(s - 1, mb)] = 1;
    }
  }

  // What an unready leaf waits for, e.g. "1RECV_F0 from rank 0".
  std::string WaitsFor(int rank, const Action& leaf) const {
    const int s = leaf.stage;
    const int mb = leaf.microbatch;
    if (leaf.kind == ActionKind::kForward) {
      if (in_.RankOf(s - 1) == rank) {
        return absl::StrCat(Action::Make(ActionKind::kForward, s - 1, mb).ToString(),
                            " on this rank");
      }
      return absl::StrCat(Action::Make(ActionKind::kRecvF, s, mb).ToString(), " from rank ",
                          in_.RankOf(s - 1));
    }
    if (in_.RankOf(s + 1) == rank) {
      return absl::StrCat("the backward of stage ", s + 1, " microbatch ", mb, " on this rank");
    }
    return absl::StrCat(Action::Make(ActionKind::kRecvB, s, mb).ToString(), " from rank ",
                        in_.RankOf(s + 1));
  }

  absl::Status NoProgressError(const std::vector<int>& active) const {
    std::string message =
        "no rank can make progress (a cyclic wait; PyTorch: \"Malformed compute schedule, "
        "can't schedule sends/recvs\"): ";
    int named = 0;
    for (int r : active) {
      const Action& head = in_.ranks[r][head_[r]];
      if (named == kMaxStuckRanksNamed) {
        absl::StrAppend(&message, "; and ", active.size() - named, " more ranks");
        break;
      }
      const Action* unready = &head;
      for (const Action& sub : head.sub_actions) {
        if (!LeafReady(r, sub)) {
          unready = &sub;
          break;
        }
      }
      absl::StrAppend(&message, named == 0 ? "" : "; ", Where(r, head_[r], head), " waits for ",
                      WaitsFor(r, *unready));
      ++named;
    }
    return absl::InvalidArgumentError(message);
  }

  const Schedule& in_;
  const std::vector<StageLink> links_;
  const size_t mbs_ = static_cast<size_t>(in_.microbatches_per_chain());
  std::vector<uint8_t> forward_done_, backward_done_;  // placed F / placed I or B
  std::vector<uint8_t> recv_f_, recv_b_;               // RECV placed (on the stage's rank)
  std::vector<size_t> head_;                           // next input index per rank
  std::vector<RankProgram> out_;
};

}  // namespace

absl::StatusOr<Schedule> LowerSendRecvEarly(const Schedule& in) {
  RETURN_IF_ERROR(CheckProgram(
      in, "a program without sends and receives", [](const Action& a) {
        return IsSendRecv(a.kind);
      }));
  ASSIGN_OR_RETURN(std::vector<RankProgram> ranks, RoundRobin(in).Run());
  return WithPrograms(in, std::move(ranks), /*lowered=*/true);
}

}  // namespace jitpipe
