#include "base/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace jitpipe::parallel_for_test {
namespace {

struct Case {
  int n;
  int threads;
};

class ParallelForTest : public ::testing::TestWithParam<Case> {};

TEST_P(ParallelForTest, CallsEveryIndexExactlyOnce) {
  const Case c = GetParam();
  std::vector<std::atomic<int>> calls(static_cast<size_t>(std::max(c.n, 0)));
  ParallelFor(c.n, c.threads, [&](int i) { calls[i].fetch_add(1); });
  for (int i = 0; i < c.n; ++i) EXPECT_EQ(calls[i].load(), 1) << "index " << i;
}

TEST_P(ParallelForTest, UsesNoMoreThreadsThanAskedOrIndices) {
  const Case c = GetParam();
  absl::Mutex mu;
  std::vector<std::thread::id> seen;
  ParallelFor(c.n, c.threads, [&](int) {
    absl::MutexLock lock(&mu);
    if (std::find(seen.begin(), seen.end(), std::this_thread::get_id()) == seen.end()) {
      seen.push_back(std::this_thread::get_id());
    }
  });
  const int limit = c.threads > 0 ? c.threads : DefaultThreads();
  EXPECT_LE(static_cast<int>(seen.size()), std::max(0, std::min(limit, c.n)));
  if (c.n > 0) {
    EXPECT_GE(seen.size(), 1u);
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, ParallelForTest,
                         ::testing::Values(Case{0, 4}, Case{-3, 2}, Case{1, 1}, Case{1, 8},
                                           Case{5, 0}, Case{5, 2}, Case{1000, 3},
                                           Case{1000, 1}, Case{64, 200}),
                         [](const ::testing::TestParamInfo<Case>& param) {
                           const Case& c = param.param;
                           return (c.n < 0 ? "negative" : "n" + std::to_string(c.n)) +
                                  "_threads" + std::to_string(c.threads);
                         });

// Several threads at once: each call waits (up to 30 s) until both are
// inside, so the peak is 2 only if ParallelFor runs them side by side.
TEST(ParallelForConcurrencyTest, RunsCallsSideBySide) {
  absl::Mutex mu;
  int inside = 0, peak = 0;
  ParallelFor(2, 2, [&](int) {
    absl::MutexLock lock(&mu);
    peak = std::max(peak, ++inside);
    mu.AwaitWithTimeout(absl::Condition(
                            +[](int* n) { return *n >= 2; }, &inside),
                        absl::Seconds(30));
  });
  EXPECT_EQ(peak, 2);
}

TEST(ParallelForConcurrencyTest, DefaultThreadsIsAtLeastOne) { EXPECT_GE(DefaultThreads(), 1); }

TEST(ParallelMapTest, KeepsIndexOrder) {
  for (int threads : {1, 3, 8}) {
    absl::StatusOr<std::vector<int>> squares =
        ParallelMap<int>(50, threads, [](int i) -> absl::StatusOr<int> { return i * i; });
    ASSERT_TRUE(squares.ok()) << squares.status();
    ASSERT_EQ(squares->size(), 50u);
    for (int i = 0; i < 50; ++i) EXPECT_EQ((*squares)[i], i * i);
  }
  absl::StatusOr<std::vector<int>> none =
      ParallelMap<int>(0, 2, [](int) -> absl::StatusOr<int> { return 1; });
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// Whichever thread fails first in time, the error is the lowest index's,
// as a loop in index order would return it; every call still runs.
TEST(ParallelMapTest, ReturnsTheLowestFailingIndexsError) {
  for (int threads : {1, 2, 4}) {
    std::atomic<int> calls{0};
    absl::StatusOr<std::vector<int>> out =
        ParallelMap<int>(40, threads, [&](int i) -> absl::StatusOr<int> {
          ++calls;
          if (i % 7 == 3) return absl::InvalidArgumentError(absl::StrCat("index ", i));
          return i;
        });
    EXPECT_EQ(calls.load(), 40);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().message(), "index 3");
  }
}

}  // namespace
}  // namespace jitpipe::parallel_for_test
