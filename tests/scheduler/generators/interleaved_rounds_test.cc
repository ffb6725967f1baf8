#include "scheduler/generators/interleaved_rounds.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::interleaved_rounds_test {
namespace {

using ::jitpipe::testing::Message;

std::vector<std::string> Forwards(const InterleavedRounds& rounds, int rank) {
  std::vector<std::string> out;
  for (int j = 0; j < rounds.ops_per_rank(); ++j) out.push_back(rounds.Forward(rank, j).ToString());
  return out;
}

std::vector<std::string> Backwards(const InterleavedRounds& rounds, int rank, ActionKind kind) {
  std::vector<std::string> out;
  for (int j = 0; j < rounds.ops_per_rank(); ++j) {
    out.push_back(rounds.Backward(rank, j, kind).ToString());
  }
  return out;
}

TEST(InterleavedRoundsTest, DealsMicrobatchesOutInRounds) {
  ASSERT_OK_AND_ASSIGN(InterleavedRounds rounds, InterleavedRounds::Create("x", 2, 4, 2));
  EXPECT_EQ(rounds.microbatches_per_round(), 2);
  EXPECT_EQ(Forwards(rounds, 0),
            (std::vector<std::string>{"0F0", "0F1", "2F0", "2F1", "0F2", "0F3", "2F2", "2F3"}));
  EXPECT_EQ(Backwards(rounds, 1, ActionKind::kBackward),
            (std::vector<std::string>{"3B0", "3B1", "1B0", "1B1", "3B2", "3B3", "1B2", "1B3"}));
  EXPECT_EQ(Backwards(rounds, 0, ActionKind::kBackwardWeight)[2], "0W0");
}

// m < p: one round holding every microbatch.
TEST(InterleavedRoundsTest, FewMicrobatchesMakeOneRound) {
  ASSERT_OK_AND_ASSIGN(InterleavedRounds rounds, InterleavedRounds::Create("x", 4, 3, 2));
  EXPECT_EQ(rounds.microbatches_per_round(), 3);
  EXPECT_EQ(Forwards(rounds, 3), (std::vector<std::string>{"3F0", "3F1", "3F2", "7F0", "7F1", "7F2"}));
}

TEST(InterleavedRoundsTest, WarmupGrowsByTheHopFactorAndIsCapped) {
  ASSERT_OK_AND_ASSIGN(InterleavedRounds rounds, InterleavedRounds::Create("x", 4, 8, 2));
  // (v-1)*mpr = 4 on the last rank.
  EXPECT_EQ(rounds.Warmup(3, 2), 4);
  EXPECT_EQ(rounds.Warmup(0, 2), 10);
  EXPECT_EQ(rounds.Warmup(0, 1), 7);
  ASSERT_OK_AND_ASSIGN(InterleavedRounds small, InterleavedRounds::Create("x", 4, 1, 2));
  EXPECT_EQ(small.Warmup(0, 2), 2);  // capped at m*v
}

TEST(InterleavedRoundsTest, FlexibleRounds) {
  // p = 4, m <= 16: m % (m // 4) fails for 9, 11, 13 (2 rounds) and 14 (3).
  std::vector<int> refused;
  for (int m = 1; m <= 16; ++m) {
    if (!FlexibleRoundsAccept(4, m)) refused.push_back(m);
  }
  EXPECT_EQ(refused, (std::vector<int>{9, 11, 13, 14}));
}

struct RefusalCase {
  int pp;
  int microbatches;
  std::string message;
};

class InterleavedRoundsRefusalTest : public ::testing::TestWithParam<RefusalCase> {};

TEST_P(InterleavedRoundsRefusalTest, NamesTheNearestValidCounts) {
  const RefusalCase& c = GetParam();
  absl::StatusOr<InterleavedRounds> rounds =
      InterleavedRounds::Create("interleaved-1f1b", c.pp, c.microbatches, 2);
  EXPECT_EQ(rounds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(rounds), c.message);
}

INSTANTIATE_TEST_SUITE_P(
    Messages, InterleavedRoundsRefusalTest,
    ::testing::Values(
        RefusalCase{4, 9, "interleaved-1f1b: 9 microbatches is not a multiple of max(1, 9 // 4) = 2; use 8 or 10"},
        RefusalCase{8, 17, "interleaved-1f1b: 17 microbatches is not a multiple of max(1, 17 // 8) = 2; use 16 or 18"},
        // 3 rounds: 25 and 26 are refused too, 24 and 27 are the neighbours.
        RefusalCase{8, 25, "interleaved-1f1b: 25 microbatches is not a multiple of max(1, 25 // 8) = 3; use 24 or 27"},
        RefusalCase{8, 26, "interleaved-1f1b: 26 microbatches is not a multiple of max(1, 26 // 8) = 3; use 24 or 27"},
        RefusalCase{3, 7, "interleaved-1f1b: 7 microbatches is not a multiple of max(1, 7 // 3) = 2; use 6 or 8"}));

}  // namespace
}  // namespace jitpipe::interleaved_rounds_test
