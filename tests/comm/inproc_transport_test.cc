// The in-process backend's own behaviour; what every backend does is in
// transport_conformance_test.cc.
#include "comm/inproc/inproc_world.h"

#include <cstring>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::inproc_transport_test {
namespace {

using ::jitpipe::testing::Message;

std::vector<std::byte> Bytes(const std::string& s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

std::string Text(const std::vector<std::byte>& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

constexpr absl::Duration kShort = absl::Milliseconds(50);
constexpr absl::Duration kLong = absl::Seconds(30);

TEST(InProcessTransportTest, ReceivePostedFirstGetsTheBytesWhenTheSendArrives) {
  auto world = CreateInProcessWorld(2);
  std::vector<std::byte> in(5);
  ASSERT_OK_AND_ASSIGN(RequestId recv, world->transport(1).PostRecv(0, 7, absl::MakeSpan(in), {}));
  ASSERT_OK_AND_ASSIGN(bool done, world->transport(1).Test(recv));
  EXPECT_FALSE(done);
  std::vector<std::byte> out = Bytes("hello");
  ASSERT_OK_AND_ASSIGN(RequestId send, world->transport(0).PostSend(1, 7, out, {}));
  EXPECT_OK(world->transport(0).Wait(send, kLong));
  EXPECT_OK(world->transport(1).Wait(recv, kLong));
  EXPECT_EQ(Text(in), "hello");
  EXPECT_EQ(world->PeakInFlightBytes(), 0);
}

TEST(InProcessTransportTest, SendPostedFirstCompletesAtOnceAndIsStaged) {
  auto world = CreateInProcessWorld(2);
  std::vector<std::byte> out = Bytes("abc");
  ASSERT_OK_AND_ASSIGN(RequestId send, world->transport(0).PostSend(1, 1, out, {}));
  ASSERT_OK_AND_ASSIGN(bool done, world->transport(0).Test(send));
  EXPECT_TRUE(done);
  out[0] = std::byte{'X'};  // the sender may reuse its buffer
  EXPECT_EQ(world->InFlightBytes(), 3);
  std::vector<std::byte> in(3);
  ASSERT_OK_AND_ASSIGN(RequestId recv, world->transport(1).PostRecv(0, 1, absl::MakeSpan(in), {}));
  EXPECT_OK(world->transport(1).Wait(recv, kLong));
  EXPECT_EQ(Text(in), "abc");
  EXPECT_EQ(world->InFlightBytes(), 0);
  EXPECT_EQ(world->PeakInFlightBytes(), 3);
}

TEST(InProcessTransportTest, SizeMismatchFailsTheReceiveNamingBothSides) {
  auto world = CreateInProcessWorld(2);
  std::vector<std::byte> out = Bytes("abcd");
  ASSERT_OK(world->transport(0).PostSend(1, 3, out, {.action = "0SEND_F0"}));
  std::vector<std::byte> in(2);
  ASSERT_OK_AND_ASSIGN(RequestId recv, world->transport(1).PostRecv(0, 3, absl::MakeSpan(in),
                                                                   {.action = "1RECV_F0"}));
  absl::Status s = world->transport(1).Wait(recv, kLong);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(testing::Message(s),
            "receive 1RECV_F0 from rank 0 expects 2 bytes but the matching send 0SEND_F0 to "
            "rank 1 has 4");
}

// Members that post different collectives at the same position of their
// group fail (MPI leaves such a mismatch undefined).
TEST(InProcessTransportTest, AMismatchedCollectiveFailsTheMemberThatPostedIt) {
  auto world = CreateInProcessWorld(2);
  Group group{{0, 1}};
  std::vector<float> a(4), b(2), shard(1);
  ASSERT_OK_AND_ASSIGN(RequestId first, world->transport(0).PostAllReduce(
                                            group, absl::MakeSpan(a), ReduceOp::kSum, {}));
  ASSERT_OK_AND_ASSIGN(RequestId second, world->transport(1).PostReduceScatter(
                                             group, b, absl::MakeSpan(shard), ReduceOp::kSum, {}));
  EXPECT_EQ(Message(world->transport(1).Wait(second, kLong)),
            "rank 1 posted a different collective or size at position 0 of group {0, 1}");
  EXPECT_EQ(world->transport(0).Wait(first, kShort).code(), absl::StatusCode::kDeadlineExceeded);
}

// Every rank is a thread of this process: a group request waits for nobody.
TEST(InProcessWorldTest, GroupRequestsWaitForNobody) {
  auto world = CreateInProcessWorld(4);
  EXPECT_OK(world->CreateGroups({Group{{0, 2}}, Group{{3, 1}}}, absl::ZeroDuration()));
  std::vector<float> data(2, 1.0f);
  // {3, 1} was requested in that order; {1, 3} was not.
  EXPECT_EQ(world->transport(1).PostAllReduce(Group{{1, 3}}, absl::MakeSpan(data),
                                              ReduceOp::kSum, {})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_OK(world->transport(1).PostAllReduce(Group{{3, 1}}, absl::MakeSpan(data),
                                              ReduceOp::kSum, {}));
}

TEST(InProcessWorldTest, BarrierTimeoutsAndAbortsSayWhereTheyWaited) {
  auto world = CreateInProcessWorld(2);
  EXPECT_EQ(Message(world->Barrier(0, kShort)),
            "timed out after 50ms waiting at the step barrier for the other ranks");
  std::thread aborter([&] {
    absl::SleepFor(kShort);
    world->Abort(1, "stage exploded");
  });
  // Rank 0's second barrier waits for rank 1's second call, which never comes.
  EXPECT_EQ(Message(world->Barrier(0, kLong)),
            "rank 1 failed: stage exploded (while waiting at the step barrier)");
  aborter.join();
  EXPECT_EQ(Message(world->Barrier(1, kLong)), "rank 1 failed: stage exploded");
}

TEST(InProcessWorldTest, GatherTakesOnePayloadPerRank) {
  auto world = CreateInProcessWorld(2);
  EXPECT_EQ(Message(world->Gather({"only one"}, kLong)), "Gather: 1 payloads for 2 local ranks");
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> all, world->Gather({"a", "b"}, kLong));
  EXPECT_EQ(all, (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace jitpipe::inproc_transport_test
