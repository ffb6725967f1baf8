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
#include "tests/testing/status_matchers.h"

namespace jitpipe::rank_executable_test {
namespace {

void ExpectSameTransfers(const std::vector<Transfer>& a, const std::vector<Transfer>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    SCOPED_TRACE(::testing::Message() << "transfer " << k);
    EXPECT_EQ(a[k].kind, b[k].kind);
    EXPECT_EQ(a[k].stage, b[k].stage);
    EXPECT_EQ(a[k].microbatch, b[k].microbatch);
    EXPECT_EQ(a[k].src_rank, b[k].src_rank);
    EXPECT_EQ(a[k].dst_rank, b[k].dst_rank);
    EXPECT_EQ(a[k].send_index, b[k].send_index);
    EXPECT_EQ(a[k].recv_index, b[k].recv_index);
    EXPECT_EQ(a[k].bytes, b[k].bytes);
    EXPECT_EQ(a[k].tag, b[k].tag);
  }
}

void ExpectSameRank(const RankExecutable& a, const RankExecutable& b) {
  EXPECT_EQ(a.rank, b.rank);
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "step " << i);
    const ExecStep &x = a.steps[i], &y = b.steps[i];
    EXPECT_EQ(x.index, y.index);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.stage, y.stage);
    EXPECT_EQ(x.microbatch, y.microbatch);
    EXPECT_EQ(x.cost_us, y.cost_us);
    EXPECT_EQ(x.transfer, y.transfer);
    EXPECT_EQ(x.buffer, y.buffer);
    EXPECT_EQ(x.parts_begin, y.parts_begin);
    EXPECT_EQ(x.parts_end, y.parts_end);
  }
  ASSERT_EQ(a.parts.size(), b.parts.size());
  for (size_t k = 0; k < a.parts.size(); ++k) {
    SCOPED_TRACE(::testing::Message() << "part " << k);
    const ExecPart &x = a.parts[k], &y = b.parts[k];
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.stage, y.stage);
    EXPECT_EQ(x.microbatch, y.microbatch);
    EXPECT_EQ(x.cost_us, y.cost_us);
    EXPECT_EQ(x.consumes, y.consumes);
    EXPECT_EQ(x.buffers.input, y.buffers.input);
    EXPECT_EQ(x.buffers.stash, y.buffers.stash);
    EXPECT_EQ(x.buffers.output, y.buffers.output);
    EXPECT_EQ(x.buffers.output_grad, y.buffers.output_grad);
    EXPECT_EQ(x.buffers.input_grad, y.buffers.input_grad);
    EXPECT_EQ(x.buffers.param_grad, y.buffers.param_grad);
  }
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
  Model model;
  model.defaults.forward_us = 1;
  model.defaults.backward_input_us = 2;
  model.defaults.backward_weight_us = 1;
  model.defaults.input_bytes = 100;
  model.defaults.output_bytes = 100;
  model.defaults.stash_bytes = 300;
  model.defaults.param_bytes = 1000;
  std::vector<RankBuffers> buffers;
  for (int r = 0; r < lowered.pp; ++r) {
    ASSERT_OK_AND_ASSIGN(RankBuffers b,
                         ComputeBufferLifetimes(lowered, model, r, {.policy = c.policy}));
    buffers.push_back(std::move(b));
  }
  ASSERT_OK_AND_ASSIGN(Executable kept, BuildExecutable(lowered, model, buffers));
  std::vector<RankBuffers> handed = buffers;
  ASSERT_OK_AND_ASSIGN(Executable released, BuildExecutable(lowered, model, std::move(handed)));
  ExpectSameTransfers(kept.transfers, released.transfers);
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
