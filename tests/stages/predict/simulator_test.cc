#include "stages/predict/simulator.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "memory/buffer_lifetimes.h"
#include "scheduler/ir/schedule_csv.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::simulator_test {
namespace {

using ::jitpipe::testing::CsvFromJson;
using ::jitpipe::testing::ReadTestdataJson;

Model UnitModel(int64_t stash_bytes = 0) {
  Model m;
  m.defaults.forward_us = 1;
  m.defaults.backward_input_us = 1;
  m.defaults.backward_weight_us = 1;
  m.defaults.stash_bytes = stash_bytes;
  return m;
}

absl::StatusOr<SimulationResult> SimulateLowered(const Schedule& s, const Model& model,
                                                 bool timeline = false) {
  std::vector<RankBuffers> buffers;
  for (int r = 0; r < s.pp; ++r) {
    auto b = ComputeBufferLifetimes(s, model, r, LifetimeOptions{});
    if (!b.ok()) return b.status();
    buffers.push_back(*std::move(b));
  }
  auto exe = BuildExecutable(s, model, buffers);
  if (!exe.ok()) return exe.status();
  return Simulate(s, *exe, model, SimulationOptions{.record_timeline = timeline});
}

// PyTorch's 1F1B runtime order, lowered by PyTorch: the anchors' unit-cost
// makespan 33 = (m + p - 1)(F + B) for p = 4, m = 8.
TEST(SimulatorTest, OneFOneBMakespanMatchesTheory) {
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/1F1B_pp4_mb8_v1.json");
  ASSERT_OK_AND_ASSIGN(Schedule s,
                       ParseScheduleCsv(CsvFromJson(d["ranks_runtime_equivalent_send_recv"])));
  ASSERT_OK_AND_ASSIGN(SimulationResult r, SimulateLowered(s, UnitModel(1)));
  EXPECT_EQ(r.makespan_us, 33);
  ASSERT_EQ(r.ranks.size(), 4u);
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(r.ranks[rank].busy_us, 24);
  EXPECT_EQ(r.ranks[0].span_us, 33);
  EXPECT_EQ(r.ranks[3].span_us, 24);
  EXPECT_NEAR(r.bubble_fraction, 9.0 / 33, 1e-12);
  EXPECT_EQ(r.exposed_reduce_us, 0);
  // Free communication: every send completes at once, so the stash peak is
  // the program-order plan's: 4, 3, 2, 1 microbatches in flight.
  EXPECT_EQ(r.ranks[0].peak_bytes, 4);
  EXPECT_EQ(r.ranks[3].peak_bytes, 1);
}

TEST(SimulatorTest, GPipeMakespanIsMPlusPMinusOneTimesFPlusB) {
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/GPipe_pp4_mb8_v1.json");
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(CsvFromJson(d["ranks_send_recv_only"])));
  ASSERT_OK_AND_ASSIGN(SimulationResult r, SimulateLowered(s, UnitModel()));
  EXPECT_EQ(r.makespan_us, (8 + 4 - 1) * 3);
}

TEST(SimulatorTest, LatencyDelaysEveryHop) {
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/GPipe_pp2_mb1_v1.json");
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(CsvFromJson(d["ranks_send_recv_only"])));
  Model m = UnitModel();
  m.p2p.latency_us = 10;
  ASSERT_OK_AND_ASSIGN(SimulationResult r, SimulateLowered(s, m, /*timeline=*/true));
  // F0 on rank 0 [0,1], hop 10, F0 on rank 1 [11,12], B0 [12,14], hop 10, B0 on rank 0 [24,26].
  EXPECT_EQ(r.makespan_us, 26);
  EXPECT_FALSE(r.timeline.spans.empty());
}

// GPipe pp 2, one microbatch, 100-byte outputs (and output gradients). Rank
// 0 sends its output at t = 1; with 10 us of latency the transfer completes
// at 11, so the output is still live when the output gradient's receive
// buffer comes at t = 1: 200 bytes. With free transfers the output is gone
// at t = 1 first (frees before allocations at one time): 100 bytes.
TEST(SimulatorTest, SentOutputsLiveUntilTheirTransferCompletes) {
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/GPipe_pp2_mb1_v1.json");
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(CsvFromJson(d["ranks_send_recv_only"])));
  Model m = UnitModel();
  m.defaults.output_bytes = 100;
  ASSERT_OK_AND_ASSIGN(SimulationResult free_comm, SimulateLowered(s, m));
  EXPECT_EQ(free_comm.ranks[0].peak_bytes, 100);
  m.p2p.latency_us = 10;
  ASSERT_OK_AND_ASSIGN(SimulationResult slow, SimulateLowered(s, m, /*timeline=*/true));
  EXPECT_EQ(slow.ranks[0].peak_bytes, 200);
  std::vector<std::pair<double, int64_t>> rank0;  // (time, activation bytes)
  for (const MemorySample& sample : slow.timeline.memory) {
    if (sample.rank == 0) {
      rank0.push_back(
          {sample.time_us, sample.bytes[static_cast<int>(MemoryCategory::kActivations)]});
    }
  }
  EXPECT_EQ(rank0, (std::vector<std::pair<double, int64_t>>{{0, 100}, {1, 100}, {11, 0},
                                                              {24, 0}, {26, 0}}));
}

// The reduction of a stage starts once its last W (or B) has run and the
// reduction stream is free; no compute waits for it, only the step's end.
TEST(SimulatorTest, ReductionsRunBesideComputeAndEndTheStep) {
  // 1F1B pp 4, m 8, lowered by PyTorch, each rank's REDUCE_GRAD appended.
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/1F1B_pp4_mb8_v1.json");
  ASSERT_OK_AND_ASSIGN(Schedule lowered, ParseScheduleCsv(CsvFromJson(
                                             d["ranks_runtime_equivalent_send_recv"])));
  for (int r = 0; r < 4; ++r) {
    lowered.ranks[r].push_back(Action::StageWide(ActionKind::kReduceGrad, r));
  }
  Model m = UnitModel();
  m.dp.size = 2;
  m.dp.link.gb_per_s = 1;         // 1000 bytes per us
  m.defaults.param_bytes = 5000;  // 5 us per stage
  ASSERT_OK_AND_ASSIGN(SimulationResult res, SimulateLowered(lowered, m));
  // Rank 0 ends its compute last, at 33; its reduction runs [33, 38].
  EXPECT_DOUBLE_EQ(res.makespan_us, 38);
  EXPECT_DOUBLE_EQ(res.exposed_reduce_us, 5);
  EXPECT_DOUBLE_EQ(res.ranks[3].end_us, 24 + 3 + 5);  // rank 3: compute [3, 27]
  EXPECT_DOUBLE_EQ(res.total_reduce_us, 20);
  EXPECT_DOUBLE_EQ(res.max_rank_reduce_us, 5);
}

// A WAIT_SEND holds its rank until the transfer it waits for has ended,
// and the buffer sent is freed then. The example above with a wait after
// the send: rank 0 waits for its output's transfer [1, 11], so its RECV_B0
// is posted at 11, when the output is gone: 100 bytes at most.
TEST(SimulatorTest, AWaitSendHoldsTheRankUntilTheTransferEnds) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv("0F0,0SEND_F0,0WAIT_SEND_F0,0RECV_B0,0B0\n"
                                                    "1RECV_F0,1F0,1B0,1SEND_B0\n"));
  Model m = UnitModel();
  m.defaults.output_bytes = 100;
  m.p2p.latency_us = 10;
  ASSERT_OK_AND_ASSIGN(SimulationResult r, SimulateLowered(s, m, /*timeline=*/true));
  EXPECT_EQ(r.makespan_us, 26);
  EXPECT_EQ(r.ranks[0].peak_bytes, 100);
  bool found = false;
  for (const TimelineSpan& span : r.timeline.spans) {
    if (span.rank == 0 && span.track == TimelineTrack::kRecv) {
      EXPECT_EQ(span.start_us, 11);
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

// A WAIT_REDUCE_GRAD makes the compute after it wait for a reduction: one
// rank, two stages, 5 us per reduction. 0F0 [0,1], 1F0 [1,2], 1B0 [2,4],
// stage 1 reduced [4,9]; the wait holds 0B0 to [9,11], stage 0 reduced
// [11,16]. With free reductions the step ends at 6: 10 us exposed. Without
// the wait 0B0 runs [4,6], the reductions [4,9] and [9,14]: 8 us exposed.
TEST(SimulatorTest, AWaitReduceGradHoldsTheComputeAfterIt) {
  Model m = UnitModel();
  m.dp.size = 2;
  m.dp.link.gb_per_s = 1;
  m.defaults.param_bytes = 5000;
  ASSERT_OK_AND_ASSIGN(
      Schedule waits,
      ParseScheduleCsv("0F0,1F0,1B0,1REDUCE_GRAD,1WAIT_REDUCE_GRAD,0B0,0REDUCE_GRAD\n"));
  ASSERT_OK_AND_ASSIGN(SimulationResult r, SimulateLowered(waits, m));
  EXPECT_DOUBLE_EQ(r.makespan_us, 16);
  EXPECT_DOUBLE_EQ(r.exposed_reduce_us, 10);
  ASSERT_OK_AND_ASSIGN(Schedule plain,
                       ParseScheduleCsv("0F0,1F0,1B0,1REDUCE_GRAD,0B0,0REDUCE_GRAD\n"));
  ASSERT_OK_AND_ASSIGN(SimulationResult overlapped, SimulateLowered(plain, m));
  EXPECT_DOUBLE_EQ(overlapped.makespan_us, 14);
  EXPECT_DOUBLE_EQ(overlapped.exposed_reduce_us, 8);
}

}  // namespace
}  // namespace jitpipe::simulator_test
