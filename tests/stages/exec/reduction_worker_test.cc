#include "stages/exec/reduction_worker.h"

#include <chrono>
#include <thread>
#include <vector>

#include "comm/inproc/inproc_world.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::reduction_worker_test {
namespace {

using ::jitpipe::testing::Message;
using ::testing::HasSubstr;

const auto kOrigin = std::chrono::steady_clock::now();

OpInfo Info(int stage, int index) {
  return OpInfo{stage, -1, index, std::to_string(stage) + "REDUCE_GRAD"};
}

// Two ranks, each reducing two stages' gradients on its worker; the
// compute thread (here: the test) goes on and waits at the end.
TEST(ReductionWorkerTest, AllReducesInTheBackground) {
  std::unique_ptr<InProcessWorld> world = CreateInProcessWorld(2);
  std::vector<std::vector<float>> grads = {{1, 2, 3}, {10, 20, 30}};
  std::vector<std::vector<float>> more = {{5}, {7}};
  auto run = [&](int rank) {
    ReductionWorker worker(&world->transport(rank), Group{{0, 1}}, ReduceKind::kAllReduce,
                           absl::Seconds(10), kOrigin);
    worker.Start(absl::MakeSpan(grads[rank]), Info(rank, 4));
    worker.Start(absl::MakeSpan(more[rank]), Info(rank + 2, 9));
    EXPECT_OK(worker.WaitAll(absl::Seconds(10)));
    std::vector<ReductionSpan> spans = worker.TakeSpans();
    ASSERT_EQ(spans.size(), 2u);
    EXPECT_EQ(spans[0].index, 4);
    EXPECT_EQ(spans[1].index, 9);
    EXPECT_LE(spans[0].start_us, spans[0].end_us);
    EXPECT_TRUE(worker.TakeSpans().empty());
  };
  std::thread other(run, 1);
  run(0);
  other.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(grads[r], (std::vector<float>{11, 22, 33}));
    EXPECT_EQ(more[r], (std::vector<float>{12}));
  }
}

// Tickets name reductions in start order: WaitFor(k) returns once the k-th
// has ended (a WAIT_REDUCE_GRAD), Ended(k) says so without blocking.
TEST(ReductionWorkerTest, WaitsForOneReductionByItsTicket) {
  std::unique_ptr<InProcessWorld> world = CreateInProcessWorld(2);
  std::vector<std::vector<float>> grads = {{1}, {2}};
  std::vector<std::vector<float>> more = {{3}, {4}};
  auto run = [&](int rank) {
    ReductionWorker worker(&world->transport(rank), Group{{0, 1}}, ReduceKind::kAllReduce,
                           absl::Seconds(10), kOrigin);
    const int64_t first = worker.Start(absl::MakeSpan(grads[rank]), Info(rank, 4));
    const int64_t second = worker.Start(absl::MakeSpan(more[rank]), Info(rank + 2, 9));
    EXPECT_EQ(first, 0);
    EXPECT_EQ(second, 1);
    EXPECT_OK(worker.WaitFor(first, absl::Seconds(10)));
    EXPECT_TRUE(worker.Ended(first));
    EXPECT_EQ(grads[rank], (std::vector<float>{3}));
    EXPECT_OK(worker.WaitAll(absl::Seconds(10)));
    EXPECT_TRUE(worker.Ended(second));
  };
  std::thread other(run, 1);
  run(0);
  other.join();
}

// A peer that never joins: WaitFor times out, naming nothing it cannot know.
TEST(ReductionWorkerTest, WaitForTimesOut) {
  std::unique_ptr<InProcessWorld> world = CreateInProcessWorld(2);
  std::vector<float> grads = {1, 2};
  ReductionWorker worker(&world->transport(0), Group{{0, 1}}, ReduceKind::kAllReduce,
                         absl::Milliseconds(200), kOrigin);
  const int64_t ticket = worker.Start(absl::MakeSpan(grads), Info(0, 3));
  EXPECT_FALSE(worker.Ended(ticket));
  absl::Status status = worker.WaitFor(ticket, absl::Milliseconds(20));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Message(status), "timed out after 20ms waiting for a gradient reduction");
  world->Abort(0, "the test ends");
}

// Member i keeps shard i of the sum in place; the odd tail is left alone.
TEST(ReductionWorkerTest, ReduceScatterLeavesEachMembersShardInPlace) {
  std::unique_ptr<InProcessWorld> world = CreateInProcessWorld(2);
  std::vector<std::vector<float>> grads = {{1, 2, 3, 4, 5}, {10, 20, 30, 40, 50}};
  auto run = [&](int rank) {
    ReductionWorker worker(&world->transport(rank), Group{{0, 1}}, ReduceKind::kReduceScatter,
                           absl::Seconds(10), kOrigin);
    worker.Start(absl::MakeSpan(grads[rank]), Info(0, 1));
    EXPECT_OK(worker.WaitAll(absl::Seconds(10)));
  };
  std::thread other(run, 1);
  run(0);
  other.join();
  EXPECT_EQ(grads[0], (std::vector<float>{11, 22, 3, 4, 5}));
  EXPECT_EQ(grads[1], (std::vector<float>{10, 20, 33, 44, 50}));
}

// The peer never joins: the worker's wait times out and WaitAll reports it
// with the action; a later reduction of the same step is skipped.
TEST(ReductionWorkerTest, ReportsAReductionThatNeverCompletes) {
  std::unique_ptr<InProcessWorld> world = CreateInProcessWorld(2);
  std::vector<float> grads = {1, 2};
  ReductionWorker worker(&world->transport(0), Group{{0, 1}}, ReduceKind::kAllReduce,
                         absl::Milliseconds(50), kOrigin);
  worker.Start(absl::MakeSpan(grads), Info(0, 3));
  worker.Start(absl::MakeSpan(grads), Info(2, 8));
  absl::Status status = worker.WaitAll(absl::Seconds(10));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(Message(status), HasSubstr("0REDUCE_GRAD: timed out after 50ms waiting for "
                                         "all-reduce 0REDUCE_GRAD over 2 ranks (index 3)"));
  EXPECT_EQ(worker.TakeSpans().size(), 1u);  // the second one never ran
  EXPECT_OK(worker.WaitAll(absl::Seconds(1)));  // reusable for the next step
}

TEST(ReductionWorkerTest, WaitAllIsBoundedByItsOwnTimeout) {
  std::unique_ptr<InProcessWorld> world = CreateInProcessWorld(2);
  std::vector<float> grads = {1};
  ReductionWorker worker(&world->transport(0), Group{{0, 1}}, ReduceKind::kAllReduce,
                         absl::Seconds(1), kOrigin);
  worker.Start(absl::MakeSpan(grads), Info(1, 5));
  absl::Status status = worker.WaitAll(absl::Milliseconds(20));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  // Whether the worker thread has taken the reduction up within the 20 ms
  // depends on the machine's load; the message names it either way.
  EXPECT_THAT(Message(status),
              ::testing::AnyOf("timed out after 20ms waiting for 1 gradient reduction(s); the "
                               "first is 1REDUCE_GRAD (in progress)",
                               "timed out after 20ms waiting for 1 gradient reduction(s); the "
                               "first is 1REDUCE_GRAD (not started)"));
  world->transport(1).Abort("test over");  // the worker's wait ends at once
}

TEST(ReductionWorkerTest, AnAbortedWorldFailsTheReduction) {
  std::unique_ptr<InProcessWorld> world = CreateInProcessWorld(2);
  std::vector<float> grads = {1};
  ReductionWorker worker(&world->transport(0), Group{{0, 1}}, ReduceKind::kAllReduce,
                         absl::Seconds(30), kOrigin);
  world->transport(1).Abort("stage 3 failed");
  worker.Start(absl::MakeSpan(grads), Info(0, 2));
  absl::Status status = worker.WaitAll(absl::Seconds(30));
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(Message(status), "0REDUCE_GRAD: rank 1 failed: stage 3 failed");
}

}  // namespace
}  // namespace jitpipe::reduction_worker_test
