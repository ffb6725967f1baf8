#include "tests/testing/rank_failure_printer.h"

#include <cstdio>

#include "gtest/gtest.h"

namespace jitpipe::testing {
namespace {

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

void PrintOnlyFailuresOnRank(int rank) {
  if (rank <= 0) return;
  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new RankFailurePrinter(rank));
}

}  // namespace jitpipe::testing
