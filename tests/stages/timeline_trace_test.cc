// Timelines as Chrome traces: what the simulator predicts and what the
// in-process runtime measures both pass the Perfetto/DevTools rules
// (CheckChromeTrace), with tracks, arrows and memory counters.
#include "stages/timeline_trace.h"

#include <set>
#include <string>

#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"
#include "stages/inproc_runtime.h"
#include "stages/mlp_stage.h"
#include "stages/replay_plan.h"
#include "stages/simulator.h"
#include "tests/testing/status_matchers.h"
#include "traces/trace_checker.h"

namespace jitpipe {
namespace {

// Writes the timeline and checks the trace; returns the parsed events too.
absl::StatusOr<ChromeTraceSummary> TraceOf(const ReplayPlan& plan, const Timeline& timeline,
                                           nlohmann::json* parsed = nullptr) {
  std::string text;
  absl::StatusOr<ChromeTraceWriter> writer = ChromeTraceWriter::ToString(&text);
  if (!writer.ok()) return writer.status();
  AddTimelineToTrace(plan.schedule, plan.executable, timeline, *writer);
  if (absl::Status s = writer->Finish(); !s.ok()) return s;
  nlohmann::json json = nlohmann::json::parse(text);
  if (parsed != nullptr) *parsed = json;
  return CheckChromeTrace(json);
}

absl::StatusOr<ReplayPlan> Planned(const std::string& name, int pp, int m) {
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
  model.p2p.latency_us = 0.25;
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
  EXPECT_EQ(summary.slices, static_cast<int64_t>(sim.timeline.spans.size()));
  EXPECT_EQ(summary.flows, static_cast<int64_t>(plan.executable.transfers.size()));
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
  InProcessOptions options;
  options.dp = 2;
  options.steps = 2;
  options.record_timeline = true;
  ASSERT_OK_AND_ASSIGN(ReplayResult result,
                       RunInProcess(plan.schedule, plan.executable, plan.plans, factory, options));
  nlohmann::json json;
  ASSERT_OK_AND_ASSIGN(ChromeTraceSummary summary, TraceOf(plan, result.timeline, &json));
  EXPECT_EQ(summary.slices, static_cast<int64_t>(result.timeline.spans.size()));
  EXPECT_EQ(summary.flows, static_cast<int64_t>(plan.executable.transfers.size()) * 2 * 2);
  std::set<std::string> processes;
  for (const auto& e : json["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") processes.insert(e["args"]["name"]);
  }
  EXPECT_EQ(processes, (std::set<std::string>{"rank 0", "rank 1",
                                              "rank 2 (pipeline rank 0, replica 1)",
                                              "rank 3 (pipeline rank 1, replica 1)"}));
}

// Sends whose transfers overlap in time go to separate lanes, so each
// thread still nests strictly.
TEST(TimelineTraceTest, OverlappingSpansOfATrackGetLanes) {
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, Planned("gpipe", 2, 2));
  const RankProgram& program = plan.schedule.ranks[0];
  Timeline timeline;
  for (int i = 0; i < static_cast<int>(program.size()); ++i) {
    if (program[i].ToString() == "0SEND_F0") {
      timeline.spans.push_back({0, TimelineTrack::kSend, i, 0, 1.0, 5.0});
    }
    if (program[i].ToString() == "0SEND_F1") {
      timeline.spans.push_back({0, TimelineTrack::kSend, i, 1, 2.0, 6.0});
    }
  }
  ASSERT_EQ(timeline.spans.size(), 2u);
  nlohmann::json json;
  ASSERT_OK_AND_ASSIGN(ChromeTraceSummary summary, TraceOf(plan, timeline, &json));
  EXPECT_EQ(summary.slices, 2);
  std::set<std::string> threads;
  for (const auto& e : json["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") threads.insert(e["args"]["name"]);
  }
  EXPECT_EQ(threads, (std::set<std::string>{"send", "send 2"}));
}

}  // namespace
}  // namespace jitpipe
