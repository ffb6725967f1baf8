#include "scheduler/execution/comm_fifo.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/analysis/comm_matching.h"
#include "scheduler/execution/deadlock.h"
#include "scheduler/ir/schedule_csv.h"
#include "tests/scheduler/execution/matched_program.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::comm_fifo_test {
namespace {

using ::jitpipe::testing::Message;

using Program = ::jitpipe::testing::MatchedProgram;

Program Parse(const std::string& csv) { return ::jitpipe::testing::ParseMatched(csv); }

// The header's example: rank 0 posts 0RECV_B0 then 0SEND_F1, rank 1 posts
// 1RECV_F1 then 1SEND_B0. Tag matching and one communicator per directed
// pair complete every transfer; one shared FIFO per rank cannot.
constexpr char kSharedFifoCycle[] =
    "0F0,0SEND_F0,0F1,0RECV_B0,0SEND_F1,0B0,0RECV_B1,0B1\n"
    "1RECV_F0,1F0,1B0,1RECV_F1,1SEND_B0,1F1,1B1,1SEND_B1\n";

TEST(CommFifoTest, ASharedFifoDeadlocksWhereEdgesAndTagsDoNot) {
  const Program p = Parse(kSharedFifoCycle);
  EXPECT_OK(CheckDeadlockFree(p.schedule, p.positions, WaitModel::kRelaxed));
  EXPECT_OK(CheckFifoDeadlockFree(p.schedule, p.positions, CommLayout::kPerEdge));
  EXPECT_EQ(Message(CheckFifoDeadlockFree(p.schedule, p.positions, CommLayout::kPerGroup)),
            "deadlock under FIFO completion on one communicator for the pipeline group: wait "
            "cycle 0 -> 1 -> 0: 0RECV_B0 (rank 0, index 3) waits for its partner 1SEND_B0 "
            "(rank 1, index 4), queued on the group communicator behind 1RECV_F1 (index 3); "
            "1RECV_F1 (rank 1, index 3) waits for its partner 0SEND_F1 (rank 0, index 4), "
            "queued on the group communicator behind 0RECV_B0 (index 3); stuck: rank 0 at "
            "index 5 (0B0) waits for 0RECV_B0 (index 3) to complete; rank 1 at index 5 (1F1) "
            "waits for 1RECV_F1 (index 3) to complete");
}

// A WAIT_SEND waits for its send to complete, which on a shared FIFO means
// the peer's queue reaching the receive: here behind a send whose receive
// rank 0 posts only after the wait. Tag matching and per-edge FIFOs only
// need the receive posted.
TEST(CommFifoTest, AWaitSendWaitsForItsSendsCompletion) {
  const Program p = Parse(
      "0F0,0F1,0SEND_F0,0SEND_F1,0WAIT_SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
      "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n");
  EXPECT_OK(CheckDeadlockFree(p.schedule, p.positions, WaitModel::kRelaxed));
  EXPECT_OK(CheckFifoDeadlockFree(p.schedule, p.positions, CommLayout::kPerEdge));
  EXPECT_EQ(Message(CheckFifoDeadlockFree(p.schedule, p.positions, CommLayout::kPerGroup)),
            "deadlock under FIFO completion on one communicator for the pipeline group: wait "
            "cycle 0 -> 1 -> 0: rank 0 at index 4 (0WAIT_SEND_F1) waits for 0SEND_F1 (index "
            "3) to complete; 0SEND_F1 (rank 0, index 3) waits for its partner 1RECV_F1 (rank "
            "1, index 4), queued on the group communicator behind 1SEND_B0 (index 3); 1SEND_B0 "
            "(rank 1, index 3) waits for rank 0 to post 0RECV_B0 (index 5); stuck: rank 1 at "
            "index 5 (1F1) waits for 1RECV_F1 (index 4) to complete");
}

// Rank 0 first uses 1->0 (posting a receive early), rank 1 first uses 0->1:
// created lazily, each waits at its first use for the other's, which comes
// later: the hang of Megatron's lazily created 2-rank groups. Preconnected
// (not lazy) the program runs per edge.
constexpr char kLazyOrder[] =
    "3RECV_F0,0F0,0SEND_F0,3F0,3B0,3SEND_B0,0RECV_B0,0B0\n"
    "1RECV_F0,1F0,2F0,2SEND_F0,2RECV_B0,2B0,1B0,1SEND_B0\n";

TEST(CommFifoTest, LazyCreationInOppositeOrdersHangs) {
  const Program p = Parse(kLazyOrder);
  EXPECT_OK(CheckFifoDeadlockFree(p.schedule, p.positions, CommLayout::kPerEdge));
  EXPECT_EQ(Message(CheckFifoDeadlockFree(p.schedule, p.positions, CommLayout::kPerEdge,
                                          /*lazy_creation=*/true)),
            "deadlock under FIFO completion on one communicator per directed pair of ranks "
            "(created lazily): wait cycle 0 -> 1 -> 0: rank 0 at index 0 (3RECV_F0) creates "
            "communicator 1->0 (its first use) and waits for rank 1 to create it too (its "
            "first use: index 3, 2SEND_F0); rank 1 at index 0 (1RECV_F0) creates "
            "communicator 0->1 (its first use) and waits for rank 0 to create it too (its "
            "first use: index 2, 0SEND_F0)");
  const std::vector<std::vector<FirstUse>> uses =
      FirstUses(p.schedule, p.positions, CommLayout::kPerEdge);
  ASSERT_EQ(uses.size(), 2u);
  ASSERT_EQ(uses[0].size(), 2u);
  EXPECT_EQ(uses[0][0].communicator.ToString(), "1->0");
  EXPECT_EQ(uses[0][0].index, 0);
  EXPECT_EQ(uses[0][1].communicator.ToString(), "0->1");
  EXPECT_EQ(uses[1][0].communicator.ToString(), "0->1");
  EXPECT_EQ(uses[1][1].index, 3);
}

TEST(CommFifoTest, ConsistentFirstUsesCreateLazilyWithoutAHang) {
  const Program p = Parse(kSharedFifoCycle);
  EXPECT_OK(CheckFifoDeadlockFree(p.schedule, p.positions, CommLayout::kPerEdge,
                                  /*lazy_creation=*/true));
  const std::vector<std::vector<FirstUse>> group =
      FirstUses(p.schedule, p.positions, CommLayout::kPerGroup);
  ASSERT_EQ(group[0].size(), 1u);
  EXPECT_EQ(group[0][0].communicator.ToString(), "group");
  EXPECT_EQ(group[0][0].index, 1);
}

TEST(CommFifoTest, ParsesLayouts) {
  ASSERT_OK_AND_ASSIGN(CommLayout edge, ParseCommLayout("per-edge"));
  EXPECT_EQ(edge, CommLayout::kPerEdge);
  EXPECT_EQ(CommLayoutName(CommLayout::kPerGroup), "per-group");
  EXPECT_EQ(Message(ParseCommLayout("per-pair")),
            "unknown communicator layout \"per-pair\"; expected per-edge or per-group");
}

}  // namespace
}  // namespace jitpipe::comm_fifo_test
