// What the ranks of a replay hand to world rank 0, and what rank 0 makes of
// failures (runtime/rank_report.h).
#include "runtime/rank_report.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "base/atomic_file.h"
#include "comm/flight_recorder.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::rank_report_test {
namespace {

using ::testing::HasSubstr;

TEST(RankReportTest, AnOutcomeRoundTripsExactly) {
  RankOutcome outcome;
  outcome.heap_allocations = 17;
  outcome.peak_bytes = int64_t{3} << 33;
  StepResult step;
  step.loss = 0.1 + 0.2;  // not exactly representable in few digits
  step.start_us = 1.0 / 3;
  step.compute_end_us = 12.5;
  step.end_us = 20.25;
  step.exposed_reduce_us = 3e-7;
  step.peak_bytes = int64_t{1} << 40;
  step.timeline.spans.push_back({5, TimelineTrack::kRecv, 7, 3, 1.5, 2.75});
  MemorySample sample;
  sample.rank = 5;
  sample.time_us = 9.125;
  sample.bytes = {1, 2, 3, 4, int64_t{1} << 50};
  step.timeline.memory.push_back(sample);
  outcome.steps = {step, step};

  ASSERT_OK_AND_ASSIGN(RankOutcome back, DecodeRankOutcome(EncodeRankOutcome(outcome)));
  EXPECT_EQ(back.heap_allocations, 17);
  EXPECT_EQ(back.peak_bytes, int64_t{3} << 33);
  ASSERT_EQ(back.steps.size(), 2u);
  const StepResult& r = back.steps[1];
  EXPECT_EQ(r.loss, step.loss);
  EXPECT_EQ(r.start_us, step.start_us);
  EXPECT_EQ(r.compute_end_us, step.compute_end_us);
  EXPECT_EQ(r.end_us, step.end_us);
  EXPECT_EQ(r.exposed_reduce_us, step.exposed_reduce_us);
  EXPECT_EQ(r.peak_bytes, step.peak_bytes);
  ASSERT_EQ(r.timeline.spans.size(), 1u);
  const TimelineSpan& span = r.timeline.spans[0];
  EXPECT_EQ(span.rank, 5);
  EXPECT_EQ(span.track, TimelineTrack::kRecv);
  EXPECT_EQ(span.index, 7);
  EXPECT_EQ(span.transfer, 3);
  EXPECT_EQ(span.start_us, 1.5);
  EXPECT_EQ(span.end_us, 2.75);
  ASSERT_EQ(r.timeline.memory.size(), 1u);
  EXPECT_EQ(r.timeline.memory[0].time_us, 9.125);
  EXPECT_EQ(r.timeline.memory[0].bytes, sample.bytes);
}

TEST(RankReportTest, AFailureRoundTrips) {
  RankFailure failure{3, absl::DeadlineExceededError("rank 3, index 4 (3F1): timed out"),
                         1234.5, "{\"format\": \"jitpipe.flight_record\"}", "disk full"};
  ASSERT_OK_AND_ASSIGN(RankFailure back, DecodeRankFailure(EncodeRankFailure(failure)));
  EXPECT_EQ(back.world_rank, 3);
  EXPECT_EQ(back.status, failure.status);
  EXPECT_EQ(back.failed_at_us, 1234.5);
  EXPECT_EQ(back.record, failure.record);
  EXPECT_EQ(back.dump_error, "disk full");
  EXPECT_FALSE(back.stuck);
  failure.stuck = true;
  ASSERT_OK_AND_ASSIGN(RankFailure stuck, DecodeRankFailure(EncodeRankFailure(failure)));
  EXPECT_TRUE(stuck.stuck);
}

TEST(RankReportTest, MalformedTextIsInvalidArgument) {
  for (const char* text : {"", "{", "[]", "{\"steps\": 3}"}) {
    absl::StatusOr<RankOutcome> outcome = DecodeRankOutcome(text);
    EXPECT_EQ(outcome.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(testing::Message(outcome), ::testing::StartsWith("malformed rank outcome: "));
    absl::StatusOr<RankFailure> failure = DecodeRankFailure(text);
    EXPECT_EQ(failure.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(testing::Message(failure), ::testing::StartsWith("malformed rank failure: "));
  }
}

RankFailure Failure(int w, absl::Status status, double at_us) {
  FlightRecorder recorder(w, 4);
  return {w, std::move(status), at_us, recorder.ToJson("failed"), ""};
}

// Ranks 0 and 3 aborted because of rank 1, which timed out after rank 2
// timed out; rank 2's timeout came first, so it is the root. Nobody heard
// from rank 4.
TEST(RankReportTest, TheRootIsTheEarliestFailureThatIsNotAnAbort) {
  RankFailures failures(5);
  failures[0] = Failure(0, absl::AbortedError("rank 1 failed"), 10);
  failures[1] = Failure(1, absl::DeadlineExceededError("rank 1 timed out"), 30);
  failures[2] = Failure(2, absl::DeadlineExceededError("rank 2 timed out"), 20);
  failures[3] = Failure(3, absl::AbortedError("rank 1 failed"), 5);
  EXPECT_EQ(RootFailure(failures), 2);
  EXPECT_EQ(HowOthersStopped(failures, 2),
            "aborted (0, 3), timed out (1), no report, died or did not answer (4)");
  failures[4] = Failure(4, absl::InvalidArgumentError("stage 4 exploded"), 40);
  EXPECT_EQ(HowOthersStopped(failures, 2), "aborted (0, 3), timed out (1), failed (4)");
}

// Rank 1's watchdog reported it stuck in a stage call (a timeout-coded
// report, sent after everyone else's): never the root, listed apart.
TEST(RankReportTest, AStuckRankIsNeverTheRootAndIsNamedApart) {
  RankFailures failures(3);
  failures[0] = Failure(0, absl::AbortedError("rank 2 failed"), 10);
  failures[1] = Failure(1, absl::DeadlineExceededError("rank 1: still in a stage call"), 1);
  failures[1]->stuck = true;
  failures[2] = Failure(2, absl::DeadlineExceededError("rank 2 timed out"), 5);
  EXPECT_EQ(RootFailure(failures), 2);
  EXPECT_EQ(HowOthersStopped(failures, 2), "aborted (0), stuck in a stage call (1)");
}

TEST(RankReportTest, WithOnlyAbortsTheEarliestIsTheRoot) {
  RankFailures failures(3);
  failures[0] = Failure(0, absl::AbortedError("SIGTERM"), 10);
  failures[2] = Failure(2, absl::AbortedError("SIGTERM"), 4);
  EXPECT_EQ(RootFailure(failures), 2);
  EXPECT_EQ(HowOthersStopped(failures, 2),
            "aborted (0), no report, died or did not answer (1)");
  RankFailures alone(1);
  alone[0] = Failure(0, absl::AbortedError("SIGTERM"), 1);
  EXPECT_EQ(RootFailure(alone), 0);
  EXPECT_EQ(HowOthersStopped(alone, 0), "");
}

TEST(RankReportTest, KeepsTheOtherRanksRecordsInTheDirectory) {
  const std::string dir = testing::MakeTempDir("mpi_outcome");
  RankFailures failures(3);
  failures[0] = Failure(0, absl::DeadlineExceededError("timed out"), 1);
  failures[0]->dump_error = "disk full";
  failures[2] = Failure(2, absl::AbortedError("rank 0 failed"), 2);
  std::vector<FlightRecord> records;
  EXPECT_EQ(KeepRecords(failures, dir, {0}, records), "0 (disk full)");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1].rank, 2);
  ASSERT_OK_AND_ASSIGN(std::string written, ReadFile(dir + "/rank_2.json"));
  EXPECT_EQ(written, failures[2]->record);
  EXPECT_FALSE(ReadFile(dir + "/rank_0.json").ok());  // rank 0 dumps its own
  EXPECT_FALSE(ReadFile(dir + "/rank_1.json").ok());

  std::vector<FlightRecord> in_memory;
  EXPECT_EQ(KeepRecords(failures, "", {0}, in_memory), "");
  EXPECT_EQ(in_memory.size(), 2u);
  EXPECT_THAT(KeepRecords(failures, dir + "/missing/deeper", {0}, in_memory),
              ::testing::StartsWith("0 (disk full), 2 ("));
}

}  // namespace
}  // namespace jitpipe::rank_report_test
