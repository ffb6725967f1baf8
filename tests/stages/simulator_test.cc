#include "stages/simulator.h"

#include <string>

#include "gtest/gtest.h"
#include "memory/buffer_lifetimes.h"
#include "scheduler/ir/schedule_csv.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe {
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

}  // namespace
}  // namespace jitpipe
