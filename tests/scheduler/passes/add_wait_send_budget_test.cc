#include "scheduler/passes/add_wait_send_budget.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "scheduler/analysis/comm_matching.h"
#include "scheduler/passes/lower.h"
#include "scheduler/analysis/validate.h"
#include "tests/scheduler/passes/generator_cases.h"
#include "tests/scheduler/passes/pass_test_util.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::add_wait_send_budget_test {
namespace {

using ::jitpipe::testing::EveryGenerator;
using ::jitpipe::testing::FromRows;
using ::jitpipe::testing::GeneratorCase;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::Rows;

// The most sends rank r holds at once: posted, not yet waited for.
int MostHeld(const Schedule& s, int r) {
  int held = 0, most = 0;
  for (const Action& a : s.ranks[r]) {
    if (IsSend(a.kind)) most = std::max(most, ++held);
    if (IsWaitSend(a.kind)) --held;
  }
  return most;
}

// The header's example: GPipe pp 2, m 3, budget 2. Rank 1 receives each
// activation just before its forward, so rank 0's third send must first
// wait for the oldest.
TEST(AddWaitSendBudgetTest, WaitsForTheOldestSendWhoseReceiveIsPosted) {
  ASSERT_OK_AND_ASSIGN(
      Schedule s,
      FromRows({"0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2 0RECV_B0 0B0 0RECV_B1 0B1 0RECV_B2 0B2",
                "1RECV_F0 1F0 1RECV_F1 1F1 1RECV_F2 1F2 1B0 1SEND_B0 1B1 1SEND_B1 1B2 "
                "1SEND_B2"}));
  ASSERT_OK_AND_ASSIGN(Schedule out, AddWaitSendBudget(s, {.budget = 2}));
  EXPECT_EQ(Rows(out),
            (std::vector<std::string>{
                "0F0 0SEND_F0 0F1 0SEND_F1 0F2 0WAIT_SEND_F0 0SEND_F2 0RECV_B0 0B0 0RECV_B1 0B1 "
                "0RECV_B2 0B2",
                "1RECV_F0 1F0 1RECV_F1 1F1 1RECV_F2 1F2 1B0 1SEND_B0 1B1 1SEND_B1 1B2 "
                "1WAIT_SEND_B0 1SEND_B2"}));
  ASSERT_OK_AND_ASSIGN(Schedule one, AddWaitSendBudget(s, {.budget = 1}));
  EXPECT_EQ(MostHeld(one, 0), 1);
  EXPECT_EQ(MostHeld(one, 1), 1);
  EXPECT_OK(Validate(one));
  // A budget every rank keeps anyway adds nothing.
  ASSERT_OK_AND_ASSIGN(Schedule three, AddWaitSendBudget(s, {.budget = 3}));
  EXPECT_EQ(Rows(three), Rows(s));
}

// Rank 1 posts its receive of rank 0's first send only after consuming
// rank 0's second: with budget 1 rank 0 would have to wait for a receive
// that needs its own next send. The walk says so, and which budget works.
TEST(AddWaitSendBudgetTest, SaysWhenABudgetCannotBeKept) {
  ASSERT_OK_AND_ASSIGN(
      Schedule s,
      FromRows({"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
                "1RECV_F1 1F1 1RECV_F0 1F0 1B0 1SEND_B0 1B1 1SEND_B1"}));
  EXPECT_EQ(Message(AddWaitSendBudget(s, {.budget = 1})),
            "send budget 1 cannot be kept: rank 0, index 3 (0SEND_F1) would hold 2 sent "
            "buffers, and none of the receives of those it holds (1RECV_F0: rank 1, index 2) is "
            "posted before it goes on; budget 2 can be kept");
  EXPECT_OK(AddWaitSendBudget(s, {.budget = 2}).status());
  EXPECT_EQ(Message(AddWaitSendBudget(s, {.budget = 0})),
            "the send budget must be at least 1 (a send must be posted), not 0");
}

class SendBudgetGeneratorTest
    : public ::testing::TestWithParam<std::tuple<GeneratorCase, RecvPlacement, int>> {};

// On every schedule, placement and budget: no rank ever holds more than K
// sends, the program stays deadlock-free under the semantics its placement
// is safe for, and only waits were added. Receives posted early
// (jit-rendezvous) let every budget be kept; with just-in-time receives a
// small budget may not be, and the pass then names one that is (which the
// test then checks).
TEST_P(SendBudgetGeneratorTest, NoRankHoldsMoreThanTheBudget) {
  const auto& [gen, recv, asked] = GetParam();
  int budget = asked;
  ASSERT_OK_AND_ASSIGN(Schedule compute, Generate(gen.Spec()));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(compute, {.recv = recv}));
  absl::StatusOr<Schedule> out =
      Lower(compute, {.recv = recv, .send_budget = budget, .check_invariants = true});
  if (!out.ok()) {
    EXPECT_EQ(recv, RecvPlacement::kJit) << out.status();
    // The pass says which budget it keeps, and that one works.
    const std::string message(out.status().message());
    const size_t at = message.rfind("; budget ");
    ASSERT_NE(at, std::string::npos) << message;
    const int smallest = std::stoi(message.substr(at + 9));
    EXPECT_GT(smallest, budget);
    budget = smallest;
    out = Lower(compute, {.recv = recv, .send_budget = budget, .check_invariants = true});
  }
  ASSERT_OK(out.status());
  // The one-call form finds the same budget and writes the same program.
  ASSERT_OK_AND_ASSIGN(const BudgetedProgram at_smallest,
                       AddWaitSendAtSmallestBudget(lowered, {.budget = asked}));
  ASSERT_OK_AND_ASSIGN(const int smallest, SmallestSendBudget(lowered, {.budget = asked}));
  EXPECT_EQ(at_smallest.budget, smallest);
  EXPECT_EQ(at_smallest.budget, budget);
  ASSERT_OK_AND_ASSIGN(const Schedule two_calls, AddWaitSendBudget(lowered, {.budget = smallest}));
  EXPECT_EQ(at_smallest.program.ranks, two_calls.ranks);
  EXPECT_OK(Validate(*out));
  if (recv != RecvPlacement::kJit) {
    EXPECT_OK(Validate(*out, {.semantics = CommSemantics::kStrict}));
  }
  for (int r = 0; r < out->pp; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    EXPECT_LE(MostHeld(*out, r), budget);
    RankProgram without;
    for (const Action& a : out->ranks[r]) {
      if (!IsWaitSend(a.kind)) without.push_back(a);
    }
    EXPECT_EQ(without, lowered.ranks[r]);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Generators, SendBudgetGeneratorTest,
    ::testing::Combine(::testing::ValuesIn(EveryGenerator()),
                       ::testing::Values(RecvPlacement::kJit, RecvPlacement::kJitRendezvous),
                       ::testing::Values(1, 2, 4)),
    [](const auto& param_info) {
      std::string name = ::jitpipe::testing::GeneratorCaseName(
          ::testing::TestParamInfo<GeneratorCase>(std::get<0>(param_info.param), param_info.index));
      std::string recv(RecvPlacementName(std::get<1>(param_info.param)));
      std::replace(recv.begin(), recv.end(), '-', '_');
      return absl::StrCat(name, "_", recv, "_k", std::get<2>(param_info.param));
    });

// With --wait-send first the budget counts the waits already there.
TEST(AddWaitSendBudgetTest, CountsTheWaitsAlreadyThere) {
  ASSERT_OK_AND_ASSIGN(Schedule compute, Generate({"1f1b", 4, 8, 0}));
  ASSERT_OK_AND_ASSIGN(Schedule both,
                       Lower(compute, {.wait_send = true, .send_budget = 2,
                                       .check_invariants = true}));
  ASSERT_OK_AND_ASSIGN(Schedule waits, Lower(compute, {.wait_send = true}));
  for (int r = 0; r < 4; ++r) {
    EXPECT_LE(MostHeld(both, r), 2);
    int added = 0, before = 0;
    for (const Action& a : both.ranks[r]) added += IsWaitSend(a.kind);
    for (const Action& a : waits.ranks[r]) before += IsWaitSend(a.kind);
    EXPECT_GE(added, before);
  }
}

}  // namespace
}  // namespace jitpipe::add_wait_send_budget_test
