// The NCCL communicator plan (comm/nccl/communicator_plan.h): which
// communicators each mode makes, the disjoint rounds they are connected in
// and that the order cannot deadlock, and which stream carries a transfer.
#include "comm/nccl/communicator_plan.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::communicator_plan_test {
namespace {

using ::jitpipe::testing::Message;
using ::testing::ElementsAre;

// Interleaved 1F1B at pp 4 (loop placement, v 2): activations go r -> r + 1
// and from rank 3 back to rank 0; gradients the other way.
std::vector<Edge> InterleavedPp4() {
  return {{0, 1}, {1, 2}, {2, 3}, {3, 0}, {1, 0}, {2, 1}, {3, 2}, {0, 3}, {0, 1}};
}

// Every round holds each rank at most once.
void ExpectDisjoint(const std::vector<std::vector<Edge>>& rounds) {
  for (const std::vector<Edge>& round : rounds) {
    std::set<int> seen;
    for (const Edge& e : round) {
      EXPECT_TRUE(seen.insert(e.src).second) << e.ToString();
      EXPECT_TRUE(seen.insert(e.dst).second) << e.ToString();
    }
  }
}

// Walks each rank's order as a sequence of pairwise rendezvous (what
// ncclCommInitRank of a 2-rank communicator is): a pair completes once both
// of its ranks have it next. True when every pair completes.
bool Completes(const std::vector<std::vector<Edge>>& order) {
  std::vector<size_t> next(order.size(), 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t r = 0; r < order.size(); ++r) {
      if (next[r] == order[r].size()) continue;
      const Edge e = order[r][next[r]];
      const int peer = e.src == static_cast<int>(r) ? e.dst : e.src;
      if (next[peer] < order[peer].size() && order[peer][next[peer]] == e) {
        ++next[r];
        ++next[peer];
        moved = true;
      }
    }
  }
  for (size_t r = 0; r < order.size(); ++r) {
    if (next[r] != order[r].size()) return false;
  }
  return true;
}

bool ConnectsWithoutDeadlock(const CommunicatorPlan& plan) {
  std::vector<std::vector<Edge>> order(plan.world_size);
  for (int r = 0; r < plan.world_size; ++r) order[r] = plan.OrderOf(r);
  return Completes(order);
}

// As PyTorch's _directed_edge_split_rounds: 8 directed edges in 4 rounds.
TEST(CommunicatorPlanTest, LazyMakesOneCommunicatorPerDirectedEdgeInDisjointRounds) {
  ASSERT_OK_AND_ASSIGN(CommunicatorPlan plan,
                       PlanCommunicators(NcclMode::kLazy, 4, InterleavedPp4()));
  EXPECT_EQ(plan.edges.size(), 8u);  // the repeated 0->1 once
  ASSERT_EQ(plan.rounds.size(), 4u);
  ExpectDisjoint(plan.rounds);
  EXPECT_THAT(plan.rounds[0], ElementsAre(Edge{0, 1}, Edge{2, 3}));
  EXPECT_THAT(plan.rounds[1], ElementsAre(Edge{0, 3}, Edge{1, 2}));
  EXPECT_THAT(plan.rounds[2], ElementsAre(Edge{1, 0}, Edge{3, 2}));
  EXPECT_THAT(plan.rounds[3], ElementsAre(Edge{2, 1}, Edge{3, 0}));
  EXPECT_THAT(plan.OrderOf(0), ElementsAre(Edge{0, 1}, Edge{0, 3}, Edge{1, 0}, Edge{3, 0}));
  EXPECT_TRUE(ConnectsWithoutDeadlock(plan));
}

// The deadlock the fixed order rules out (mg PR #5240): ranks that create
// their pair communicators in an order of their own can wait on each other
// in a cycle; the plan's per-rank orders never do, whatever the edges.
TEST(CommunicatorPlanTest, TheFixedOrderCannotDeadlockWhereOwnOrdersDo) {
  // Each rank connecting its outgoing edge first: 0 waits for 1, 1 for 2,
  // 2 for 0.
  EXPECT_FALSE(Completes({{{0, 1}, {2, 0}}, {{1, 2}, {0, 1}}, {{2, 0}, {1, 2}}}));
  for (int size : {2, 3, 5, 8}) {
    for (NcclMode mode : {NcclMode::kLazy, NcclMode::kEager}) {
      ASSERT_OK_AND_ASSIGN(CommunicatorPlan plan, PlanCommunicators(mode, size, {}));
      ExpectDisjoint(plan.rounds);
      EXPECT_TRUE(ConnectsWithoutDeadlock(plan)) << NcclModeName(mode) << " size " << size;
    }
  }
}

// Eager: one communicator; the warm-up pairs are the unordered neighbour
// pairs, in disjoint rounds; every transfer is on the one p2p stream.
TEST(CommunicatorPlanTest, EagerWarmsUpNeighbourPairsAndUsesOneStream) {
  ASSERT_OK_AND_ASSIGN(CommunicatorPlan plan,
                       PlanCommunicators(NcclMode::kEager, 4, InterleavedPp4()));
  ASSERT_EQ(plan.rounds.size(), 2u);
  EXPECT_THAT(plan.rounds[0], ElementsAre(Edge{0, 1}, Edge{2, 3}));
  EXPECT_THAT(plan.rounds[1], ElementsAre(Edge{0, 3}, Edge{1, 2}));
  for (int r = 0; r < 4; ++r) EXPECT_EQ(plan.NumStreams(r), 1);
  EXPECT_EQ(plan.StreamOf(0, 1, /*send=*/true), 0);
  EXPECT_EQ(plan.StreamOf(0, 3, /*send=*/false), 0);
  EXPECT_EQ(plan.StreamOf(0, 2, /*send=*/true), -1);  // no such edge
  EXPECT_EQ(NcclModeName(NcclMode::kEager), "nccl");
}

// Lazy: a stream per edge of the rank, numbered in its connection order;
// sends on rank -> peer, receives on peer -> rank.
TEST(CommunicatorPlanTest, LazyGivesEveryEdgeOfARankAStreamOfItsOwn) {
  ASSERT_OK_AND_ASSIGN(CommunicatorPlan plan,
                       PlanCommunicators(NcclMode::kLazy, 4, InterleavedPp4()));
  EXPECT_EQ(plan.NumStreams(0), 4);
  EXPECT_EQ(plan.StreamOf(0, 1, /*send=*/true), 0);   // 0->1
  EXPECT_EQ(plan.StreamOf(0, 3, /*send=*/true), 1);   // 0->3
  EXPECT_EQ(plan.StreamOf(0, 1, /*send=*/false), 2);  // 1->0
  EXPECT_EQ(plan.StreamOf(0, 3, /*send=*/false), 3);  // 3->0
  EXPECT_EQ(plan.StreamOf(1, 3, /*send=*/true), -1);
  EXPECT_EQ(NcclModeName(NcclMode::kLazy), "nccl-lazy");
}

TEST(CommunicatorPlanTest, NoEdgesMeansEveryPairAndBadEdgesAreNamed) {
  ASSERT_OK_AND_ASSIGN(CommunicatorPlan all, PlanCommunicators(NcclMode::kLazy, 3, {}));
  EXPECT_EQ(all.edges.size(), 6u);
  EXPECT_EQ(Message(PlanCommunicators(NcclMode::kLazy, 3, std::vector<Edge>{{0, 3}})),
            "edge 0->3 is not a pair of distinct ranks of a world of 3");
  EXPECT_EQ(Message(PlanCommunicators(NcclMode::kEager, 3, std::vector<Edge>{{1, 1}})),
            "edge 1->1 is not a pair of distinct ranks of a world of 3");
  EXPECT_EQ(PlanCommunicators(NcclMode::kEager, 0, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace jitpipe::communicator_plan_test
