#include "scheduler/passes/add_wait_send.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/analysis/comm_matching.h"
#include "scheduler/passes/lower.h"
#include "scheduler/analysis/validate.h"
#include "tests/scheduler/passes/generator_cases.h"
#include "tests/scheduler/passes/pass_test_util.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::add_wait_send_test {
namespace {

using ::jitpipe::testing::EveryGenerator;
using ::jitpipe::testing::FromRows;
using ::jitpipe::testing::GeneratorCase;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::Rows;

// The header's example: rank 0 of 1F1B pp 2, m 2; rank 1 sends gradients
// only, which get no wait.
TEST(AddWaitSendTest, WaitsFollowTheLocalBackwardOfEachSentActivation) {
  ASSERT_OK_AND_ASSIGN(Schedule s,
                       FromRows({"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
                                 "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1"}));
  ASSERT_OK_AND_ASSIGN(Schedule out, AddWaitSend(s));
  EXPECT_EQ(Rows(out), (std::vector<std::string>{
                           "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0WAIT_SEND_F0 0RECV_B1 0B1 "
                           "0WAIT_SEND_F1",
                           "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1"}));
  // Idempotent: a send with its wait gets no second one.
  ASSERT_OK_AND_ASSIGN(Schedule again, AddWaitSend(out));
  EXPECT_EQ(Rows(again), Rows(out));
}

// Split backwards: after the I. In a compound: after the compound.
TEST(AddWaitSendTest, FollowsTheInputBackwardAndCompounds) {
  ASSERT_OK_AND_ASSIGN(Schedule split,
                       FromRows({"0F0 0SEND_F0 0RECV_B0 0I0 0W0", "1RECV_F0 1F0 1B0 1SEND_B0"}));
  ASSERT_OK_AND_ASSIGN(Schedule out, AddWaitSend(split));
  EXPECT_EQ(Rows(out)[0], "0F0 0SEND_F0 0RECV_B0 0I0 0WAIT_SEND_F0 0W0");
  ASSERT_OK_AND_ASSIGN(
      Schedule overlap,
      FromRows({"0F0 0SEND_F0 0F1 0SEND_F1 2RECV_F0 2F0 2SEND_F0 2RECV_B0 2B0 2SEND_B0 2RECV_F1 "
                "0RECV_B0 (2F1;0B0)OVERLAP_F_B 2SEND_F1 2RECV_B1 2B1 2SEND_B1 0RECV_B1 0B1",
                "1RECV_F0 1F0 1SEND_F0 1RECV_F1 1F1 1SEND_F1 3RECV_F0 3F0 3B0 3SEND_B0 1RECV_B0 1B0 "
                "1SEND_B0 3RECV_F1 3F1 3B1 3SEND_B1 1RECV_B1 1B1 1SEND_B1"}));
  ASSERT_OK_AND_ASSIGN(Schedule compound, AddWaitSend(overlap));
  EXPECT_EQ(Rows(compound)[0],
            "0F0 0SEND_F0 0F1 0SEND_F1 2RECV_F0 2F0 2SEND_F0 2RECV_B0 2B0 2WAIT_SEND_F0 2SEND_B0 "
            "2RECV_F1 0RECV_B0 (2F1;0B0)OVERLAP_F_B 0WAIT_SEND_F0 2SEND_F1 2RECV_B1 2B1 "
            "2WAIT_SEND_F1 2SEND_B1 0RECV_B1 0B1 0WAIT_SEND_F1");
}

TEST(AddWaitSendTest, RefusesComputeOnlyAndUnmatchedPrograms) {
  ASSERT_OK_AND_ASSIGN(Schedule compute, FromRows({"0F0 0B0", "1F0 1B0"}));
  EXPECT_EQ(AddWaitSend(compute).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_OK_AND_ASSIGN(Schedule unmatched,
                       FromRows({"0F0 0SEND_F0 0RECV_B0 0B0", "1F0 1B0 1SEND_B0"}));
  EXPECT_EQ(Message(AddWaitSend(unmatched)),
            "rank 0, index 1 (0SEND_F0): no matching 1RECV_F0 on rank 1");
}

class AddWaitSendGeneratorTest
    : public ::testing::TestWithParam<std::tuple<GeneratorCase, RecvPlacement>> {};

// On every schedule and placement: one WAIT_SEND_F per SEND_F, right after
// the action holding that activation's backward; none for SEND_B; and the
// program runs under the semantics its placement is safe for.
TEST_P(AddWaitSendGeneratorTest, OneWaitPerActivationRightAfterItsBackward) {
  const auto& [gen, recv] = GetParam();
  ASSERT_OK_AND_ASSIGN(Schedule compute, Generate(gen.Spec()));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(compute, {.recv = recv, .reduce_grad = true}));
  ASSERT_OK_AND_ASSIGN(Schedule out,
                       Lower(compute, {.recv = recv, .reduce_grad = true, .wait_send = true,
                                       .check_invariants = true}));
  EXPECT_OK(Validate(out));
  if (recv != RecvPlacement::kJit) {
    EXPECT_OK(Validate(out, {.semantics = CommSemantics::kStrict}));
  }
  int sends = 0, waits = 0;
  for (int r = 0; r < out.pp; ++r) {
    const RankProgram& p = out.ranks[r];
    for (size_t i = 0; i < p.size(); ++i) {
      EXPECT_NE(p[i].kind, ActionKind::kWaitSendB);
      if (p[i].kind == ActionKind::kSendF) ++sends;
      if (p[i].kind != ActionKind::kWaitSendF) continue;
      ++waits;
      ASSERT_GT(i, 0u);
      bool after_backward = false;
      ForEachComputePart(p[i - 1], [&](const Action& part) {
        after_backward |= part.stage == p[i].stage && part.microbatch == p[i].microbatch &&
                          (part.kind == ActionKind::kBackward ||
                           part.kind == ActionKind::kBackwardInput);
      });
      // Two waits may follow one compound (both of its backwards' sends).
      if (!after_backward && p[i - 1].kind == ActionKind::kWaitSendF && i >= 2) {
        ForEachComputePart(p[i - 2], [&](const Action& part) {
          after_backward |= part.stage == p[i].stage && part.microbatch == p[i].microbatch;
        });
      }
      EXPECT_TRUE(after_backward) << "rank " << r << " index " << i << " " << p[i].ToString();
    }
  }
  EXPECT_EQ(waits, sends);
  // Only waits were added.
  for (int r = 0; r < out.pp; ++r) {
    RankProgram without;
    for (const Action& a : out.ranks[r]) {
      if (a.kind != ActionKind::kWaitSendF) without.push_back(a);
    }
    EXPECT_EQ(without, lowered.ranks[r]);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Generators, AddWaitSendGeneratorTest,
    ::testing::Combine(::testing::ValuesIn(EveryGenerator()),
                       ::testing::Values(RecvPlacement::kJit, RecvPlacement::kEarly,
                                         RecvPlacement::kJitRendezvous)),
    [](const auto& param_info) {
      std::string name = ::jitpipe::testing::GeneratorCaseName(
          ::testing::TestParamInfo<GeneratorCase>(std::get<0>(param_info.param), param_info.index));
      std::string recv(RecvPlacementName(std::get<1>(param_info.param)));
      std::replace(recv.begin(), recv.end(), '-', '_');
      return absl::StrCat(name, "_", recv);
    });

}  // namespace
}  // namespace jitpipe::add_wait_send_test
