// PlannedTimeline: a memory plan as a Timeline over program index -- spans
// per action on the schema's tracks, memory samples where the plan's live
// bytes change, the arena's high-water mark, the transfer table -- and its
// trace through the one writer.
#include "traces/planned_timeline.h"

#include <array>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/memory/lowered_text.h"
#include "tests/testing/status_matchers.h"
#include "traces/timeline_trace.h"
#include "traces/trace_checker.h"

namespace jitpipe::planned_timeline_test {
namespace {

using ::jitpipe::testing::LoweredFromText;

// rank 0: 0F0 0SEND_F0 0RECV_B0 0B0;  rank 1: 1RECV_F0 1F0 1B0 1SEND_B0.
Schedule TwoRanks() {
  return LoweredFromText(2, 1, Placement::kLoop, 1,
                         {"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"});
}

Model Sizes() {
  Model m;
  m.defaults.input_bytes = 64;
  m.defaults.output_bytes = 128;
  m.defaults.stash_bytes = 256;
  return m;
}

absl::StatusOr<std::vector<RankMemoryPlan>> Plans(const Schedule& s, const Model& m) {
  return PlanMemory(s, m, PlanOptions{}, /*threads=*/1);
}

using Bytes = std::array<int64_t, kNumMemoryCategories>;  // activations, stash, receive,
                                                          // gradients, parameters

TEST(PlannedTimelineTest, EveryActionSpansItsProgramIndexOnItsTrack) {
  const Schedule s = TwoRanks();
  ASSERT_OK_AND_ASSIGN(std::vector<RankMemoryPlan> plans, Plans(s, Sizes()));
  const Timeline t = PlannedTimeline(s, plans);
  EXPECT_EQ(t.axis, TimelineAxis::kProgramIndex);
  using T = TimelineTrack;
  // (rank, track, index, transfer, start, end); transfer ids: act s0 mb0 is
  // (2 * 0 + 0) * 1 + 0 = 0, grad s1 mb0 is (2 * 1 + 1) * 1 + 0 = 3.
  const std::vector<std::tuple<int, T, int, int, double, double>> expected = {
      {0, T::kCompute, 0, -1, 0, 1}, {0, T::kSend, 1, 0, 1, 2},
      {0, T::kRecv, 2, 3, 2, 3},     {0, T::kCompute, 3, -1, 3, 4},
      {1, T::kRecv, 0, 0, 0, 1},     {1, T::kCompute, 1, -1, 1, 2},
      {1, T::kCompute, 2, -1, 2, 3}, {1, T::kSend, 3, 3, 3, 4}};
  std::vector<std::tuple<int, T, int, int, double, double>> spans;
  for (const TimelineSpan& x : t.spans) {
    spans.emplace_back(x.rank, x.track, x.index, x.transfer, x.start_us, x.end_us);
  }
  EXPECT_EQ(spans, expected);
}

TEST(PlannedTimelineTest, TransferTableHasBothEndsBytesProducerAndConsumer) {
  const Schedule s = TwoRanks();
  ASSERT_OK_AND_ASSIGN(std::vector<RankMemoryPlan> plans, Plans(s, Sizes()));
  const Timeline t = PlannedTimeline(s, plans);
  ASSERT_EQ(t.transfers.size(), 4u);  // 2 directions x 2 stages x 1 microbatch
  const TimelineTransfer& act = t.transfers[0];
  EXPECT_EQ(act.kind, ActionKind::kSendF);
  EXPECT_EQ(std::make_tuple(act.stage, act.microbatch, act.src_rank, act.dst_rank, act.bytes,
                            act.producer_index, act.consumer_index),
            std::make_tuple(0, 0, 0, 1, int64_t{128}, 0, 1));  // 0F0's output, into 1F0
  const TimelineTransfer& grad = t.transfers[3];
  EXPECT_EQ(grad.kind, ActionKind::kSendB);
  EXPECT_EQ(std::make_tuple(grad.stage, grad.microbatch, grad.src_rank, grad.dst_rank, grad.bytes,
                            grad.producer_index, grad.consumer_index),
            std::make_tuple(1, 0, 1, 0, int64_t{64}, 2, 3));  // 1B0's input grad, into 0B0
  // No SEND_B from stage 0, no SEND_F from the last stage.
  EXPECT_EQ(t.transfers[1].src_rank, -1);
  EXPECT_EQ(t.transfers[2].src_rank, -1);
}

// Samples where any value changes: rank 0 holds 0F0's input and output and
// its stash until the output is sent, then receives the output gradient;
// rank 1 receives its input, runs F (its output dies at once: the last
// stage) and B (its input gradient lives until sent).
TEST(PlannedTimelineTest, MemorySamplesWhereTheLiveBytesChange) {
  const Schedule s = TwoRanks();
  PlanOptions no_arena;
  no_arena.arena = false;
  ASSERT_OK_AND_ASSIGN(std::vector<RankMemoryPlan> plans, PlanMemory(s, Sizes(), no_arena, 1));
  const Timeline t = PlannedTimeline(s, plans);
  std::vector<std::tuple<int, double, Bytes, int64_t>> samples;
  for (const MemorySample& m : t.memory) {
    samples.emplace_back(m.rank, m.time_us, m.bytes, m.arena_high_bytes);
  }
  EXPECT_EQ(samples, (std::vector<std::tuple<int, double, Bytes, int64_t>>{
                         {0, 0, {192, 256, 0, 0, 0}, kNoArenaSample},
                         {0, 2, {64, 256, 128, 0, 0}, kNoArenaSample},
                         {1, 0, {0, 0, 64, 0, 0}, kNoArenaSample},
                         {1, 1, {128, 256, 64, 0, 0}, kNoArenaSample},
                         {1, 2, {0, 256, 64, 64, 0}, kNoArenaSample},
                         {1, 3, {0, 0, 0, 64, 0}, kNoArenaSample}}));
}

TEST(PlannedTimelineTest, WithAnArenaSamplesCarryItsHighWaterMark) {
  const Schedule s = TwoRanks();
  ASSERT_OK_AND_ASSIGN(std::vector<RankMemoryPlan> plans, Plans(s, Sizes()));
  const Timeline t = PlannedTimeline(s, plans);
  for (const MemorySample& m : t.memory) {
    int64_t live = 0;
    for (int64_t b : m.bytes) live += b;
    EXPECT_GE(m.arena_high_bytes, live) << "rank " << m.rank << " at " << m.time_us;
    EXPECT_LE(m.arena_high_bytes, plans[m.rank].arena.arena_bytes);
  }
}

// A hand-made layout (alloc/free order: A at 0..1, B at 1..2, C at 2..3):
// the highest occupied byte during each action.
TEST(PlannedTimelineTest, ArenaHighWaterIsTheHighestLiveTop) {
  RankMemoryPlan plan;
  plan.options.arena = true;
  plan.buffers.num_actions = 5;
  auto buffer = [](int64_t bytes, int32_t alloc, int32_t free) {
    Buffer b;
    b.bytes = bytes;
    b.alloc_index = alloc;
    b.free_index = free;
    return b;
  };
  plan.buffers.buffers = {buffer(100, 0, 1), buffer(50, 1, 2), buffer(10, 2, 3),
                          buffer(0, 3, 4)};
  plan.arena.offsets = {0, 100, 0, 500};  // the empty buffer occupies nothing
  EXPECT_EQ(ArenaHighWater(plan), (std::vector<int64_t>{100, 150, 150, 10, 0}));
}

// What each kind of action spans on, on one rank with FSDP and a reduction.
TEST(PlannedTimelineTest, StageWideActionsGoToReduceAndUnshard) {
  const Schedule s = LoweredFromText(1, 1, Placement::kLoop, 1,
                                     {"0UNSHARD 0F0 0B0 0REDUCE_GRAD 0RESHARD"});
  Model m = Sizes();
  m.defaults.param_bytes = 512;
  ASSERT_OK_AND_ASSIGN(std::vector<RankMemoryPlan> plans, Plans(s, m));
  const Timeline t = PlannedTimeline(s, plans);
  std::vector<TimelineTrack> tracks;
  for (const TimelineSpan& x : t.spans) tracks.push_back(x.track);
  EXPECT_EQ(tracks, (std::vector<TimelineTrack>{TimelineTrack::kUnshard, TimelineTrack::kCompute,
                                                TimelineTrack::kCompute, TimelineTrack::kReduce,
                                                TimelineTrack::kUnshard}));
  EXPECT_EQ(t.memory.front().bytes[static_cast<int>(MemoryCategory::kParameters)], 512);
}

// The planned trace: the schema's tracks, arrows where program order lets
// them go forwards (here producer -> consumer: each RECV stands before its
// SEND's index + 1), memory and arena counters, time as program index.
TEST(PlannedTimelineTest, TraceHasTheSchemasTracksArrowsAndCounters) {
  const Schedule s = TwoRanks();
  ASSERT_OK_AND_ASSIGN(std::vector<RankMemoryPlan> plans, Plans(s, Sizes()));
  std::string text;
  ASSERT_OK_AND_ASSIGN(ChromeTraceWriter writer, ChromeTraceWriter::ToString(&text));
  AddTimelineToTrace(s, PlannedTimeline(s, plans), writer);
  ASSERT_OK(writer.Finish());
  const nlohmann::json json = nlohmann::json::parse(text);
  ASSERT_OK_AND_ASSIGN(ChromeTraceSummary summary, CheckChromeTrace(json));
  EXPECT_EQ(summary.slices, 8);
  EXPECT_EQ(summary.flows, 2);
  std::vector<std::string> threads, flows, counters;
  for (const nlohmann::json& e : json["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 0) {
      threads.push_back(e["args"]["name"]);
    }
    if (e["ph"] == "s") flows.push_back(e["name"]);
    if (e["ph"] == "C" && e["pid"] == 0 && e["ts"] == 1) counters.push_back(e["name"]);
  }
  EXPECT_EQ(threads, (std::vector<std::string>{"compute", "send", "recv"}));
  EXPECT_EQ(flows, (std::vector<std::string>{"act s0->s1 mb0", "grad s1->s0 mb0"}));
  EXPECT_EQ(counters, (std::vector<std::string>{"mem.activations", "mem.stash", "mem.receive",
                                                "mem.gradients", "mem.parameters", "mem.live",
                                                "mem.arena_high"}));
  EXPECT_EQ(json["otherData"]["time_axis"], "program index");
}

}  // namespace
}  // namespace jitpipe::planned_timeline_test
