// The Transport and World contracts (comm/transport.h, comm/world.h), one
// body per test for every backend (gloo's transport tests, parameterized
// over transports). Each body runs on one thread per local rank of the
// test's world: four threads of one world in process; one thread in each
// process of `mpirun -np 4 transport_conformance_test --gtest_filter=*/mpi*`
// (tests/mpi/CMakeLists.txt), which the plain ctest run skips. Per-process
// calls (CreateGroups, Gather, CollectAfterFailure) run on the main thread.
//
// A world of 4: point-to-point pairs 0 -> 1, 2 -> 3 (even ranks send);
// requested groups {0, 2} and {1, 3} (rank w's is {w mod 2, w mod 2 + 2},
// a pipeline rank's data-parallel group at pp 2 x dp 2).
//
// What one backend does differently stays in its own tests:
// tests/comm/inproc_transport_test.cc, tests/mpi/mpi_transport_test.cc.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/cuda/cuda_world.h"
#include "comm/inproc/inproc_world.h"
#include "comm/mpi/mpi_world.h"
#include "comm/nccl/nccl_world.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/world_backends.h"

namespace jitpipe::transport_conformance_test {
namespace {

using ::jitpipe::testing::Launcher;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::TestWorld;
using ::jitpipe::testing::WorldBackend;
using ::jitpipe::testing::WorldOr;
using ::jitpipe::testing::WorldUse;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr absl::Duration kShort = absl::Milliseconds(50);
constexpr absl::Duration kLong = absl::Seconds(20);

std::vector<std::byte> Pattern(size_t size, int seed) {
  std::vector<std::byte> b(size);
  for (size_t i = 0; i < size; ++i) b[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
  return b;
}

std::vector<std::byte> Bytes(absl::string_view text) {
  std::vector<std::byte> b(text.size());
  std::memcpy(b.data(), text.data(), text.size());
  return b;
}

std::string Text(const std::vector<std::byte>& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

bool IsSender(int w) { return w % 2 == 0; }
int Partner(int w) { return IsSender(w) ? w + 1 : w - 1; }

// The groups of the file comment, and rank w's.
std::vector<Group> PairGroups(int size) {
  std::vector<Group> groups(2);
  for (int w = 0; w < size; ++w) groups[w % 2].ranks.push_back(w);
  return groups;
}
Group PairGroupOf(int w, int size) { return PairGroups(size)[w % 2]; }

Group WholeWorld(int size) {
  Group g;
  for (int w = 0; w < size; ++w) g.ranks.push_back(w);
  return g;
}

class TransportConformanceTest : public ::testing::TestWithParam<WorldBackend> {
 protected:
  void SetUp() override {
    const absl::Status opened = world_.Open(GetParam(), WorldUse::kKeeps);
    if (!opened.ok()) GTEST_SKIP() << opened.message();
    if (world_->size() != 4) GTEST_SKIP() << "needs a world of 4, not " << world_->size();
  }

  int size() const { return world_->size(); }

  // Skips a test that moves host memory or matches by tag on a backend
  // that does not (WorldBackend); tests/comm/cuda_world_test.cc covers the
  // device backends' transfers and collectives on device memory.
  bool Unsupported(bool transfers, bool collectives, bool by_tag) const {
    const WorldBackend& b = GetParam();
    return (transfers && !b.host_transfers) || (collectives && !b.host_collectives) ||
           (by_tag && !b.matches_by_tag);
  }
  static constexpr const char* kDeviceOnly =
      "this backend moves device memory only, or matches in posting order "
      "(tests/comm/cuda_world_test.cc covers it)";

  TestWorld world_;
};

// 5 bytes go eagerly, 1 MiB by rendezvous in Open MPI; 0 is a valid message.
// The receive is posted before the send or after it, a barrier between.
TEST_P(TransportConformanceTest, DeliversTheBytesInEitherPostingOrder) {
  if (Unsupported(true, false, false)) GTEST_SKIP() << kDeviceOnly;
  world_.OnEveryLocalRank([&](int w) {
    Transport& t = world_->transport(w);
    EXPECT_EQ(t.rank(), w);
    EXPECT_EQ(t.size(), size());
    uint64_t tag = 100;
    for (size_t bytes : {size_t{0}, size_t{5}, size_t{1} << 20}) {
      for (bool recv_first : {false, true}) {
        SCOPED_TRACE(absl::StrCat(bytes, " bytes, the ", recv_first ? "receive" : "send",
                                  " posted first"));
        std::vector<std::byte> out = Pattern(bytes, w), in(bytes);
        auto post = [&]() -> absl::StatusOr<RequestId> {
          return IsSender(w) ? t.PostSend(Partner(w), tag, out, {})
                             : t.PostRecv(Partner(w), tag, absl::MakeSpan(in), {});
        };
        const bool post_now = IsSender(w) != recv_first;
        RequestId id = 0;
        if (post_now) {
          ASSERT_OK_AND_ASSIGN(id, post());
        }
        ASSERT_OK(world_->Barrier(w, kLong));
        if (!post_now) {
          ASSERT_OK_AND_ASSIGN(id, post());
        }
        ASSERT_OK(t.Wait(id, kLong));
        if (!IsSender(w)) {
          EXPECT_EQ(in, Pattern(bytes, Partner(w)));
        }
        ++tag;
      }
    }
  });
}

TEST_P(TransportConformanceTest, MatchesByTagAndInPostingOrderWithinATag) {
  if (Unsupported(true, false, true)) GTEST_SKIP() << kDeviceOnly;
  world_.OnEveryLocalRank([&](int w) {
    Transport& t = world_->transport(w);
    std::vector<std::vector<std::byte>> out = {Bytes("x1"), Bytes("y1"), Bytes("x2")};
    std::vector<std::vector<std::byte>> in(3, std::vector<std::byte>(2));
    std::vector<RequestId> ids;
    const uint64_t send_tags[] = {10, 20, 10}, recv_tags[] = {20, 10, 10};
    for (int i = 0; i < 3; ++i) {
      ASSERT_OK_AND_ASSIGN(RequestId id,
                           IsSender(w) ? t.PostSend(Partner(w), send_tags[i], out[i], {})
                                       : t.PostRecv(Partner(w), recv_tags[i],
                                                    absl::MakeSpan(in[i]), {}));
      ids.push_back(id);
    }
    for (RequestId id : ids) EXPECT_OK(t.Wait(id, kLong));
    if (IsSender(w)) return;
    EXPECT_EQ(Text(in[0]), "y1");
    EXPECT_EQ(Text(in[1]), "x1");
    EXPECT_EQ(Text(in[2]), "x2");
  });
}

// A receive larger or smaller than its matching send fails with
// InvalidArgument naming the receive; the sender's part completes.
TEST_P(TransportConformanceTest, AReceiveOfAnotherSizeThanTheSendFailsNamingIt) {
  if (Unsupported(true, false, true)) GTEST_SKIP() << kDeviceOnly;
  world_.OnEveryLocalRank([&](int w) {
    Transport& t = world_->transport(w);
    uint64_t tag = 30;
    for (size_t expected : {size_t{8}, size_t{2}}) {
      std::vector<std::byte> out(4), in(expected);
      if (IsSender(w)) {
        ASSERT_OK_AND_ASSIGN(RequestId id, t.PostSend(Partner(w), tag++, out,
                                                      {.action = "0SEND_F0"}));
        EXPECT_OK(t.Wait(id, kLong));
        continue;
      }
      ASSERT_OK_AND_ASSIGN(RequestId id, t.PostRecv(Partner(w), tag++, absl::MakeSpan(in),
                                                    {.action = "1RECV_F0"}));
      const absl::Status s = t.Wait(id, kLong);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(Message(s), StartsWith(absl::StrCat("receive 1RECV_F0 from rank ", Partner(w),
                                                      " expects ", expected,
                                                      " bytes but the matching send")));
    }
  });
}

// Test() says false until the request completes, true once, and then knows
// it no more; so does Wait().
TEST_P(TransportConformanceTest, TestReportsACompletionOnce) {
  if (Unsupported(true, false, false)) GTEST_SKIP() << kDeviceOnly;
  world_.OnEveryLocalRank([&](int w) {
    Transport& t = world_->transport(w);
    std::vector<std::byte> out = Pattern(16, w), in(16);
    RequestId recv = 0;
    if (!IsSender(w)) {
      ASSERT_OK_AND_ASSIGN(recv, t.PostRecv(Partner(w), 35, absl::MakeSpan(in), {}));
      ASSERT_OK_AND_ASSIGN(bool done, t.Test(recv));
      EXPECT_FALSE(done);  // the send is posted after the barrier
    }
    ASSERT_OK(world_->Barrier(w, kLong));
    if (IsSender(w)) {
      ASSERT_OK_AND_ASSIGN(RequestId send, t.PostSend(Partner(w), 35, out, {}));
      ASSERT_OK(t.Wait(send, kLong));
      EXPECT_EQ(t.Wait(send, kLong).code(), absl::StatusCode::kNotFound);
    } else {
      bool done = false;
      for (const absl::Time give_up = absl::Now() + kLong; !done && absl::Now() < give_up;) {
        ASSERT_OK_AND_ASSIGN(done, t.Test(recv));
        if (!done) absl::SleepFor(absl::Microseconds(100));
      }
      ASSERT_TRUE(done);
      EXPECT_EQ(in, Pattern(16, Partner(w)));
      EXPECT_EQ(t.Test(recv).status().code(), absl::StatusCode::kNotFound);
    }
    EXPECT_EQ(t.Test(12345678).status().code(), absl::StatusCode::kNotFound);
  });
}

// The operation that timed out stays pending and completes later.
TEST_P(TransportConformanceTest, WaitTimesOutNamingTheOperationWhichCanStillComplete) {
  if (Unsupported(true, false, false)) GTEST_SKIP() << kDeviceOnly;
  world_.OnEveryLocalRank([&](int w) {
    Transport& t = world_->transport(w);
    std::vector<std::byte> out = Pattern(3, 7), in(3);
    RequestId id = 0;
    if (!IsSender(w)) {
      ASSERT_OK_AND_ASSIGN(
          id, t.PostRecv(Partner(w), 40, absl::MakeSpan(in),
                         {.stage = 1, .microbatch = 3, .program_index = 17, .action = "1RECV_F3"}));
      const absl::Status s = t.Wait(id, kShort);
      EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
      EXPECT_EQ(Message(s), absl::StrCat("timed out after 50ms waiting for receive 1RECV_F3 from "
                                         "rank ",
                                         Partner(w), " (index 17)"));
    }
    ASSERT_OK(world_->Barrier(w, kLong));
    if (IsSender(w)) {
      ASSERT_OK_AND_ASSIGN(id, t.PostSend(Partner(w), 40, out, {}));
    }
    EXPECT_OK(t.Wait(id, kLong));
    if (!IsSender(w)) {
      EXPECT_EQ(in, out);
    }
  });
}

TEST_P(TransportConformanceTest, RefusesInvalidPeers) {
  world_.OnEveryLocalRank([&](int w) {
    Transport& t = world_->transport(w);
    std::vector<std::byte> bytes(1);
    for (int peer : {w, -1, size()}) {
      EXPECT_EQ(Message(t.PostSend(peer, 1, bytes, {})),
                absl::StrCat("rank ", w, ": invalid peer ", peer));
      EXPECT_EQ(t.PostRecv(peer, 1, absl::MakeSpan(bytes), {}).status().code(),
                absl::StatusCode::kInvalidArgument);
    }
  });
}

// Sum and average, all-reduce and reduce-scatter (also into its own input,
// as the reduction worker posts it), over the requested groups, the whole
// world and the rank alone. A repeated request changes nothing.
TEST_P(TransportConformanceTest, ReducesOverRequestedGroupsTheWorldAndTheRankAlone) {
  if (Unsupported(false, true, false)) GTEST_SKIP() << kDeviceOnly;
  ASSERT_OK(world_->CreateGroups(PairGroups(size()), kLong));
  ASSERT_OK(world_->CreateGroups(PairGroups(size()), kLong));
  world_.OnEveryLocalRank([&](int w) {
    Transport& t = world_->transport(w);
    const Group group = PairGroupOf(w, size());
    const int index = group.IndexOf(w);
    float rank_sum = 0;
    for (int r : group.ranks) rank_sum += static_cast<float>(r);

    std::vector<float> sum = {static_cast<float>(w), 1.0f, 10.0f * w};
    std::vector<float> average = sum;
    ASSERT_OK_AND_ASSIGN(RequestId a,
                         t.PostAllReduce(group, absl::MakeSpan(sum), ReduceOp::kSum, {}));
    ASSERT_OK(t.Wait(a, kLong));
    ASSERT_OK_AND_ASSIGN(RequestId b,
                         t.PostAllReduce(group, absl::MakeSpan(average), ReduceOp::kAverage, {}));
    ASSERT_OK(t.Wait(b, kLong));
    EXPECT_EQ(sum, (std::vector<float>{rank_sum, 2.0f, 10 * rank_sum}));
    EXPECT_EQ(average, (std::vector<float>{rank_sum / 2, 1.0f, 10 * rank_sum / 2}));

    // Member i keeps elements [2i, 2i + 2) of the average.
    std::vector<float> in = {0.0f + w, 1.0f + w, 2.0f + w, 3.0f + w}, shard(2);
    ASSERT_OK_AND_ASSIGN(RequestId c, t.PostReduceScatter(group, in, absl::MakeSpan(shard),
                                                          ReduceOp::kAverage, {}));
    ASSERT_OK(t.Wait(c, kLong));
    EXPECT_EQ(shard, (std::vector<float>{2.0f * index + rank_sum / 2,
                                         2.0f * index + 1 + rank_sum / 2}));

    // The output is this member's place in the input: the shard is reduced,
    // the rest keeps this member's values.
    std::vector<float> data(6, static_cast<float>(w + 1));
    const std::vector<float> before = data;
    absl::Span<float> all = absl::MakeSpan(data);
    ASSERT_OK_AND_ASSIGN(RequestId d, t.PostReduceScatter(group, all, all.subspan(3 * index, 3),
                                                          ReduceOp::kSum, {}));
    ASSERT_OK(t.Wait(d, kLong));
    for (int i = 0; i < 6; ++i) {
      EXPECT_EQ(data[i], i / 3 == index ? rank_sum + 2 : before[i]) << "element " << i;
    }

    std::vector<float> world = {1.0f, static_cast<float>(w)};
    ASSERT_OK_AND_ASSIGN(RequestId e, t.PostAllReduce(WholeWorld(size()), absl::MakeSpan(world),
                                                      ReduceOp::kSum, {}));
    ASSERT_OK(t.Wait(e, kLong));
    const float n = static_cast<float>(size());
    EXPECT_EQ(world, (std::vector<float>{n, n * (n - 1) / 2}));
    std::vector<float> alone = {3.0f, static_cast<float>(w)};
    ASSERT_OK_AND_ASSIGN(RequestId f, t.PostAllReduce(Group{{w}}, absl::MakeSpan(alone),
                                                      ReduceOp::kAverage, {}));
    ASSERT_OK(t.Wait(f, kLong));
    EXPECT_EQ(alone, (std::vector<float>{3.0f, static_cast<float>(w)}));
  });
}

TEST_P(TransportConformanceTest, RefusesGroupsNotRequestedOrWithoutTheRank) {
  ASSERT_OK(world_->CreateGroups(PairGroups(size()), kLong));
  world_.OnEveryLocalRank([&](int w) {
    Transport& t = world_->transport(w);
    std::vector<float> data(4), out(2);
    const Group neighbours{{w, w ^ 1}};  // not requested
    EXPECT_EQ(Message(t.PostAllReduce(neighbours, absl::MakeSpan(data), ReduceOp::kSum, {})),
              absl::StrCat("rank ", w, ": group ", neighbours.ToString(),
                           " was not requested from the world (World::CreateGroups); a "
                           "collective runs over a requested group, the whole world or the "
                           "rank alone"));
    EXPECT_EQ(t.PostReduceScatter(neighbours, data, absl::MakeSpan(out), ReduceOp::kSum, {})
                  .status()
                  .code(),
              absl::StatusCode::kInvalidArgument);
    const Group other = PairGroupOf(w + 1, size());
    EXPECT_EQ(Message(t.PostAllReduce(other, absl::MakeSpan(data), ReduceOp::kSum, {})),
              absl::StrCat("rank ", w, " posted a collective over group ", other.ToString(),
                           ", of which it is not a member"));
    EXPECT_EQ(Message(t.PostAllReduce(Group{{(w + 1) % size()}}, absl::MakeSpan(data),
                                      ReduceOp::kSum, {})),
              absl::StrCat("rank ", w, " posted a collective over group {", (w + 1) % size(),
                           "}, of which it is not a member"));
  });
}

TEST_P(TransportConformanceTest, RefusesMalformedGroupRequests) {
  EXPECT_EQ(Message(world_->CreateGroups({Group{{0, 2}}, Group{{1, 1}}}, kLong)),
            "group {1, 1} holds rank 1 twice");
  EXPECT_EQ(Message(world_->CreateGroups({Group{{0, size()}}}, kLong)),
            absl::StrCat("group {0, ", size(), "} holds rank ", size(),
                         ", outside the world of ", size(), " ranks"));
  EXPECT_EQ(Message(world_->CreateGroups({Group{}}, kLong)), "a requested group is empty");
}

TEST_P(TransportConformanceTest, RefusesAReduceScatterWhoseInputIsNotEveryMembersShard) {
  ASSERT_OK(world_->CreateGroups(PairGroups(size()), kLong));
  world_.OnEveryLocalRank([&](int w) {
    std::vector<float> in(4), out(3);
    absl::StatusOr<RequestId> posted = world_->transport(w).PostReduceScatter(
        PairGroupOf(w, size()), in, absl::MakeSpan(out), ReduceOp::kSum,
        {.action = "0REDUCE_GRAD"});
    EXPECT_EQ(posted.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(Message(posted), absl::StrCat("rank ", w, ": reduce-scatter 0REDUCE_GRAD over 2 "
                                            "ranks: the input holds 4 elements; expected 6 (3 "
                                            "per member)"));
  });
}

// Open MPI has no progress thread: a collective moves only inside MPI calls.
// The waiting thread's polling alone must carry it to completion while the
// rank's other thread (the "compute" thread) makes no call at all.
TEST_P(TransportConformanceTest, AWaitingThreadCarriesACollectiveWhileTheOtherComputes) {
  if (Unsupported(false, true, false)) GTEST_SKIP() << kDeviceOnly;
  world_.OnEveryLocalRank([&](int w) {
    std::vector<float> data(1 << 16, 1.0f);
    std::atomic<bool> done{false};
    absl::Status waited;
    std::thread reducer([&] {
      Transport& t = world_->transport(w);
      absl::StatusOr<RequestId> id =
          t.PostAllReduce(WholeWorld(size()), absl::MakeSpan(data), ReduceOp::kSum, {});
      waited = id.ok() ? t.Wait(*id, kLong) : id.status();
      done = true;
    });
    for (const absl::Time give_up = absl::Now() + kLong; !done && absl::Now() < give_up;) {
    }
    reducer.join();
    EXPECT_OK(waited);
    EXPECT_EQ(data.front(), static_cast<float>(size()));
    EXPECT_EQ(data.back(), static_cast<float>(size()));
  });
}

// Many concurrent exchanges between all pairs (ThreadSanitizer's workload).
TEST_P(TransportConformanceTest, ConcurrentExchangesDeliverEveryMessage) {
  if (Unsupported(true, false, true)) GTEST_SKIP() << kDeviceOnly;
  constexpr int kMessages = 200;
  world_.OnEveryLocalRank([&](int w) {
    Transport& t = world_->transport(w);
    std::vector<std::vector<std::byte>> out(size() * kMessages, std::vector<std::byte>(8));
    std::vector<std::vector<std::byte>> in(size() * kMessages, std::vector<std::byte>(8));
    std::vector<RequestId> pending;
    for (int m = 0; m < kMessages; ++m) {
      for (int peer = 0; peer < size(); ++peer) {
        if (peer == w) continue;
        std::vector<std::byte>& o = out[peer * kMessages + m];
        const int64_t value = w * 1000000 + peer * 1000 + m;
        std::memcpy(o.data(), &value, 8);
        ASSERT_OK_AND_ASSIGN(RequestId send, t.PostSend(peer, m, o, {}));
        ASSERT_OK_AND_ASSIGN(RequestId recv,
                             t.PostRecv(peer, m, absl::MakeSpan(in[peer * kMessages + m]), {}));
        pending.push_back(send);
        pending.push_back(recv);
      }
    }
    for (RequestId id : pending) ASSERT_OK(t.Wait(id, kLong));
    for (int m = 0; m < kMessages; ++m) {
      for (int peer = 0; peer < size(); ++peer) {
        if (peer == w) continue;
        int64_t value = 0;
        std::memcpy(&value, in[peer * kMessages + m].data(), 8);
        EXPECT_EQ(value, peer * 1000000 + w * 1000 + m);
      }
    }
  });
}

TEST_P(TransportConformanceTest, KnowsItsRanksAndChecksTheSizeAJobNeeds) {
  const std::vector<int>& local = world_->local_ranks();
  ASSERT_FALSE(local.empty());
  EXPECT_TRUE(std::is_sorted(local.begin(), local.end()));
  EXPECT_EQ(world_->is_root(), local[0] == 0);
  EXPECT_FALSE(world_->aborted());
  EXPECT_OK(world_->CheckSize(size(), "pp 2 x dp 2"));
  const absl::Status wrong = world_->CheckSize(2 * size(), "pp 4 x dp 2");
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(wrong), StartsWith("the "));
  EXPECT_THAT(Message(wrong), HasSubstr(absl::StrCat(" world has ", size(), " ")));
  EXPECT_THAT(Message(wrong), HasSubstr(absl::StrCat(" but pp 4 x dp 2 needs ", 2 * size())));
}

TEST_P(TransportConformanceTest, BarriersAndAGatherAtRankZero) {
  world_.OnEveryLocalRank([&](int w) {
    for (int round = 0; round < 3; ++round) EXPECT_OK(world_->Barrier(w, kLong));
  });
  std::vector<std::string> mine;
  for (int w : world_->local_ranks()) mine.push_back(absl::StrCat("part of rank ", w));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> parts, world_->Gather(mine, kLong));
  if (!world_->is_root()) {
    EXPECT_TRUE(parts.empty());
    return;
  }
  ASSERT_EQ(static_cast<int>(parts.size()), size());
  for (int w = 0; w < size(); ++w) EXPECT_EQ(parts[w], absl::StrCat("part of rank ", w));
}

// Rank 0's barrier times out before the others arrive; it still counts as
// arrived, so their next barrier completes it, and the one after is every
// rank's next.
TEST_P(TransportConformanceTest, ABarrierThatTimedOutIsCompletedByTheOthers) {
  if (Unsupported(true, false, false)) GTEST_SKIP() << kDeviceOnly;
  world_.OnEveryLocalRank([&](int w) {
    Transport& t = world_->transport(w);
    std::vector<std::byte> go(1);
    if (w == 0) {
      const absl::Status s = world_->Barrier(w, kShort);
      EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
      EXPECT_THAT(Message(s), StartsWith("timed out after 50ms waiting "));
      EXPECT_THAT(Message(s), HasSubstr("barrier"));
      std::vector<RequestId> sent;
      for (int peer = 1; peer < size(); ++peer) {
        ASSERT_OK_AND_ASSIGN(RequestId id, t.PostSend(peer, 60, go, {}));
        sent.push_back(id);
      }
      for (RequestId id : sent) ASSERT_OK(t.Wait(id, kLong));
    } else {
      ASSERT_OK_AND_ASSIGN(RequestId id, t.PostRecv(0, 60, absl::MakeSpan(go), {}));
      ASSERT_OK(t.Wait(id, kLong));
      EXPECT_OK(world_->Barrier(w, kLong));
    }
    EXPECT_OK(world_->Barrier(w, kLong));
  });
}

// Aborting leaves the world aborted: a launched backend runs this suite in a
// job of its own (--gtest_filter=*TransportAbortTest*).
class TransportAbortTest : public TransportConformanceTest {
 protected:
  void SetUp() override {
    const absl::Status opened = world_.Open(GetParam(), WorldUse::kEnds);
    if (!opened.ok()) GTEST_SKIP() << opened.message();
    if (world_->size() < 3) GTEST_SKIP() << "needs 3 ranks or more, not " << world_->size();
  }
};

// Rank 1 aborts while the others wait on a receive from it: their wait, their
// later posts and their barriers fail with Aborted naming rank 1 and its
// reason; the payloads handed over after the failure still reach rank 0.
TEST_P(TransportAbortTest, AbortFailsEveryRanksOperationsAndPayloadsStillReachRankZero) {
  if (Unsupported(true, false, false)) GTEST_SKIP() << kDeviceOnly;
  world_.OnEveryLocalRank([&](int w) {
    Transport& t = world_->transport(w);
    std::vector<std::byte> in(1), out(1);
    if (w == 1) {
      ASSERT_OK(world_->Barrier(w, kLong));
      t.Abort("stage exploded");
    } else {
      ASSERT_OK_AND_ASSIGN(RequestId id,
                           t.PostRecv(1, 50, absl::MakeSpan(in), {.action = "1RECV_F0"}));
      // Rank 1 may leave the barrier and abort before this rank's part of
      // the barrier completes: then the barrier reports the abort.
      const absl::Status barrier = world_->Barrier(w, kLong);
      if (!barrier.ok()) {
        EXPECT_EQ(barrier.code(), absl::StatusCode::kAborted);
        EXPECT_THAT(Message(barrier), StartsWith("rank 1 failed: stage exploded"));
      }
      const absl::Status s = t.Wait(id, kLong);
      EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
      EXPECT_EQ(Message(s),
                "rank 1 failed: stage exploded (while waiting for receive 1RECV_F0 from rank 1)");
    }
    absl::StatusOr<RequestId> later = t.PostSend(w == 0 ? 2 : 0, 51, out, {});
    EXPECT_EQ(later.status().code(), absl::StatusCode::kAborted);
    EXPECT_EQ(Message(later), "rank 1 failed: stage exploded");
    const absl::Status barrier = world_->Barrier(w, kLong);
    EXPECT_EQ(barrier.code(), absl::StatusCode::kAborted);
    EXPECT_EQ(Message(barrier), "rank 1 failed: stage exploded");
  });
  EXPECT_TRUE(world_->aborted());

  std::vector<std::string> mine;
  for (int w : world_->local_ranks()) mine.push_back(absl::StrCat("record of rank ", w));
  std::vector<std::optional<std::string>> payloads = world_->CollectAfterFailure(mine, kLong);
  if (!world_->is_root()) {
    EXPECT_TRUE(payloads.empty());
    return;
  }
  ASSERT_EQ(static_cast<int>(payloads.size()), size());
  for (int w = 0; w < size(); ++w) {
    ASSERT_TRUE(payloads[w].has_value()) << "rank " << w;
    EXPECT_EQ(*payloads[w], absl::StrCat("record of rank ", w));
  }
}

// The backends. Adding one is one folder under comm/ (its World and
// Transport, mirroring comm/inproc and comm/mpi file for file, with one
// factory) plus one line here and one in
// tests/runtime/replay_conformance_test.cc; a backend whose ranks a
// launcher starts also runs under it (tests/mpi/CMakeLists.txt). A backend
// this build or machine lacks stays listed: its factory says Unavailable and
// its tests skip.
const WorldBackend kBackends[] = {
    {"inproc", Launcher::kNone, [](int size) -> WorldOr { return CreateInProcessWorld(size); }},
    {"mpi", Launcher::kMpirun, [](int) -> WorldOr { return CreateMpiWorld(nullptr, nullptr, {}); }},
    {"cuda", Launcher::kNone, [](int size) -> WorldOr { return CreateCudaWorld(size, {}); },
     /*host_collectives=*/false},
    {"nccl", Launcher::kMpirun,
     [](int) -> WorldOr { return CreateNcclWorld(nullptr, nullptr, {}); }, false, false, false},
    {"nccl_lazy", Launcher::kMpirun,
     [](int) -> WorldOr {
       NcclOptions options;
       options.mode = NcclMode::kLazy;
       return CreateNcclWorld(nullptr, nullptr, options);
     },
     false, false, false},
};

std::string BackendName(const ::testing::TestParamInfo<WorldBackend>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Backends, TransportConformanceTest, ::testing::ValuesIn(kBackends),
                         BackendName);
INSTANTIATE_TEST_SUITE_P(Backends, TransportAbortTest, ::testing::ValuesIn(kBackends),
                         BackendName);

}  // namespace
}  // namespace jitpipe::transport_conformance_test

int main(int argc, char** argv) { return jitpipe::testing::RunConformanceSuites(argc, argv); }
