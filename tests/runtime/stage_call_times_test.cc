// MeasureStageCallTimes: a hand-made measured timeline of 1F1B at pp 2, m 2
// over 3 steps, each call's span (step + 1) x (1 for F, 2 for B) x (stage +
// 1) us long, so the means over the counted steps are known.
#include "runtime/stage_call_times.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/replay_plan.h"
#include "scheduler/generators/generate.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::stage_call_times_test {
namespace {

using ::jitpipe::testing::Message;
using ::testing::HasSubstr;

Schedule Lowered() {
  absl::StatusOr<Schedule> s = Generate({"1f1b", 2, 2, 0});
  EXPECT_OK(s.status());
  absl::StatusOr<Schedule> lowered = LowerForReplay(*s);
  EXPECT_OK(lowered.status());
  return *lowered;
}

// Per world rank (dp 1: the pipeline rank), per step, every action: compute
// spans as above, and a send span (not counted) after each SEND.
Timeline Measured(const Schedule& s, int steps) {
  Timeline t;
  double now = 0;
  for (int rank = 0; rank < s.pp; ++rank) {
    for (int step = 0; step < steps; ++step) {
      for (int i = 0; i < static_cast<int>(s.ranks[rank].size()); ++i) {
        const Action& a = s.ranks[rank][i];
        if (IsSend(a.kind)) t.spans.push_back({rank, TimelineTrack::kSend, i, 0, now, now + 7});
        if (!IsCompute(a.kind)) continue;
        const double us = (step + 1) * (a.kind == ActionKind::kForward ? 1 : 2) * (a.stage + 1);
        t.spans.push_back({rank, TimelineTrack::kCompute, i, -1, now, now + us});
        now += us;
      }
    }
  }
  return t;
}

TEST(StageCallTimesTest, MeansOverTheCountedSteps) {
  const Schedule s = Lowered();
  // Steps 1 and 2 counted: F (2 + 3) / 2 x (stage + 1), B twice that.
  ASSERT_OK_AND_ASSIGN(std::vector<StageCallTimes> times,
                       MeasureStageCallTimes(s, Measured(s, 3), 3, 1));
  ASSERT_EQ(times.size(), 2u);
  for (int stage = 0; stage < 2; ++stage) {
    EXPECT_EQ(times[stage].stage, stage);
    EXPECT_DOUBLE_EQ(times[stage].forward_us, 2.5 * (stage + 1));
    EXPECT_DOUBLE_EQ(times[stage].backward_us, 5.0 * (stage + 1));
    EXPECT_EQ(times[stage].forward_calls, 4);  // 2 microbatches x 2 steps
    EXPECT_EQ(times[stage].backward_calls, 4);
    EXPECT_EQ(times[stage].backward_input_calls, 0);
    EXPECT_EQ(times[stage].backward_input_us, 0);
  }
  // Every step: F (1 + 2 + 3) / 3 = 2.
  ASSERT_OK_AND_ASSIGN(times, MeasureStageCallTimes(s, Measured(s, 3), 3, 0));
  EXPECT_DOUBLE_EQ(times[0].forward_us, 2);
}

TEST(StageCallTimesTest, RefusesATimelineOfAnotherRun) {
  const Schedule s = Lowered();
  EXPECT_THAT(Message(MeasureStageCallTimes(s, Measured(s, 3), 2, 0)),
              HasSubstr("rank 0 has 12 compute spans; 2 steps of its program have 8"));
  EXPECT_THAT(Message(MeasureStageCallTimes(s, Measured(s, 3), 3, 3)),
              HasSubstr("cannot skip 3 of 3 steps"));
  Timeline wrong = Measured(s, 1);
  int send = 0;
  while (!IsSend(s.ranks[0][send].kind)) ++send;
  wrong.spans[0].index = send;
  EXPECT_THAT(Message(MeasureStageCallTimes(s, wrong, 1, 0)),
              HasSubstr("rank 0: compute span at index "));
}

}  // namespace
}  // namespace jitpipe::stage_call_times_test
