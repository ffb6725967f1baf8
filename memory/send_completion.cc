#include "memory/send_completion.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "scheduler/analysis/comm_matching.h"

namespace jitpipe {
namespace {

std::string Where(const Schedule& s, int rank, int32_t index) {
  return absl::StrCat("rank ", rank, ", index ", index, " (", s.ranks[rank][index].ToString(),
                      ")");
}

}  // namespace

absl::string_view SendCompletionModelName(SendCompletionModel model) {
  return model == SendCompletionModel::kPost ? "post" : "receive";
}

absl::StatusOr<SendCompletionModel> ParseSendCompletionModel(absl::string_view name) {
  if (name == "post") return SendCompletionModel::kPost;
  if (name == "receive") return SendCompletionModel::kReceive;
  return absl::InvalidArgumentError(
      absl::StrCat("--send-completion must be post or receive, not \"", name, "\""));
}

// Two sweeps: every action's cross-rank predecessors (the SEND each compute
// part consumes, the RECV each WAIT_SEND waits for), then ranks run in turn
// as far as their predecessors have run, which lists the actions in a
// topological order (the relaxed deadlock check's rounds).
absl::StatusOr<HappensBefore> HappensBefore::Build(const Schedule& schedule,
                                                   const ProgramIndex& index) {
  if (!schedule.lowered) {
    return absl::FailedPreconditionError(
        "the happens-before order needs a lowered program; run jitpipe lower first");
  }
  HappensBefore hb(schedule, index);
  const int pp = schedule.pp;
  hb.rank_start_.assign(pp + 1, 0);
  for (int r = 0; r < pp; ++r) {
    hb.rank_start_[r + 1] = hb.rank_start_[r] + static_cast<int32_t>(schedule.ranks[r].size());
  }
  const int32_t total = hb.rank_start_[pp];
  hb.pred_offsets_.reserve(total + 1);
  hb.pred_offsets_.push_back(0);
  for (int r = 0; r < pp; ++r) {
    const RankProgram& program = schedule.ranks[r];
    for (int32_t i = 0; i < static_cast<int32_t>(program.size()); ++i) {
      const Action& a = program[i];
      absl::Status missing;
      auto add = [&](const Endpoint& e, absl::string_view what) {
        if (e.index == kAbsent || e.rank == kAbsent) {
          missing = absl::InvalidArgumentError(
              absl::StrCat(Where(schedule, r, i), ": no matching ", what));
          return;
        }
        hb.preds_.push_back(hb.rank_start_[e.rank] + e.index);
      };
      ForEachComputePartFast(a, [&](const Action& part) {
        if (std::optional<Endpoint> send = AwaitedSend(index, part)) add(*send, "SEND");
      });
      if (a.kind == ActionKind::kWaitSendF || a.kind == ActionKind::kWaitSendB) {
        add(WaitedRecv(index, a), "RECV");
      }
      if (!missing.ok()) return missing;
      hb.pred_offsets_.push_back(static_cast<int32_t>(hb.preds_.size()));
    }
  }
  std::vector<int32_t> pc(pp, 0);  // actions run per rank
  auto has_run = [&](int32_t g) {
    const int r = static_cast<int>(
        std::upper_bound(hb.rank_start_.begin(), hb.rank_start_.end(), g) -
        hb.rank_start_.begin() - 1);
    return pc[r] > g - hb.rank_start_[r];
  };
  hb.order_.reserve(total);
  while (static_cast<int32_t>(hb.order_.size()) < total) {
    bool moved = false;
    for (int r = 0; r < pp; ++r) {
      const int32_t n = static_cast<int32_t>(schedule.ranks[r].size());
      while (pc[r] < n) {
        const int32_t g = hb.rank_start_[r] + pc[r];
        bool ready = true;
        for (int32_t k = hb.pred_offsets_[g]; ready && k < hb.pred_offsets_[g + 1]; ++k) {
          ready = has_run(hb.preds_[k]);
        }
        if (!ready) break;
        hb.order_.push_back(g);
        ++pc[r];
        moved = true;
      }
    }
    if (!moved) {
      int r = 0;
      while (pc[r] == static_cast<int32_t>(schedule.ranks[r].size())) ++r;
      return absl::InvalidArgumentError(absl::StrCat(
          Where(schedule, r, pc[r]),
          ": the program deadlocks under relaxed semantics, so it has no happens-before order "
          "(jitpipe validate names the cycle)"));
    }
  }
  return hb;
}

std::vector<int32_t> HappensBefore::LatestOf(int peer) const {
  std::vector<int32_t> latest(order_.size(), kAbsent);
  const int32_t peer_begin = rank_start_[peer], peer_end = rank_start_[peer + 1];
  for (int32_t g : order_) {
    if (g >= peer_begin && g < peer_end) {
      latest[g] = g - peer_begin;
      continue;
    }
    // g - 1 is this rank's previous action unless g starts its rank.
    const bool first = std::binary_search(rank_start_.begin(), rank_start_.end(), g);
    int32_t most = first ? kAbsent : latest[g - 1];
    for (int32_t k = pred_offsets_[g]; k < pred_offsets_[g + 1]; ++k) {
      most = std::max(most, latest[preds_[k]]);
    }
    latest[g] = most;
  }
  return latest;
}

std::vector<int32_t> HappensBefore::SendHolds(int rank) const {
  const RankProgram& program = schedule_->ranks[rank];
  const int32_t n = static_cast<int32_t>(program.size());
  const int32_t begin = rank_start_[rank];
  std::vector<int32_t> holds(n, kAbsent);
  // One sweep per peer this rank sends to: two on a chain, more with a
  // custom placement.
  std::vector<int> peers;
  for (const Action& a : program) {
    if (!IsSend(a.kind)) continue;
    const int peer = Partner(*index_, a).rank;
    if (std::find(peers.begin(), peers.end(), peer) == peers.end()) peers.push_back(peer);
  }
  for (int peer : peers) {
    const std::vector<int32_t> latest = LatestOf(peer);
    // latest[] never decreases along a rank's program: a binary search finds
    // the first action after the peer's RECV.
    const auto first = latest.begin() + begin, last = latest.begin() + begin + n;
    for (int32_t i = 0; i < n; ++i) {
      if (!IsSend(program[i].kind)) continue;
      const Endpoint recv = Partner(*index_, program[i]);
      if (recv.rank != peer) continue;
      const int32_t after =
          static_cast<int32_t>(std::lower_bound(first + i, last, recv.index) - first);
      holds[i] = std::min(after, n - 1);
    }
  }
  return holds;
}

RankBuffers HoldSentBuffers(RankBuffers buffers, const std::vector<int32_t>& holds) {
  for (Buffer& b : buffers.buffers) {
    if (b.free_timing == FreeTiming::kAfterSend) b.free_index = holds[b.send_index];
  }
  return buffers;
}

}  // namespace jitpipe
