#include "comm/nccl/communicator_plan.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace jitpipe {

absl::string_view NcclModeName(NcclMode mode) {
  return mode == NcclMode::kLazy ? "nccl-lazy" : "nccl";
}

std::string Edge::ToString() const { return absl::StrCat(src, "->", dst); }

std::vector<Edge> CommunicatorPlan::OrderOf(int rank) const {
  std::vector<Edge> order;
  for (const std::vector<Edge>& round : rounds) {
    for (const Edge& e : round) {
      if (e.src == rank || e.dst == rank) order.push_back(e);
    }
  }
  return order;
}

int CommunicatorPlan::StreamOf(int rank, int peer, bool send) const {
  const Edge wanted = send ? Edge{rank, peer} : Edge{peer, rank};
  if (!std::binary_search(edges.begin(), edges.end(), wanted)) return -1;
  if (mode == NcclMode::kEager) return 0;
  const std::vector<Edge> order = OrderOf(rank);
  return static_cast<int>(std::find(order.begin(), order.end(), wanted) - order.begin());
}

int CommunicatorPlan::NumStreams(int rank) const {
  return mode == NcclMode::kEager ? 1 : static_cast<int>(OrderOf(rank).size());
}

std::vector<std::vector<Edge>> DisjointRounds(absl::Span<const Edge> pairs) {
  std::vector<std::vector<Edge>> rounds;
  std::vector<std::set<int>> busy;  // per round: its ranks
  for (const Edge& e : pairs) {
    size_t r = 0;
    while (r < rounds.size() && (busy[r].count(e.src) > 0 || busy[r].count(e.dst) > 0)) ++r;
    if (r == rounds.size()) {
      rounds.emplace_back();
      busy.emplace_back();
    }
    rounds[r].push_back(e);
    busy[r].insert(e.src);
    busy[r].insert(e.dst);
  }
  return rounds;
}

absl::StatusOr<CommunicatorPlan> PlanCommunicators(NcclMode mode, int world_size,
                                                   absl::Span<const Edge> edges) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("a world of ", world_size, " ranks"));
  }
  std::set<Edge> distinct;
  for (const Edge& e : edges) {
    if (e.src < 0 || e.src >= world_size || e.dst < 0 || e.dst >= world_size || e.src == e.dst) {
      return absl::InvalidArgumentError(absl::StrCat("edge ", e.ToString(),
                                                     " is not a pair of distinct ranks of a "
                                                     "world of ", world_size));
    }
    distinct.insert(e);
  }
  if (edges.empty()) {
    for (int a = 0; a < world_size; ++a) {
      for (int b = 0; b < world_size; ++b) {
        if (a != b) distinct.insert({a, b});
      }
    }
  }
  CommunicatorPlan plan;
  plan.mode = mode;
  plan.world_size = world_size;
  plan.edges.assign(distinct.begin(), distinct.end());
  if (mode == NcclMode::kLazy) {
    plan.rounds = DisjointRounds(plan.edges);
  } else {
    std::set<Edge> pairs;
    for (const Edge& e : plan.edges) pairs.insert({std::min(e.src, e.dst), std::max(e.src, e.dst)});
    const std::vector<Edge> sorted(pairs.begin(), pairs.end());
    plan.rounds = DisjointRounds(sorted);
  }
  return plan;
}

}  // namespace jitpipe
