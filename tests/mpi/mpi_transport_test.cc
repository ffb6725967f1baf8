// The MPI backend's own behaviour, run as a real MPI job: every process of
// `mpirun -np 4 mpi_transport_test` runs these tests in the same order and
// checks its own side (tests/mpi/CMakeLists.txt). What every backend does
// is in tests/comm/transport_conformance_test.cc, whose MPI jobs run beside
// this one.
//
// Point-to-point pairs: 0 -> 1, 2 -> 3.
#include "comm/mpi/mpi_world.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mpi/mpi_test_main.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

MpiWorld& Ctx() { return testing::TheMpiWorld(); }
Transport& T() { return Ctx().transport(); }
int Rank() { return Ctx().rank(); }

constexpr absl::Duration kLong = absl::Seconds(20);

bool IsSender() { return Rank() % 2 == 0; }
int Partner() { return IsSender() ? Rank() + 1 : Rank() - 1; }

TEST(MpiWorldTest, IsOneRankOfTheLaunchedJob) {
  EXPECT_EQ(Ctx().name(), "MPI");
  EXPECT_EQ(Ctx().local_ranks(), std::vector<int>{Rank()});
  EXPECT_EQ(&Ctx().transport(Rank()), &T());
  EXPECT_EQ(T().rank(), Rank());
  EXPECT_EQ(T().size(), Ctx().size());
  EXPECT_EQ(Ctx().send_completion(), SendCompletion::kRendezvous);
  EXPECT_FALSE(Ctx().host().empty());
  EXPECT_EQ(Ctx().CheckSize(2 * Ctx().size(), "pp 4 x dp 2").message(),
            absl::StrCat("the MPI world has ", Ctx().size(), " processes but pp 4 x dp 2 needs ",
                         2 * Ctx().size(), " (mpirun -np ", 2 * Ctx().size(), ")"));
}

TEST(MpiWorldTest, BroadcastsFromRankZeroAndGathersAtRankZero) {
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

// Processes that ask for different groups would split MPI_COMM_WORLD into
// communicators that do not match: every process refuses instead, and the
// world stays usable.
TEST(MpiWorldTest, EveryProcessRefusesGroupRequestsThatDiffer) {
  ASSERT_GE(Ctx().size(), 3);
  const std::vector<Group> mine = {Rank() == 0 ? Group{{0, 1}} : Group{{0, 2}}};
  const absl::Status refused = Ctx().CreateGroups(mine, kLong);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(testing::Message(refused),
            "rank 1 requested other groups than rank 0 (World::CreateGroups takes the same list "
            "on every process)");
  ASSERT_OK(Ctx().CreateGroups({Group{{0, 2}}}, kLong));
  std::vector<float> data = {1.0f};
  if (Rank() == 0 || Rank() == 2) {
    ASSERT_OK_AND_ASSIGN(RequestId id, T().PostAllReduce(Group{{0, 2}}, absl::MakeSpan(data),
                                                         ReduceOp::kSum, {}));
    ASSERT_OK(T().Wait(id, kLong));
    EXPECT_EQ(data[0], 2.0f);
  }
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

TEST(MpiTransportTest, RefusesTagsAboveTheTagBound) {
  std::vector<std::byte> out(1);
  absl::StatusOr<RequestId> big = T().PostSend(Partner(), uint64_t{1} << 40, out, {});
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(testing::Message(big),
              StartsWith(absl::StrCat("send to rank ", Partner(),
                                      ": tag 1099511627776 exceeds this MPI's MPI_TAG_UB ")));
}

}  // namespace
}  // namespace jitpipe
