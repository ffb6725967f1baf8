#include "scheduler/analysis/message_index.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/scheduler/passes/pass_test_util.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::message_index_test {
namespace {

using ::jitpipe::testing::FromRows;
using ::jitpipe::testing::Message;

// pp 2, loop, one stage per rank, two microbatches: rank 0 sends F0 then
// F1, rank 1 receives them in the other order and sends B0 then B1.
constexpr const char* kRows[] = {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
                                  "1RECV_F1 1RECV_F0 1F1 1F0 1B0 1SEND_B0 1B1 1SEND_B1"};

TEST(MessageIndexTest, NumbersMessagesByTheirRecv) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({kRows[0], kRows[1]}));
  ASSERT_OK_AND_ASSIGN(MessageIndex index, MessageIndex::Build(s));
  // 2 stages x 2 microbatches: RECV_F ids 0..3, RECV_B ids 4..7.
  const Action& send_f1 = s.ranks[0][3];
  ASSERT_EQ(send_f1.ToString(), "0SEND_F1");
  const int32_t f1 = index.OfSend(send_f1);
  EXPECT_EQ(f1, 3);  // stage 1, microbatch 1
  EXPECT_EQ(index.RecvAction(f1).ToString(), "1RECV_F1");
  EXPECT_EQ(index.sender(f1), 0);
  EXPECT_EQ(index.receiver(f1), 1);
  const int32_t b0 = index.OfSend(s.ranks[1][5]);  // 1SEND_B0
  EXPECT_EQ(b0, 4);                                // stage 0, microbatch 0
  EXPECT_EQ(index.RecvAction(b0).ToString(), "0RECV_B0");
}

TEST(MessageIndexTest, PairsKeepTheSendersOrder) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({kRows[0], kRows[1]}));
  ASSERT_OK_AND_ASSIGN(MessageIndex index, MessageIndex::Build(s));
  ASSERT_EQ(index.num_pairs(), 2u);  // 0 -> 1 and 1 -> 0
  const int32_t f0 = index.OfSend(s.ranks[0][1]);
  const int32_t f1 = index.OfSend(s.ranks[0][3]);
  EXPECT_EQ(index.pair(f0), index.pair(f1));
  EXPECT_EQ(index.order(f0), 0);
  EXPECT_EQ(index.order(f1), 1);
  EXPECT_EQ(index.sequence(index.pair(f0)), (std::vector<int32_t>{f0, f1}));
  const int32_t b1 = index.OfSend(s.ranks[1][7]);
  EXPECT_NE(index.pair(b1), index.pair(f0));
  EXPECT_EQ(index.order(b1), 1);
}

TEST(MessageIndexTest, ConsumersAreCountedAmongNonRecvActions) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({kRows[0], kRows[1]}));
  ASSERT_OK_AND_ASSIGN(MessageIndex index, MessageIndex::Build(s));
  // Rank 1 without RECVs: 1F1 1F0 1B0 1SEND_B0 1B1 1SEND_B1.
  const int32_t f0 = index.ConsumedBy(1, s.ranks[1][3]);  // 1F0
  ASSERT_NE(f0, kNoMessage);
  EXPECT_EQ(index.consumer(f0), 1);
  EXPECT_EQ(index.consumer(index.ConsumedBy(1, s.ranks[1][2])), 0);  // 1F1
  // Rank 0 without RECVs: 0F0 0SEND_F0 0F1 0SEND_F1 0B0 0B1.
  EXPECT_EQ(index.consumer(index.ConsumedBy(0, s.ranks[0][7])), 5);  // 0B1
  // The first stage's F and the last stage's B receive nothing.
  EXPECT_EQ(index.ConsumedBy(0, s.ranks[0][0]), kNoMessage);
  EXPECT_EQ(index.ConsumedBy(1, s.ranks[1][4]), kNoMessage);
}

TEST(MessageIndexTest, OverlapPartsConsumeTheirOwnMessages) {
  // pp 2, loop, v 2: the compound (1F1;1B0) on rank 1 consumes 1RECV_F1
  // (for its forward part) and 1RECV_B0 (for its backward part).
  ASSERT_OK_AND_ASSIGN(
      Schedule s,
      FromRows({"0F0 0SEND_F0 0F1 0SEND_F1 2RECV_F0 2F0 2SEND_F0 2RECV_B0 2B0 2SEND_B0 2RECV_F1 "
                "2F1 2SEND_F1 2RECV_B1 2B1 2SEND_B1 0RECV_B0 0B0 0RECV_B1 0B1",
                "1RECV_F0 1F0 1SEND_F0 3RECV_F0 3F0 3B0 3SEND_B0 1RECV_F1 1RECV_B0 "
                "(1F1;1B0)OVERLAP_F_B 1SEND_F1 1SEND_B0 3RECV_F1 3F1 3B1 3SEND_B1 1RECV_B1 1B1 "
                "1SEND_B1"}));
  ASSERT_OK_AND_ASSIGN(MessageIndex index, MessageIndex::Build(s));
  const Action& overlap = s.ranks[1][9];
  ASSERT_TRUE(overlap.is_compound());
  EXPECT_EQ(index.RecvAction(index.ConsumedBy(1, overlap.sub_actions[0])).ToString(),
            "1RECV_F1");
  EXPECT_EQ(index.RecvAction(index.ConsumedBy(1, overlap.sub_actions[1])).ToString(),
            "1RECV_B0");
}

struct BadInput {
  std::string name;
  std::vector<std::string> rows;
  absl::StatusCode code;
  std::string error;
};

class MessageIndexErrorTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(MessageIndexErrorTest, ExactMessage) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows(GetParam().rows));
  absl::StatusOr<MessageIndex> index = MessageIndex::Build(s);
  EXPECT_EQ(index.status().code(), GetParam().code);
  EXPECT_EQ(Message(index), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Bad, MessageIndexErrorTest,
    ::testing::Values(
        BadInput{"ComputeOnly",
                 {"0F0 0B0", "1F0 1B0"},
                 absl::StatusCode::kFailedPrecondition,
                 "expected a lowered program (sends and receives placed, e.g. by "
                 "LowerSendRecvEarly); this one is compute-only"},
        BadInput{"RecvWithoutSend",
                 {"0F0 0B0", "1RECV_F0 1F0 1B0"},
                 absl::StatusCode::kFailedPrecondition,
                 "rank 1: 1RECV_F0 has no matching send"},
        BadInput{"SendWithoutRecv",
                 {"0F0 0SEND_F0 0B0", "1F0 1B0"},
                 absl::StatusCode::kFailedPrecondition,
                 "rank 0: a send to stage 1 has no matching 1RECV_F0 on rank 1"},
        BadInput{"RecvWithoutConsumer",
                 {"0F0 0SEND_F0 0B0", "1RECV_F0 1B0"},
                 absl::StatusCode::kFailedPrecondition,
                 "rank 1: 1RECV_F0 has no consumer on that rank"},
        BadInput{"SecondReceive",
                 {"0F0 0SEND_F0 0B0", "1RECV_F0 1RECV_F0 1F0 1B0"},
                 absl::StatusCode::kInvalidArgument,
                 "rank 1, index 1 (1RECV_F0): a second 1RECV_F0; the first is at index 0"},
        BadInput{"SecondSend",
                 {"0F0 0SEND_F0 0SEND_F0 0B0", "1RECV_F0 1F0 1B0"},
                 absl::StatusCode::kInvalidArgument,
                 "rank 0, index 2 (0SEND_F0): a second 0SEND_F0; the first is at index 1"},
        BadInput{"SendFromTheLastStage",
                 {"0F0 0B0", "1F0 1SEND_F0 1B0"},
                 absl::StatusCode::kFailedPrecondition,
                 "rank 1, index 1 (1SEND_F0): the stage has no neighbour in that direction"},
        BadInput{"RecvBackwardAtTheLastStage",
                 {"0F0 0SEND_F0 0B0", "1RECV_F0 1F0 1RECV_B0 1B0"},
                 absl::StatusCode::kFailedPrecondition,
                 "rank 1, index 2 (1RECV_B0): nothing sends to this stage in that direction"}),
    [](const ::testing::TestParamInfo<BadInput>& param) { return param.param.name; });

TEST(MessageIndexTest, RefusesAStageOfAnotherRank) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0SEND_F0 0B0", "1RECV_F0 1F0 1B0"}));
  s.ranks[1].insert(s.ranks[1].begin() + 2, Action::Make(ActionKind::kBackwardWeight, 0, 0));
  absl::StatusOr<MessageIndex> index = MessageIndex::Build(s);
  EXPECT_EQ(index.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(index), "rank 1, index 2 (0W0): stage 0 lives on rank 0, not on this rank");
}

// What the program index flags is InvalidArgument in Validate's words: the
// program is not well formed, whatever pass it is given to.
TEST(MessageIndexTest, RefusesABubble) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0SEND_F0 0B0", "1RECV_F0 1F0 1B0"}));
  s.ranks[1].push_back(Action::Bubble());
  absl::StatusOr<MessageIndex> index = MessageIndex::Build(s);
  EXPECT_EQ(index.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(index), "rank 1, index 3 (): a bubble in a lowered program");
}

TEST(MessageIndexTest, SendBetweenStagesOfOneRank) {
  // V placement, pp 2: rank 1 holds stages 1 and 2.
  ASSERT_OK_AND_ASSIGN(
      Schedule s, FromRows({"0F0 0SEND_F0 3RECV_F0 3F0 3B0 3SEND_B0 0RECV_B0 0B0",
                            "1RECV_F0 1F0 1SEND_F0 2RECV_F0 2F0 2SEND_F0 2RECV_B0 2B0 2SEND_B0 "
                            "1RECV_B0 1B0 1SEND_B0"}));
  EXPECT_EQ(Message(MessageIndex::Build(s)),
            "rank 1, index 2 (1SEND_F0): a send between two stages of one rank");
}

}  // namespace
}  // namespace jitpipe::message_index_test
