// The timelines the simulator and the in-process runtime record carry their
// transfer table (TimelineTransfersOf), and as Chrome traces they pass the
// Perfetto/DevTools rules (CheckChromeTrace), with tracks, arrows from each
// send to its receive and memory counters.
#include "stages/exec/timeline_transfers.h"

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"
#include "runtime/replay.h"
#include "stages/reference/mlp_stage.h"
#include "runtime/replay_plan.h"
#include "stages/predict/simulator.h"
#include "tests/testing/status_matchers.h"
#include "traces/timeline_trace.h"
#include "traces/trace_checker.h"

namespace jitpipe::timeline_transfers_test {
namespace {

// Writes the timeline and checks the trace; returns the parsed events too.
absl::StatusOr<ChromeTraceSummary> TraceOf(const ReplayPlan& plan, const Timeline& timeline,
                                           nlohmann::json* parsed = nullptr) {
  std::string text;
  absl::StatusOr<ChromeTraceWriter> writer = ChromeTraceWriter::ToString(&text);
  if (!writer.ok()) return writer.status();
  AddTimelineToTrace(plan.schedule, timeline, *writer);
  if (absl::Status s = writer->Finish(); !s.ok()) return s;
  nlohmann::json json = nlohmann::json::parse(text);
  if (parsed != nullptr) *parsed = json;
  return CheckChromeTrace(json);
}

// How many flow starts sit on a send thread and how many flow ends on a
// recv thread (thread names "send", "send 2", "recv", ...).
std::pair<int64_t, int64_t> FlowEnds(const nlohmann::json& json) {
  std::map<std::pair<int, int>, std::string> thread;
  for (const auto& e : json["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      thread[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
    }
  }
  std::pair<int64_t, int64_t> ends{0, 0};
  for (const auto& e : json["traceEvents"]) {
    if (e["ph"] != "s" && e["ph"] != "f") continue;
    const std::string& name = thread[{e["pid"].get<int>(), e["tid"].get<int>()}];
    if (e["ph"] == "s" && name.rfind("send", 0) == 0) ++ends.first;
    if (e["ph"] == "f" && name.rfind("recv", 0) == 0) ++ends.second;
  }
  return ends;
}

int64_t ArrivalSlices(const nlohmann::json& json) {
  int64_t n = 0;
  for (const auto& e : json["traceEvents"]) {
    if (e["ph"] == "X" && e["name"].get<std::string>().rfind("arrived ", 0) == 0) ++n;
  }
  return n;
}

absl::StatusOr<ReplayPlan> Planned(const std::string& name, int pp, int m,
                                   double p2p_latency_us = 0.25) {
  absl::StatusOr<Schedule> s = Generate({name, pp, m, 0});
  if (!s.ok()) return s.status();
  absl::StatusOr<Schedule> lowered = LowerForReplay(*s);
  if (!lowered.ok()) return lowered.status();
  Model model;
  model.defaults.forward_us = 1;
  model.defaults.backward_input_us = 1;
  model.defaults.backward_weight_us = 1;
  model.defaults.input_bytes = 64;
  model.defaults.output_bytes = 64;
  model.defaults.stash_bytes = 128;
  model.defaults.param_bytes = 256;
  model.p2p.latency_us = p2p_latency_us;
  model.dp.size = 2;
  model.dp.link.latency_us = 3;
  return PlanReplay(*std::move(lowered), model, MemoryPolicy::kJit);
}

// Every transfer's arrow from its producer to its consumer, a memory
// counter per category and rank, and a slice per span.
TEST(TimelineTraceTest, SimulatedTimelinePassesTheViewerRules) {
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, Planned("interleaved-1f1b", 4, 8));
  ASSERT_OK_AND_ASSIGN(SimulationResult sim,
                       Simulate(plan.schedule, plan.executable, plan.model, {true}));
  nlohmann::json json;
  ASSERT_OK_AND_ASSIGN(ChromeTraceSummary summary, TraceOf(plan, sim.timeline, &json));
  const int64_t transfers = static_cast<int64_t>(plan.executable.transfers.size());
  // A slice per span plus an arrival slice per transfer (every RECV span has
  // length: the link has latency).
  EXPECT_EQ(summary.slices, static_cast<int64_t>(sim.timeline.spans.size()) + transfers);
  EXPECT_EQ(summary.flows, transfers);
  EXPECT_EQ(FlowEnds(json), (std::pair<int64_t, int64_t>{transfers, transfers}));
  EXPECT_GT(summary.counters, 0);
  std::set<std::string> names;
  for (const auto& e : json["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") names.insert(e["args"]["name"]);
    if (e["ph"] == "C") names.insert(e["name"]);
  }
  for (const char* expected : {"compute", "send", "recv", "reduce", "mem.activations",
                               "mem.stash", "mem.receive", "mem.gradients", "mem.live"}) {
    EXPECT_TRUE(names.count(expected)) << expected;
  }
}

// Free communication: data arrives the instant both sides are posted. Where
// the receive was posted first that is the send's own instant, and a viewer
// draws no arrow that does not go forwards in time, so those transfers'
// arrows run from the producing computation to the consuming one instead;
// where the receive came later, the arrow goes to the RECV slice itself (it
// has no length, so there is no arrival slice).
TEST(TimelineTraceTest, FreeTransfersFallBackToComputeArrows) {
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, Planned("1f1b", 4, 8, /*p2p_latency_us=*/0));
  ASSERT_OK_AND_ASSIGN(SimulationResult sim,
                       Simulate(plan.schedule, plan.executable, plan.model, {true}));
  nlohmann::json json;
  ASSERT_OK_AND_ASSIGN(ChromeTraceSummary summary, TraceOf(plan, sim.timeline, &json));
  EXPECT_EQ(summary.slices, static_cast<int64_t>(sim.timeline.spans.size()));
  EXPECT_EQ(ArrivalSlices(json), 0);
  const auto [from_sends, to_receives] = FlowEnds(json);
  EXPECT_EQ(from_sends, to_receives);
  EXPECT_GT(summary.flows, from_sends);  // compute -> compute arrows too
}

// Measured, two replicas, two steps: one arrow per transfer, replica and
// step; world ranks 2 and 3 are named as replica 1's.
TEST(TimelineTraceTest, MeasuredTimelineOfSeveralStepsAndReplicas) {
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({"1f1b", 2, 4, 0}));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, LowerForReplay(s));
  MlpStageFactory factory(MlpOptions{MlpShape{4, 2, 1}, 1}, MlpLayout::Of(lowered, 2));
  Model base;
  base.dp.size = 2;
  ASSERT_OK_AND_ASSIGN(Model model, ModelWithStageSizes(base, lowered.num_stages(), factory));
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, PlanReplay(lowered, model, MemoryPolicy::kJit));
  ReplayOptions options;
  options.dp = 2;
  options.steps = 2;
  options.record_timeline = true;
  ASSERT_OK_AND_ASSIGN(ReplayResult result,
                       RunInProcess(plan.schedule, plan.executable, plan.plans, factory, options));
  EXPECT_EQ(result.timeline.transfers.size(), plan.executable.transfers.size());
  nlohmann::json json;
  ASSERT_OK_AND_ASSIGN(ChromeTraceSummary summary, TraceOf(plan, result.timeline, &json));
  const int64_t arrows = static_cast<int64_t>(plan.executable.transfers.size()) * 2 * 2;
  EXPECT_EQ(summary.flows, arrows);
  // Measured transfers take time, so every arrow goes from a SEND to an
  // arrival slice (or a RECV of no length).
  const auto [from_sends, to_receives] = FlowEnds(json);
  EXPECT_EQ(from_sends, arrows);
  EXPECT_EQ(to_receives, arrows);
  EXPECT_EQ(summary.slices, static_cast<int64_t>(result.timeline.spans.size()) +
                                ArrivalSlices(json));
  std::set<std::string> processes;
  for (const auto& e : json["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") processes.insert(e["args"]["name"]);
  }
  EXPECT_EQ(processes, (std::set<std::string>{"rank 0", "rank 1",
                                              "rank 2 (pipeline rank 0, replica 1)",
                                              "rank 3 (pipeline rank 1, replica 1)"}));
}

// One entry per transfer, same ids: the Executable's ends and bytes, the
// step that produces the data on the sender and the one that waits for it
// on the receiver.
TEST(TimelineTransfersTest, EveryTransferWithItsProducerAndConsumer) {
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, Planned("1f1b", 2, 2));
  const std::vector<TimelineTransfer> table = TimelineTransfersOf(plan.executable);
  ASSERT_EQ(table.size(), plan.executable.transfers.size());
  ASSERT_FALSE(table.empty());
  for (size_t t = 0; t < table.size(); ++t) {
    const Transfer& x = plan.executable.transfers[t];
    const TimelineTransfer& y = table[t];
    EXPECT_EQ(std::make_tuple(y.kind, y.stage, y.microbatch, y.src_rank, y.dst_rank, y.bytes),
              std::make_tuple(x.kind, x.stage, x.microbatch, x.src_rank, x.dst_rank, x.bytes));
    const bool forward = x.kind == ActionKind::kSendF;
    // 0F1 feeds 1F1 (act); 1B1 feeds 0B1 (grad): stage s's F or B, stage
    // s +/- 1's F or B with the same microbatch.
    const Action producer = plan.schedule.ranks[x.src_rank][y.producer_index];
    const Action consumer = plan.schedule.ranks[x.dst_rank][y.consumer_index];
    EXPECT_EQ(producer, Action::Make(forward ? ActionKind::kForward : ActionKind::kBackward,
                                     x.stage, x.microbatch));
    EXPECT_EQ(consumer, Action::Make(forward ? ActionKind::kForward : ActionKind::kBackward,
                                     forward ? x.stage + 1 : x.stage - 1, x.microbatch));
  }
}

// Simulate fills the table of the timeline it records (RunReplay's: see
// MeasuredTimelineOfSeveralStepsAndReplicas).
TEST(TimelineTransfersTest, SimulatedTimelineCarriesTheTable) {
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, Planned("1f1b", 2, 2));
  ASSERT_OK_AND_ASSIGN(SimulationResult sim,
                       Simulate(plan.schedule, plan.executable, plan.model, {true}));
  EXPECT_EQ(sim.timeline.transfers.size(), plan.executable.transfers.size());
  ASSERT_OK_AND_ASSIGN(SimulationResult untimed,
                       Simulate(plan.schedule, plan.executable, plan.model));
  EXPECT_TRUE(untimed.timeline.transfers.empty());
}

}  // namespace
}  // namespace jitpipe::timeline_transfers_test
