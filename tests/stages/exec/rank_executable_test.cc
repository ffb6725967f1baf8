// BuildExecutable's two forms: over buffers the caller keeps, and over
// buffers it hands over, released rank by rank as the executable is built.
#include "stages/exec/rank_executable.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "memory/buffer_lifetimes.h"
#include "scheduler/generators/generate.h"
#include "scheduler/passes/lower.h"
#include "tests/testing/skewed_model.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::rank_executable_test {
namespace {

// Element by element, naming the first elements that differ.
template <typename T>
void ExpectSameElements(const std::vector<T>& a, const std::vector<T>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(a[k] == b[k]) << what << " " << k;
}

void ExpectSameRank(const RankExecutable& a, const RankExecutable& b) {
  EXPECT_EQ(a.rank, b.rank);
  ExpectSameElements(a.steps, b.steps, "step");
  ExpectSameElements(a.parts, b.parts, "part");
  EXPECT_EQ(a.memory.ids, b.memory.ids);
  EXPECT_EQ(a.memory.offsets, b.memory.offsets);
  EXPECT_EQ(a.memory.at_start, b.memory.at_start);
  EXPECT_EQ(a.memory.at_end, b.memory.at_end);
  EXPECT_EQ(a.buffer_bytes, b.buffer_bytes);
  EXPECT_EQ(a.buffer_category, b.buffer_category);
}

struct Case {
  std::string schedule;
  int pp;
  int microbatches;
  int stages_per_rank;
  MemoryPolicy policy;
};

class HandedOverBuffersTest : public ::testing::TestWithParam<Case> {};

// Handing the buffers over changes nothing in the executable, and leaves
// every rank's buffers released.
TEST_P(HandedOverBuffersTest, BuildTheSameExecutableAndAreReleased) {
  const Case& c = GetParam();
  ASSERT_OK_AND_ASSIGN(Schedule generated, Generate({.schedule = c.schedule,
                                                     .pp = c.pp,
                                                     .microbatches = c.microbatches,
                                                     .stages_per_rank = c.stages_per_rank}));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(generated));
  // Sizes that differ from stage to stage, and times.
  Model model = testing::SkewedModel(lowered.num_stages());
  model.defaults.forward_us = 1;
  model.defaults.backward_input_us = 2;
  model.defaults.backward_weight_us = 1;
  std::vector<RankBuffers> buffers;
  for (int r = 0; r < lowered.pp; ++r) {
    ASSERT_OK_AND_ASSIGN(RankBuffers b,
                         ComputeBufferLifetimes(lowered, model, r, {.policy = c.policy}));
    buffers.push_back(std::move(b));
  }
  ASSERT_OK_AND_ASSIGN(Executable kept, BuildExecutable(lowered, model, buffers));
  std::vector<RankBuffers> handed = buffers;
  ASSERT_OK_AND_ASSIGN(Executable released, BuildExecutable(lowered, model, std::move(handed)));
  ExpectSameElements(kept.transfers, released.transfers, "transfer");
  ASSERT_EQ(kept.ranks.size(), released.ranks.size());
  for (size_t r = 0; r < kept.ranks.size(); ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    ExpectSameRank(kept.ranks[r], released.ranks[r]);
  }
  ASSERT_EQ(handed.size(), buffers.size());  // NOLINT(bugprone-use-after-move): the contract
  for (const RankBuffers& b : handed) EXPECT_TRUE(b.buffers.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, HandedOverBuffersTest,
    ::testing::Values(Case{"1f1b", 4, 8, 1, MemoryPolicy::kJit},
                      Case{"interleaved-1f1b", 4, 8, 2, MemoryPolicy::kJit},
                      Case{"interleaved-1f1b", 4, 8, 2, MemoryPolicy::kEager},
                      Case{"zbv", 4, 8, 2, MemoryPolicy::kJit},
                      Case{"dualpipev", 4, 8, 2, MemoryPolicy::kJit}),
    [](const ::testing::TestParamInfo<Case>& param_info) {
      std::string name = param_info.param.schedule + "_" +
                         (param_info.param.policy == MemoryPolicy::kJit ? "jit" : "eager");
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

// A program that is not lowered is refused before anything is released.
TEST(BuildExecutableTest, AnUnloweredProgramIsRefusedBeforeAnyBufferIsTaken) {
  ASSERT_OK_AND_ASSIGN(Schedule generated,
                       Generate({.schedule = "1f1b", .pp = 2, .microbatches = 2}));
  std::vector<RankBuffers> buffers(2);
  EXPECT_EQ(BuildExecutable(generated, Model{}, std::move(buffers)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace jitpipe::rank_executable_test
