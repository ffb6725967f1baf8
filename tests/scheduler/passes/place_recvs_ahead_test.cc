#include "scheduler/passes/place_recvs_ahead.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/analysis/validate.h"
#include "scheduler/generators/generate.h"
#include "scheduler/passes/lower_send_recv_early.h"
#include "scheduler/passes/place_recvs_just_in_time.h"
#include "tests/scheduler/passes/generator_cases.h"
#include "tests/scheduler/passes/pass_test_util.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::place_recvs_ahead_test {
namespace {

using ::jitpipe::testing::EveryGenerator;
using ::jitpipe::testing::FromRows;
using ::jitpipe::testing::GeneratorCase;
using ::jitpipe::testing::GeneratorCaseName;
using ::jitpipe::testing::Rows;

constexpr ValidateOptions kRelaxed{.semantics = CommSemantics::kRelaxed};

// Offsets that differ from receive to receive: (stage + microbatch) mod 4,
// one receive in four as early as the input posts it.
RecvOffsets Mixed(const Schedule& lowered) {
  RecvOffsets offsets;
  for (const RankProgram& program : lowered.ranks) {
    for (const Action& a : program) {
      if (!IsRecv(a.kind)) continue;
      const int k = (a.stage + a.microbatch) % 4;
      offsets.ahead[RecvKey::Of(a)] = k == 3 ? kRecvAheadAll : k;
    }
  }
  return offsets;
}

class EveryGeneratorTest : public ::testing::TestWithParam<GeneratorCase> {};

// k = 0 everywhere is PlaceRecvsJustInTime; k = all everywhere is the
// input, LowerSendRecvEarly's placement.
TEST_P(EveryGeneratorTest, ZeroIsJustInTimeAllIsEarly) {
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate(GetParam().Spec()));
  ASSERT_OK_AND_ASSIGN(Schedule early, LowerSendRecvEarly(s));
  ASSERT_OK_AND_ASSIGN(Schedule jit, PlaceRecvsJustInTime(early));
  ASSERT_OK_AND_ASSIGN(Schedule zero, PlaceRecvsAhead(early, {.fallback = 0}));
  EXPECT_EQ(Rows(zero), Rows(jit));
  ASSERT_OK_AND_ASSIGN(Schedule all, PlaceRecvsAhead(early, {.fallback = kRecvAheadAll}));
  EXPECT_EQ(Rows(all), Rows(early));
  // Listing every receive gives the same as the fallback.
  RecvOffsets listed = Mixed(early);
  for (auto& [key, k] : listed.ahead) k = 0;
  listed.fallback = 5;
  ASSERT_OK_AND_ASSIGN(Schedule zero_listed, PlaceRecvsAhead(early, listed));
  EXPECT_EQ(Rows(zero_listed), Rows(jit));
  // What RecvLeads reads back: nothing ahead of a just-in-time program.
  ASSERT_OK_AND_ASSIGN(RecvOffsets leads, RecvLeads(jit));
  for (const auto& [key, k] : leads.ahead) EXPECT_EQ(k, 0);
}

// Per-receive offsets: same actions, only RECVs moved, each between its
// input position and its consumer, at most k computes ahead, and the
// result deadlock-free (validator) under relaxed semantics.
TEST_P(EveryGeneratorTest, MixedOffsetsAreValidAndBounded) {
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate(GetParam().Spec()));
  ASSERT_OK_AND_ASSIGN(Schedule early, LowerSendRecvEarly(s));
  const RecvOffsets offsets = Mixed(early);
  ASSERT_OK_AND_ASSIGN(Schedule placed, PlaceRecvsAhead(early, offsets));
  EXPECT_OK(Validate(placed, kRelaxed));
  ASSERT_OK_AND_ASSIGN(RecvOffsets early_leads, RecvLeads(early));
  ASSERT_OK_AND_ASSIGN(RecvOffsets leads, RecvLeads(placed));
  ASSERT_EQ(leads.ahead.size(), early_leads.ahead.size());
  for (const auto& [key, k] : leads.ahead) {
    const int asked = offsets.ahead.at(key);
    const int most = early_leads.ahead.at(key);
    EXPECT_LE(k, std::min(asked, most)) << KindName(key.kind) << key.stage << "," << key.microbatch;
    if (asked == kRecvAheadAll) {
      EXPECT_EQ(k, most);
    }
  }
  ASSERT_OK_AND_ASSIGN(Schedule jit, PlaceRecvsJustInTime(early));
  for (size_t r = 0; r < jit.ranks.size(); ++r) {
    std::vector<std::string> kept_jit, kept_placed;
    for (const Action& a : jit.ranks[r]) {
      if (!IsRecv(a.kind)) kept_jit.push_back(a.ToString());
    }
    for (const Action& a : placed.ranks[r]) {
      if (!IsRecv(a.kind)) kept_placed.push_back(a.ToString());
    }
    EXPECT_EQ(kept_placed, kept_jit) << "rank " << r;
    EXPECT_EQ(placed.ranks[r].size(), jit.ranks[r].size()) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Pp4, EveryGeneratorTest, ::testing::ValuesIn(EveryGenerator()),
                         GeneratorCaseName);

struct Case {
  std::string name;
  std::vector<std::string> compute;  // lowered early first
  std::vector<std::pair<std::string, int>> ahead;  // receive text -> k; the rest 0
  std::vector<std::string> out;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& param) { return param.param.name; }

class AheadTextTest : public ::testing::TestWithParam<Case> {};

TEST_P(AheadTextTest, PostsEachRecvKComputesAhead) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows(GetParam().compute));
  ASSERT_OK_AND_ASSIGN(Schedule early, LowerSendRecvEarly(s));
  RecvOffsets offsets;
  for (const auto& [text, k] : GetParam().ahead) {
    ASSERT_OK_AND_ASSIGN(Action recv, ParseAction(text));
    offsets.ahead[RecvKey::Of(recv)] = k;
  }
  ASSERT_OK_AND_ASSIGN(Schedule placed, PlaceRecvsAhead(early, offsets));
  EXPECT_EQ(Rows(placed), GetParam().out);
  EXPECT_OK(Validate(placed, kRelaxed));
}

INSTANTIATE_TEST_SUITE_P(
    Hand, AheadTextTest,
    ::testing::Values(
        // The header's example: F1 and F2's inputs one compute ahead.
        Case{"HeaderExample",
             {"0F0 0F1 0F2 0B0 0B1 0B2", "1F0 1B0 1F1 1B1 1F2 1B2"},
             {{"1RECV_F1", 1}, {"1RECV_F2", 1}},
             {"0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2 0RECV_B0 0B0 0RECV_B1 0B1 0RECV_B2 0B2",
              "1RECV_F0 1F0 1RECV_F1 1B0 1SEND_B0 1F1 1RECV_F2 1B1 1SEND_B1 1F2 1B2 1SEND_B2"}},
        // k = 3 for 1RECV_F2 would be before 1B0, but early posts it only
        // after 1SEND_B0: it stays there, ahead of 1F1's own receive.
        Case{"NeverEarlierThanTheInput",
             {"0F0 0F1 0F2 0B0 0B1 0B2", "1F0 1B0 1F1 1B1 1F2 1B2"},
             {{"1RECV_F2", 3}},
             {"0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2 0RECV_B0 0B0 0RECV_B1 0B1 0RECV_B2 0B2",
              "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F2 1RECV_F1 1F1 1B1 1SEND_B1 1F2 1B2 "
              "1SEND_B2"}},
        // Rank 0's output gradients: B1's one compute ahead lands before
        // 0B0, before B0's own just-in-time receive (k > 0 first, then the
        // consumer's k = 0).
        Case{"AheadBeforeJustInTime",
             {"0F0 0F1 0F2 0F3 0B0 0B1 0B2 0B3", "1F0 1F1 1B0 1B1 1F2 1B2 1F3 1B3"},
             {{"0RECV_B1", 1}},
             {"0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2 0F3 0SEND_F3 0RECV_B1 0RECV_B0 0B0 0B1 "
              "0RECV_B2 0B2 0RECV_B3 0B3",
              "1RECV_F0 1F0 1RECV_F1 1F1 1B0 1SEND_B0 1B1 1SEND_B1 1RECV_F2 1F2 1B2 1SEND_B2 "
              "1RECV_F3 1F3 1B3 1SEND_B3"}}),
    CaseName);

TEST(PlaceRecvsAheadTest, RefusesANegativeOffset) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0B0", "1F0 1B0"}));
  ASSERT_OK_AND_ASSIGN(Schedule early, LowerSendRecvEarly(s));
  RecvOffsets offsets;
  offsets.ahead[RecvKey{ActionKind::kRecvF, 1, 0}] = -1;
  absl::StatusOr<Schedule> placed = PlaceRecvsAhead(early, offsets);
  ASSERT_FALSE(placed.ok());
  EXPECT_EQ(placed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(placed.status().message().find("1RECV_F0 on rank 1"), std::string::npos)
      << placed.status();
}

TEST(PlaceRecvsAheadTest, RefusesAComputeOnlyProgram) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0B0", "1F0 1B0"}));
  EXPECT_FALSE(PlaceRecvsAhead(s, {}).ok());
}

TEST(RecvOffsetsTest, HistogramCountsEachK) {
  RecvOffsets offsets;
  offsets.ahead[RecvKey{ActionKind::kRecvF, 1, 0}] = 0;
  offsets.ahead[RecvKey{ActionKind::kRecvF, 1, 1}] = 2;
  offsets.ahead[RecvKey{ActionKind::kRecvB, 0, 1}] = 2;
  offsets.ahead[RecvKey{ActionKind::kRecvB, 0, 2}] = kRecvAheadAll;
  EXPECT_EQ(offsets.Histogram(), "k=0: 1, k=2: 2, k=all: 1");
  EXPECT_EQ(RecvOffsets{}.Histogram(), "no receives");
}

}  // namespace
}  // namespace jitpipe::place_recvs_ahead_test
