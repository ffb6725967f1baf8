// PlanPyTorchMemory computes its two WAIT_SEND placements and its ranks side
// by side; the result must not depend on how many threads do it (and under
// ThreadSanitizer, this suite's "threads" label, the threads must not race).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"
#include "scheduler/passes/lower.h"
#include "planning/pytorch_memory.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::pytorch_memory_parallel_test {
namespace {

// Every field of the report, as text.
std::string Report(const PyTorchMemory& m) {
  std::string out = absl::StrCat("budget ", m.send_budget, " [", m.wait_send_error, "] [",
                                 m.budget_error, "]\n");
  for (const PyTorchMemoryRank& r : m.ranks) {
    absl::StrAppend(&out, r.rank, ": ", r.pools.ToString(), "; drain ", r.peaks.drain, " poll ",
                    r.peaks.poll, " wait-send ", r.peaks.wait_send.value_or(-1), " budget ",
                    r.peaks.budget.value_or(-1), "\n");
  }
  return out;
}

TEST(PyTorchMemoryParallelTest, TheSameOnAnyNumberOfThreads) {
  Model model;
  model.defaults.input_bytes = 1 << 20;
  model.defaults.output_bytes = 3 << 20;
  model.defaults.stash_bytes = 4 << 20;
  struct Case {
    GenerateOptions spec;
    RecvPlacement recv;
  };
  for (const Case& c : std::vector<Case>{{{"interleaved-1f1b", 4, 8, 2}, RecvPlacement::kEarly},
                                         {{"interleaved-1f1b", 4, 8, 2}, RecvPlacement::kJit},
                                         {{"zbv", 4, 8, 2}, RecvPlacement::kJit},
                                         {{"1f1b", 6, 12, 1}, RecvPlacement::kJitRendezvous}}) {
    SCOPED_TRACE(absl::StrCat(c.spec.schedule, " pp ", c.spec.pp));
    ASSERT_OK_AND_ASSIGN(Schedule compute, Generate(c.spec));
    ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(compute, {.recv = c.recv, .fsdp = true}));
    ASSERT_OK_AND_ASSIGN(PyTorchMemory one, PlanPyTorchMemory(lowered, model, {.threads = 1}));
    ASSERT_EQ(one.ranks.size(), static_cast<size_t>(lowered.pp));
    for (int threads : {2, 5}) {
      ASSERT_OK_AND_ASSIGN(PyTorchMemory many,
                           PlanPyTorchMemory(lowered, model, {.threads = threads}));
      EXPECT_EQ(Report(many), Report(one)) << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace jitpipe::pytorch_memory_parallel_test
