// The MPI transport's contract, run as a real MPI job: every process of
// `mpirun -np N mpi_transport_test --dp=D` runs these tests in the same
// order and checks its own side (tests/mpi/CMakeLists.txt runs 4 processes,
// pp 2 x dp 2, and the abort suite again as 3 processes).
//
// World of 4, dp 2: world ranks 0 1 | 2 3 (replica 0 | replica 1), data-
// parallel groups {0, 2} and {1, 3}. Point-to-point pairs: 0 -> 1, 2 -> 3.
#include "comm/mpi/mpi_transport.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

MpiContext* g_context = nullptr;

MpiContext& Ctx() { return *g_context; }
Transport& T() { return g_context->transport(); }
int Rank() { return g_context->rank(); }

constexpr absl::Duration kShort = absl::Milliseconds(50);
constexpr absl::Duration kLong = absl::Seconds(20);

std::vector<std::byte> Pattern(size_t size, int seed) {
  std::vector<std::byte> b(size);
  for (size_t i = 0; i < size; ++i) b[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
  return b;
}

bool IsSender() { return Rank() % 2 == 0; }
int Partner() { return IsSender() ? Rank() + 1 : Rank() - 1; }

// Sends `size` bytes from each even rank to the next odd one, the receive
// posted before the send (recv_first) or after it, with a barrier between.
void SendAndReceive(size_t size, bool recv_first, uint64_t tag) {
  std::vector<std::byte> out = Pattern(size, Rank());
  std::vector<std::byte> in(size);
  RequestId id = 0;
  const bool post_now = IsSender() != recv_first;
  auto post = [&]() -> absl::StatusOr<RequestId> {
    return IsSender() ? T().PostSend(Partner(), tag, out, {})
                      : T().PostRecv(Partner(), tag, absl::MakeSpan(in), {});
  };
  if (post_now) {
    ASSERT_OK_AND_ASSIGN(id, post());
  }
  ASSERT_OK(Ctx().Barrier(kLong));
  if (!post_now) {
    ASSERT_OK_AND_ASSIGN(id, post());
  }
  ASSERT_OK(T().Wait(id, kLong));
  if (!IsSender()) {
    EXPECT_EQ(in, Pattern(size, Partner()));
  }
}

TEST(MpiContextTest, KnowsTheLayout) {
  EXPECT_EQ(Ctx().size(), Ctx().pp() * Ctx().dp());
  EXPECT_EQ(Ctx().rank(), Ctx().replica() * Ctx().pp() + Ctx().pipeline_rank());
  EXPECT_EQ(T().rank(), Ctx().rank());
  EXPECT_EQ(T().size(), Ctx().size());
  EXPECT_FALSE(Ctx().host().empty());
}

TEST(MpiContextTest, BroadcastsFromRankZeroAndGathersAtRankZero) {
  std::string text = Rank() == 0 ? "the schedule" : "ignored";
  ASSERT_OK(Ctx().Broadcast(&text, kLong));
  EXPECT_EQ(text, "the schedule");
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> parts,
                       Ctx().Gather(absl::StrCat("part of rank ", Rank()), kLong));
  if (Rank() != 0) {
    EXPECT_TRUE(parts.empty());
    return;
  }
  ASSERT_EQ(static_cast<int>(parts.size()), Ctx().size());
  for (int r = 0; r < Ctx().size(); ++r) EXPECT_EQ(parts[r], absl::StrCat("part of rank ", r));
}

class MpiPointToPointTest : public ::testing::TestWithParam<std::tuple<size_t, bool>> {};

TEST_P(MpiPointToPointTest, DeliversTheBytesInEitherPostingOrder) {
  const auto [size, recv_first] = GetParam();
  SendAndReceive(size, recv_first, /*tag=*/100 + (recv_first ? 1 : 0));
}

// 5 bytes go eagerly, 1 MiB by rendezvous in Open MPI; 0 is a valid message.
INSTANTIATE_TEST_SUITE_P(SizesAndOrders, MpiPointToPointTest,
                         ::testing::Combine(::testing::Values(size_t{0}, size_t{5},
                                                              size_t{1} << 20),
                                            ::testing::Bool()));

TEST(MpiTransportTest, MatchesByTagAndInOrderWithinATag) {
  std::vector<std::string> texts = {"x1", "y1", "x2"};
  std::vector<std::vector<std::byte>> out(3), in(3, std::vector<std::byte>(2));
  for (int i = 0; i < 3; ++i) {
    out[i].resize(2);
    std::memcpy(out[i].data(), texts[i].data(), 2);
  }
  std::vector<RequestId> ids;
  if (IsSender()) {
    for (int i = 0; i < 3; ++i) {
      ASSERT_OK_AND_ASSIGN(RequestId id, T().PostSend(Partner(), i == 1 ? 20 : 10, out[i], {}));
      ids.push_back(id);
    }
  } else {
    for (uint64_t tag : {20, 10, 10}) {
      ASSERT_OK_AND_ASSIGN(RequestId id,
                           T().PostRecv(Partner(), tag, absl::MakeSpan(in[ids.size()]), {}));
      ids.push_back(id);
    }
  }
  for (RequestId id : ids) EXPECT_OK(T().Wait(id, kLong));
  if (IsSender()) return;
  auto text = [](const std::vector<std::byte>& b) {
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  };
  EXPECT_EQ(text(in[0]), "y1");
  EXPECT_EQ(text(in[1]), "x1");
  EXPECT_EQ(text(in[2]), "x2");
}

TEST(MpiTransportTest, AReceiveLargerThanTheSendFailsNamingBothSizes) {
  std::vector<std::byte> out(4), in(8);
  if (IsSender()) {
    ASSERT_OK_AND_ASSIGN(RequestId id, T().PostSend(Partner(), 30, out, {.action = "0SEND_F0"}));
    EXPECT_OK(T().Wait(id, kLong));
    return;
  }
  ASSERT_OK_AND_ASSIGN(RequestId id,
                       T().PostRecv(Partner(), 30, absl::MakeSpan(in), {.action = "1RECV_F0"}));
  absl::Status s = T().Wait(id, kLong);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(testing::Message(s), absl::StrCat("receive 1RECV_F0 from rank ", Partner(),
                                              " expects 8 bytes but the matching send has 4"));
}

TEST(MpiTransportTest, AReceiveSmallerThanTheSendFailsAsTruncated) {
  std::vector<std::byte> out(4), in(2);
  if (IsSender()) {
    ASSERT_OK_AND_ASSIGN(RequestId id, T().PostSend(Partner(), 31, out, {}));
    EXPECT_OK(T().Wait(id, kLong));
    return;
  }
  ASSERT_OK_AND_ASSIGN(RequestId id,
                       T().PostRecv(Partner(), 31, absl::MakeSpan(in), {.action = "1RECV_F0"}));
  absl::Status s = T().Wait(id, kLong);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(testing::Message(s),
              StartsWith(absl::StrCat("receive 1RECV_F0 from rank ", Partner(),
                                      " expects 2 bytes but the matching send has more: "
                                      "MPI_Test: MPI_ERR_TRUNCATE")));
  EXPECT_THAT(testing::Message(s), HasSubstr("(comm/mpi/mpi_transport.cc:"));
}

TEST(MpiTransportTest, RefusesTagsAboveTheTagBoundAndInvalidPeers) {
  std::vector<std::byte> out(1);
  absl::StatusOr<RequestId> big = T().PostSend(Partner(), uint64_t{1} << 40, out, {});
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(testing::Message(big),
              StartsWith(absl::StrCat("send to rank ", Partner(),
                                      ": tag 1099511627776 exceeds this MPI's MPI_TAG_UB ")));
  absl::StatusOr<RequestId> self = T().PostSend(Rank(), 1, out, {});
  EXPECT_EQ(self.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(testing::Message(self), absl::StrCat("rank ", Rank(), ": invalid peer ", Rank()));
  EXPECT_EQ(T().Test(12345678).status().code(), absl::StatusCode::kNotFound);
}

TEST(MpiTransportTest, WaitTimesOutNamingTheOperationAndTheReceiveCanStillComplete) {
  std::vector<std::byte> out = Pattern(3, 7), in(3);
  RequestId id = 0;
  if (!IsSender()) {
    ASSERT_OK_AND_ASSIGN(
        id, T().PostRecv(Partner(), 40, absl::MakeSpan(in),
                         {.stage = 1, .microbatch = 3, .program_index = 17, .action = "1RECV_F3"}));
    absl::Status s = T().Wait(id, kShort);
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(testing::Message(s),
              absl::StrCat("timed out after 50ms waiting for receive 1RECV_F3 from rank ",
                           Partner(), " (index 17)"));
  }
  ASSERT_OK(Ctx().Barrier(kLong));
  if (IsSender()) {
    ASSERT_OK_AND_ASSIGN(id, T().PostSend(Partner(), 40, out, {}));
  }
  EXPECT_OK(T().Wait(id, kLong));
  if (!IsSender()) {
    EXPECT_EQ(in, out);
  }
}

Group DpGroup() {
  Group g;
  for (int replica = 0; replica < Ctx().dp(); ++replica) {
    g.ranks.push_back(Ctx().pipeline_rank() + replica * Ctx().pp());
  }
  return g;
}

Group World() {
  Group g;
  for (int r = 0; r < Ctx().size(); ++r) g.ranks.push_back(r);
  return g;
}

TEST(MpiCollectiveTest, AllReduceSumsAndAveragesOverTheDataParallelGroup) {
  const Group group = DpGroup();
  std::vector<float> sum = {static_cast<float>(Rank()), 1.0f, 10.0f * Rank()};
  std::vector<float> average = sum;
  ASSERT_OK_AND_ASSIGN(RequestId a,
                       T().PostAllReduce(group, absl::MakeSpan(sum), ReduceOp::kSum, {}));
  ASSERT_OK(T().Wait(a, kLong));
  ASSERT_OK_AND_ASSIGN(RequestId b,
                       T().PostAllReduce(group, absl::MakeSpan(average), ReduceOp::kAverage, {}));
  ASSERT_OK(T().Wait(b, kLong));
  float rank_sum = 0;
  for (int r : group.ranks) rank_sum += static_cast<float>(r);
  const float n = static_cast<float>(group.ranks.size());
  EXPECT_EQ(sum, (std::vector<float>{rank_sum, n, 10 * rank_sum}));
  EXPECT_EQ(average, (std::vector<float>{rank_sum / n, 1.0f, 10 * rank_sum / n}));
}

TEST(MpiCollectiveTest, AllReduceOverTheWorldAndOverTheRankAlone) {
  std::vector<float> world = {1.0f, static_cast<float>(Rank())};
  ASSERT_OK_AND_ASSIGN(RequestId a,
                       T().PostAllReduce(World(), absl::MakeSpan(world), ReduceOp::kSum, {}));
  ASSERT_OK(T().Wait(a, kLong));
  const float n = static_cast<float>(Ctx().size());
  EXPECT_EQ(world, (std::vector<float>{n, n * (n - 1) / 2}));
  std::vector<float> alone = {3.0f, static_cast<float>(Rank())};
  ASSERT_OK_AND_ASSIGN(RequestId b, T().PostAllReduce(Group{{Rank()}}, absl::MakeSpan(alone),
                                                      ReduceOp::kAverage, {}));
  ASSERT_OK(T().Wait(b, kLong));
  EXPECT_EQ(alone, (std::vector<float>{3.0f, static_cast<float>(Rank())}));
}

TEST(MpiCollectiveTest, ReduceScatterLeavesEachMemberItsShard) {
  const Group group = DpGroup();
  const int members = static_cast<int>(group.ranks.size());
  const int index = group.IndexOf(Rank());
  std::vector<float> in;
  for (int i = 0; i < 2 * members; ++i) in.push_back(static_cast<float>(i + Rank()));
  std::vector<float> out(2);
  ASSERT_OK_AND_ASSIGN(
      RequestId id, T().PostReduceScatter(group, in, absl::MakeSpan(out), ReduceOp::kAverage, {}));
  ASSERT_OK(T().Wait(id, kLong));
  float rank_mean = 0;
  for (int r : group.ranks) rank_mean += static_cast<float>(r) / members;
  EXPECT_EQ(out, (std::vector<float>{2.0f * index + rank_mean, 2.0f * index + 1 + rank_mean}));
}

// The reduction worker's call: the output is this member's place inside the
// input. The shard is reduced; the rest keeps this member's values.
TEST(MpiCollectiveTest, ReduceScatterIntoItsOwnInput) {
  const Group group = DpGroup();
  const int members = static_cast<int>(group.ranks.size());
  const int index = group.IndexOf(Rank());
  std::vector<float> data(3 * members, static_cast<float>(Rank() + 1));
  const std::vector<float> before = data;
  absl::Span<float> all = absl::MakeSpan(data);
  ASSERT_OK_AND_ASSIGN(RequestId id, T().PostReduceScatter(group, all, all.subspan(3 * index, 3),
                                                           ReduceOp::kSum, {}));
  ASSERT_OK(T().Wait(id, kLong));
  float sum = 0;
  for (int r : group.ranks) sum += static_cast<float>(r + 1);
  for (int i = 0; i < 3 * members; ++i) {
    EXPECT_EQ(data[i], i / 3 == index ? sum : before[i]) << "element " << i;
  }
}

TEST(MpiCollectiveTest, RefusesForeignGroupsAndMismatchedSizes) {
  std::vector<float> data(4);
  absl::StatusOr<RequestId> foreign =
      T().PostAllReduce(Group{{0, 1}}, absl::MakeSpan(data), ReduceOp::kSum, {});
  if (Ctx().size() == 4 && Ctx().dp() == 2 && Rank() == 0) {
    EXPECT_EQ(testing::Message(foreign),
              "rank 0: group {0, 1} is not a communicator of this MPI world; collectives run "
              "over a pipeline rank's data-parallel group (here {0, 2}; pp 2, dp 2), the whole "
              "world or the rank alone");
  }
  if (DpGroup().ranks != std::vector<int>{0, 1}) {
    EXPECT_EQ(foreign.status().code(), absl::StatusCode::kInvalidArgument);
  }
  std::vector<float> out(3);
  absl::StatusOr<RequestId> sizes = T().PostReduceScatter(
      DpGroup(), data, absl::MakeSpan(out), ReduceOp::kSum, {.action = "0REDUCE_GRAD"});
  EXPECT_EQ(sizes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(testing::Message(sizes),
            absl::StrCat("rank ", Rank(), ": reduce-scatter 0REDUCE_GRAD over ", Ctx().dp(),
                         " ranks: the input holds 4 elements; expected ", 3 * Ctx().dp(),
                         " (3 per member)"));
}

// Open MPI has no progress thread: a collective moves only inside MPI calls.
// The waiting thread's polling alone must carry it to completion while the
// other thread (the "compute" thread) makes no MPI call at all.
TEST(MpiCollectiveTest, AWaitingThreadCarriesTheReductionWhileTheOtherComputes) {
  std::vector<float> data(1 << 16, 1.0f);
  std::atomic<bool> done{false};
  absl::Status waited;
  std::thread reducer([&] {
    absl::StatusOr<RequestId> id =
        T().PostAllReduce(World(), absl::MakeSpan(data), ReduceOp::kSum, {});
    waited = id.ok() ? T().Wait(*id, kLong) : id.status();
    done = true;
  });
  const absl::Time give_up = absl::Now() + kLong;
  while (!done && absl::Now() < give_up) {
  }
  reducer.join();
  EXPECT_OK(waited);
  EXPECT_EQ(data.front(), static_cast<float>(Ctx().size()));
  EXPECT_EQ(data.back(), static_cast<float>(Ctx().size()));
}

// The abort suite runs in its own job (it leaves the job aborted):
// mpirun -np 3 mpi_transport_test --gtest_filter='MpiAbortTest.*'.
TEST(MpiAbortTest, AbortFailsEveryRanksOperationsAndPayloadsStillReachRankZero) {
  if (!absl::StrContains(::testing::GTEST_FLAG(filter), "MpiAbortTest")) {
    GTEST_SKIP() << "runs in its own job (--gtest_filter=MpiAbortTest.*)";
  }
  ASSERT_GE(Ctx().size(), 3);
  std::vector<std::byte> in(1), out(1);
  if (Rank() == 1) {
    ASSERT_OK(Ctx().Barrier(kLong));
    T().Abort("stage exploded");
  } else {
    // Waiting on rank 1, which aborts instead of sending.
    ASSERT_OK_AND_ASSIGN(RequestId id,
                         T().PostRecv(1, 50, absl::MakeSpan(in), {.action = "1RECV_F0"}));
    // Rank 1 may leave the barrier, abort, and its notice arrive here before
    // this rank's part of the barrier completes: then the barrier reports it.
    absl::Status barrier = Ctx().Barrier(kLong);
    if (!barrier.ok()) {
      EXPECT_EQ(barrier.code(), absl::StatusCode::kAborted);
      EXPECT_EQ(testing::Message(barrier),
                "rank 1 failed: stage exploded (while waiting for the job's barrier)");
    }
    absl::Status s = T().Wait(id, kLong);
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
    EXPECT_EQ(testing::Message(s),
              "rank 1 failed: stage exploded (while waiting for receive 1RECV_F0 from rank 1)");
  }
  absl::StatusOr<RequestId> later = T().PostSend(Rank() == 0 ? 2 : 0, 51, out, {});
  EXPECT_EQ(later.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(testing::Message(later), "rank 1 failed: stage exploded");
  EXPECT_EQ(Ctx().Barrier(kLong).code(), absl::StatusCode::kAborted);

  std::vector<std::optional<std::string>> payloads =
      Ctx().CollectAfterFailure(absl::StrCat("record of rank ", Rank()), kLong);
  if (Rank() != 0) {
    EXPECT_TRUE(payloads.empty());
    return;
  }
  ASSERT_EQ(static_cast<int>(payloads.size()), Ctx().size());
  for (int r = 0; r < Ctx().size(); ++r) {
    ASSERT_TRUE(payloads[r].has_value()) << "rank " << r;
    EXPECT_EQ(*payloads[r], absl::StrCat("record of rank ", r));
  }
}

// Other processes print only their failures, each line naming the rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "rank %d: %s:%d: %s\n", rank_,
                 result.file_name() == nullptr ? "?" : result.file_name(), result.line_number(),
                 result.summary());
  }

 private:
  const int rank_;
};

}  // namespace
}  // namespace jitpipe

// Usage: mpirun -np N mpi_transport_test [--dp=D] [gtest flags]
int main(int argc, char** argv) {
  jitpipe::MpiOptions options;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (absl::ConsumePrefix(&arg, "--dp=") && !absl::SimpleAtoi(arg, &options.dp)) {
      std::fprintf(stderr, "bad %s\n", argv[i]);
      return 2;
    }
  }
  absl::StatusOr<std::unique_ptr<jitpipe::MpiContext>> context =
      jitpipe::InitMpi(&argc, &argv, options);
  if (!context.ok()) {
    std::fprintf(stderr, "InitMpi: %s\n", std::string(context.status().message()).c_str());
    return 1;
  }
  jitpipe::g_context = context->get();
  ::testing::InitGoogleTest(&argc, argv);
  if ((*context)->rank() != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new jitpipe::RankFailurePrinter((*context)->rank()));
  }
  const int result = RUN_ALL_TESTS();
  context->reset();  // MPI_Finalize (MPI_Abort after an incomplete failure exchange)
  return result;
}
