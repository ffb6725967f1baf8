#include "comm/inproc/inproc_transport.h"

#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe {
namespace {

using ::testing::HasSubstr;

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

TEST(InProcessTransportTest, MatchesByTagAndInOrderWithinATag) {
  auto world = CreateInProcessWorld(2);
  Transport& a = world->transport(0);
  Transport& b = world->transport(1);
  std::vector<std::byte> x = Bytes("x1"), y = Bytes("y1"), z = Bytes("x2");
  ASSERT_OK(a.PostSend(1, 10, x, {}));
  ASSERT_OK(a.PostSend(1, 20, y, {}));
  ASSERT_OK(a.PostSend(1, 10, z, {}));
  std::vector<std::byte> r1(2), r2(2), r3(2);
  ASSERT_OK_AND_ASSIGN(RequestId q1, b.PostRecv(0, 20, absl::MakeSpan(r1), {}));
  ASSERT_OK_AND_ASSIGN(RequestId q2, b.PostRecv(0, 10, absl::MakeSpan(r2), {}));
  ASSERT_OK_AND_ASSIGN(RequestId q3, b.PostRecv(0, 10, absl::MakeSpan(r3), {}));
  for (RequestId q : {q1, q2, q3}) EXPECT_OK(b.Wait(q, kLong));
  EXPECT_EQ(Text(r1), "y1");
  EXPECT_EQ(Text(r2), "x1");
  EXPECT_EQ(Text(r3), "x2");
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

TEST(InProcessTransportTest, WaitTimesOutNamingTheOperation) {
  auto world = CreateInProcessWorld(2);
  std::vector<std::byte> in(1);
  ASSERT_OK_AND_ASSIGN(RequestId recv,
                       world->transport(1).PostRecv(0, 9, absl::MakeSpan(in),
                                                    {.stage = 1, .microbatch = 3,
                                                     .program_index = 17,
                                                     .action = "1RECV_F3"}));
  absl::Status s = world->transport(1).Wait(recv, kShort);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(testing::Message(s),
            "timed out after 50ms waiting for receive 1RECV_F3 from rank 0 (index 17)");
}

TEST(InProcessTransportTest, AbortFailsPendingAndLaterOperationsOfEveryRank) {
  auto world = CreateInProcessWorld(3);
  std::vector<std::byte> in(1);
  ASSERT_OK_AND_ASSIGN(RequestId recv, world->transport(2).PostRecv(1, 0, absl::MakeSpan(in), {}));
  std::thread waiter([&] {
    absl::Status s = world->transport(2).Wait(recv, kLong);
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
    EXPECT_THAT(testing::Message(s), HasSubstr("rank 1 failed: stage exploded"));
  });
  world->transport(1).Abort("stage exploded");
  waiter.join();
  std::vector<std::byte> out(1);
  EXPECT_EQ(world->transport(0).PostSend(2, 0, out, {}).status().code(),
            absl::StatusCode::kAborted);
}

TEST(InProcessTransportTest, AllReduceSumsInGroupOrderAcrossThreads) {
  constexpr int kRanks = 4;
  auto world = CreateInProcessWorld(kRanks);
  Group group{{0, 1, 2, 3}};
  std::vector<std::vector<float>> data(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    data[r] = {static_cast<float>(r), 1.0f, 10.0f * r};
    threads.emplace_back([&, r] {
      auto id = world->transport(r).PostAllReduce(group, absl::MakeSpan(data[r]), ReduceOp::kSum,
                                                  {});
      ASSERT_OK(id);
      EXPECT_OK(world->transport(r).Wait(*id, kLong));
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(data[r], (std::vector<float>{6, 4, 60}));
}

TEST(InProcessTransportTest, ReduceScatterLeavesEachMemberItsAveragedShard) {
  auto world = CreateInProcessWorld(2);
  Group group{{0, 1}};
  std::vector<float> in0 = {1, 2, 3, 4}, in1 = {3, 4, 5, 6};
  std::vector<float> out0(2), out1(2);
  ASSERT_OK_AND_ASSIGN(RequestId a, world->transport(0).PostReduceScatter(
                                        group, in0, absl::MakeSpan(out0), ReduceOp::kAverage, {}));
  ASSERT_OK_AND_ASSIGN(RequestId b, world->transport(1).PostReduceScatter(
                                        group, in1, absl::MakeSpan(out1), ReduceOp::kAverage, {}));
  EXPECT_OK(world->transport(0).Wait(a, kLong));
  EXPECT_OK(world->transport(1).Wait(b, kLong));
  EXPECT_EQ(out0, (std::vector<float>{2, 3}));
  EXPECT_EQ(out1, (std::vector<float>{4, 5}));
}

// Many concurrent exchanges between all pairs, for ThreadSanitizer.
TEST(InProcessTransportTest, ConcurrentExchangesDeliverEveryMessage) {
  constexpr int kRanks = 4, kMessages = 200;
  auto world = CreateInProcessWorld(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      Transport& t = world->transport(r);
      std::vector<std::vector<std::byte>> out(kRanks * kMessages, std::vector<std::byte>(8));
      std::vector<std::vector<std::byte>> in(kRanks * kMessages, std::vector<std::byte>(8));
      std::vector<RequestId> pending;
      for (int m = 0; m < kMessages; ++m) {
        for (int peer = 0; peer < kRanks; ++peer) {
          if (peer == r) continue;
          auto& o = out[peer * kMessages + m];
          int64_t value = r * 1000000 + peer * 1000 + m;
          std::memcpy(o.data(), &value, 8);
          auto s = t.PostSend(peer, m, o, {});
          auto q = t.PostRecv(peer, m, absl::MakeSpan(in[peer * kMessages + m]), {});
          ASSERT_OK(s);
          ASSERT_OK(q);
          pending.push_back(*s);
          pending.push_back(*q);
        }
      }
      for (RequestId id : pending) ASSERT_OK(t.Wait(id, kLong));
      for (int m = 0; m < kMessages; ++m) {
        for (int peer = 0; peer < kRanks; ++peer) {
          if (peer == r) continue;
          int64_t value = 0;
          std::memcpy(&value, in[peer * kMessages + m].data(), 8);
          EXPECT_EQ(value, peer * 1000000 + r * 1000 + m);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(world->InFlightBytes(), 0);
}

}  // namespace
}  // namespace jitpipe
