#include "planning/pytorch_memory.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"
#include "scheduler/passes/add_wait_send.h"
#include "scheduler/passes/lower.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::pytorch_memory_test {
namespace {

// Every activation and gradient the same size: pool slots are the unit of
// PyTorch's review (pt #196465, 2026-09-16).
Model Uniform() {
  Model m;
  m.defaults.input_bytes = 1 << 20;
  m.defaults.output_bytes = 1 << 20;
  m.defaults.stash_bytes = 4 << 20;
  return m;
}

absl::StatusOr<Schedule> Interleaved(int microbatches, RecvPlacement recv) {
  absl::StatusOr<Schedule> compute = Generate({"interleaved-1f1b", 4, microbatches, 4});
  if (!compute.ok()) return compute.status();
  return Lower(*compute, {.recv = recv, .fsdp = true, .reduce_grad = true});
}

// The review's table: Interleaved1F1B, pp 4, v 4, lowered as PyTorch lowers
// it, receive lifetimes from RECV to the last consumer. Per rank A 22, 30,
// 28, 32 (forward 16, 24, 24, 20; backward 6, 6, 4, 12), B 14, 20, 17, 18,
// C 14, 20, 17, 16: sums 112, 69, 67, whatever the number of microbatches.
TEST(PyTorchMemoryTest, ReceivePoolsMatchTheReviewersCounts) {
  for (int m : {8, 16, 32}) {
    SCOPED_TRACE(m);
    ASSERT_OK_AND_ASSIGN(Schedule lowered, Interleaved(m, RecvPlacement::kEarly));
    ASSERT_OK_AND_ASSIGN(PyTorchMemory memory, PlanPyTorchMemory(lowered, Uniform()));
    std::vector<int> a, a_forward, b, b_forward, b_backward, c;
    int sum_a = 0, sum_b = 0, sum_c = 0;
    for (const PyTorchMemoryRank& r : memory.ranks) {
      a.push_back(r.pools.stage_direction.slots);
      int forward = 0;
      for (const StagePool& p : r.pools.per_stage) {
        if (p.direction == RecvDirection::kForward) forward += p.size.slots;
      }
      a_forward.push_back(forward);
      b.push_back(r.pools.direction.slots);
      b_forward.push_back(r.pools.forward.slots);
      b_backward.push_back(r.pools.backward.slots);
      c.push_back(r.pools.rank_pool.slots);
      sum_a += a.back();
      sum_b += b.back();
      sum_c += c.back();
    }
    EXPECT_EQ(a, (std::vector<int>{22, 30, 28, 32}));
    EXPECT_EQ(a_forward, (std::vector<int>{16, 24, 24, 20}));
    EXPECT_EQ(b, (std::vector<int>{14, 20, 17, 18}));
    EXPECT_EQ(b_forward, (std::vector<int>{12, 18, 16, 14}));
    EXPECT_EQ(b_backward, (std::vector<int>{2, 2, 1, 4}));
    EXPECT_EQ(c, (std::vector<int>{14, 20, 17, 16}));
    EXPECT_EQ(sum_a, 112);
    EXPECT_EQ(sum_b, 69);
    EXPECT_EQ(sum_c, 67);
  }
}

// jitpipe's arena for the receive buffers, with receives placed just in
// time (its default lowering), needs fewer bytes on every rank than the
// best of PyTorch's pools for its own lowering; for the same lowering the
// arena never needs more than the best pool.
TEST(PyTorchMemoryTest, TheJitArenaNeedsFewerBytesThanTheBestPool) {
  ASSERT_OK_AND_ASSIGN(Schedule early, Interleaved(8, RecvPlacement::kEarly));
  ASSERT_OK_AND_ASSIGN(Schedule jit, Interleaved(8, RecvPlacement::kJit));
  ASSERT_OK_AND_ASSIGN(PyTorchMemory pytorch, PlanPyTorchMemory(early, Uniform()));
  ASSERT_OK_AND_ASSIGN(PyTorchMemory ours, PlanPyTorchMemory(jit, Uniform()));
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(r);
    const RecvPools& p = pytorch.ranks[r].pools;
    EXPECT_LE(p.arena_bytes, p.best_pool_bytes());
    EXPECT_LT(ours.ranks[r].pools.arena_bytes, p.best_pool_bytes());
  }
}

// Send release: holding sent buffers to the step end costs the most, the
// budget's waits and _add_wait_send's sit between, polling (free once sent)
// the least. Budget 1 cannot be kept with just-in-time receives on this
// schedule: the smallest that can is used.
TEST(PyTorchMemoryTest, PeaksBySendRelease) {
  ASSERT_OK_AND_ASSIGN(Schedule jit, Interleaved(8, RecvPlacement::kJit));
  ASSERT_OK_AND_ASSIGN(PyTorchMemory m, PlanPyTorchMemory(jit, Uniform(), {.send_budget = 1}));
  EXPECT_EQ(m.send_budget, 2);
  EXPECT_EQ(m.budget_error, "");
  EXPECT_EQ(m.wait_send_error, "");
  for (const PyTorchMemoryRank& r : m.ranks) {
    SCOPED_TRACE(r.rank);
    ASSERT_TRUE(r.peaks.wait_send.has_value());
    ASSERT_TRUE(r.peaks.budget.has_value());
    EXPECT_LE(r.peaks.poll, *r.peaks.budget);
    EXPECT_LE(*r.peaks.budget, r.peaks.drain);
    EXPECT_LE(r.peaks.poll, *r.peaks.wait_send);
    EXPECT_LE(*r.peaks.wait_send, r.peaks.drain);
  }
  // Somewhere the difference shows.
  EXPECT_LT(m.ranks[0].peaks.poll, m.ranks[0].peaks.drain);
  ASSERT_OK_AND_ASSIGN(Schedule rendezvous, Interleaved(8, RecvPlacement::kJitRendezvous));
  ASSERT_OK_AND_ASSIGN(PyTorchMemory kept, PlanPyTorchMemory(rendezvous, Uniform()));
  EXPECT_EQ(kept.send_budget, 1);
}

// The report places WAIT_SENDs itself: a program that has them already is
// reported as the same program without them (its own waits dropped first;
// a program without any is used as it is, not copied).
TEST(PyTorchMemoryTest, AProgramWithWaitSendsIsReportedAsWithoutThem) {
  ASSERT_OK_AND_ASSIGN(Schedule jit, Interleaved(8, RecvPlacement::kJit));
  ASSERT_OK_AND_ASSIGN(Schedule waited, AddWaitSend(jit));
  ASSERT_GT(waited.TotalActions(), jit.TotalActions());
  ASSERT_OK_AND_ASSIGN(PyTorchMemory plain, PlanPyTorchMemory(jit, Uniform()));
  ASSERT_OK_AND_ASSIGN(PyTorchMemory with_waits, PlanPyTorchMemory(waited, Uniform()));
  EXPECT_EQ(with_waits.send_budget, plain.send_budget);
  EXPECT_EQ(with_waits.budget_error, plain.budget_error);
  EXPECT_EQ(with_waits.wait_send_error, plain.wait_send_error);
  ASSERT_EQ(with_waits.ranks.size(), plain.ranks.size());
  for (size_t r = 0; r < plain.ranks.size(); ++r) {
    SCOPED_TRACE(r);
    EXPECT_EQ(with_waits.ranks[r].pools.ToString(), plain.ranks[r].pools.ToString());
    EXPECT_EQ(with_waits.ranks[r].peaks.poll, plain.ranks[r].peaks.poll);
    EXPECT_EQ(with_waits.ranks[r].peaks.drain, plain.ranks[r].peaks.drain);
    EXPECT_EQ(with_waits.ranks[r].peaks.wait_send, plain.ranks[r].peaks.wait_send);
    EXPECT_EQ(with_waits.ranks[r].peaks.budget, plain.ranks[r].peaks.budget);
  }
}

}  // namespace
}  // namespace jitpipe::pytorch_memory_test
