// AddTimelineToTrace on hand-made timelines: the track schema (processes,
// threads and their order, slice names and args, counters), the arrows from
// sends to arrivals and their fallbacks, lanes, and every trace passing the
// Perfetto/DevTools rules (CheckChromeTrace).
#include "traces/timeline_trace.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/memory/lowered_text.h"
#include "tests/testing/status_matchers.h"
#include "traces/trace_checker.h"

namespace jitpipe::timeline_trace_test {
namespace {

using ::jitpipe::testing::LoweredFromText;
using Json = nlohmann::json;

// rank 0: 0F0 0SEND_F0 0RECV_B0 0B0;  rank 1: 1RECV_F0 1F0 1B0 1SEND_B0.
Schedule TwoRanks() {
  return LoweredFromText(2, 1, Placement::kLoop, 1,
                         {"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"});
}

// Transfer 0 carries 0F0's output to 1F0, transfer 1 1B0's input gradient
// to 0B0. Times in microseconds:
//   rank 0: 0F0 [0,10]  0SEND_F0 [10,12]  0RECV_B0 [11,44]  0B0 [44,64]
//   rank 1: 1RECV_F0 [0,12]  1F0 [12,22]  1B0 [22,42]  1SEND_B0 [42,44]
Timeline Measured() {
  Timeline t;
  t.spans = {{0, TimelineTrack::kCompute, 0, -1, 0, 10},
             {0, TimelineTrack::kSend, 1, 0, 10, 12},
             {0, TimelineTrack::kRecv, 2, 1, 11, 44},
             {0, TimelineTrack::kCompute, 3, -1, 44, 64},
             {1, TimelineTrack::kRecv, 0, 0, 0, 12},
             {1, TimelineTrack::kCompute, 1, -1, 12, 22},
             {1, TimelineTrack::kCompute, 2, -1, 22, 42},
             {1, TimelineTrack::kSend, 3, 1, 42, 44}};
  t.transfers = {{.kind = ActionKind::kSendF, .stage = 0, .microbatch = 0, .src_rank = 0,
                  .dst_rank = 1, .bytes = 128, .producer_index = 0, .consumer_index = 1},
                 {.kind = ActionKind::kSendB, .stage = 1, .microbatch = 0, .src_rank = 1,
                  .dst_rank = 0, .bytes = 64, .producer_index = 2, .consumer_index = 3}};
  MemorySample start{.rank = 0, .time_us = 0};
  start.bytes[static_cast<int>(MemoryCategory::kStash)] = 256;
  MemorySample freed{.rank = 0, .time_us = 64};
  t.memory = {start, freed};
  return t;
}

// The written trace, checked by CheckChromeTrace.
struct Written {
  Json json;
  ChromeTraceSummary summary;

  // Thread names per (pid, tid).
  std::map<std::pair<int, int>, std::string> Threads() const {
    std::map<std::pair<int, int>, std::string> threads;
    for (const Json& e : json["traceEvents"]) {
      if (e["ph"] == "M" && e["name"] == "thread_name") {
        threads[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
      }
    }
    return threads;
  }
  // The X event named `name` on `pid`, or null.
  Json Slice(int pid, const std::string& name) const {
    for (const Json& e : json["traceEvents"]) {
      if (e["ph"] == "X" && e["pid"] == pid && e["name"] == name) return e;
    }
    return nullptr;
  }
  // (thread name, ts) of the flow event `ph` named `name`, or nullopt.
  std::optional<std::pair<std::string, double>> FlowEnd(const std::string& ph,
                                                        const std::string& name) const {
    const auto threads = Threads();
    for (const Json& e : json["traceEvents"]) {
      if (e["ph"] == ph && e["name"] == name) {
        return std::make_pair(threads.at({e["pid"].get<int>(), e["tid"].get<int>()}),
                              e["ts"].get<double>());
      }
    }
    return std::nullopt;
  }
  // (ts, value) of counter `name` on `pid`.
  std::vector<std::pair<double, double>> Counter(int pid, const std::string& name) const {
    std::vector<std::pair<double, double>> samples;
    for (const Json& e : json["traceEvents"]) {
      if (e["ph"] == "C" && e["pid"] == pid && e["name"] == name) {
        samples.push_back({e["ts"].get<double>(), e["args"]["bytes"].get<double>()});
      }
    }
    return samples;
  }
};

absl::StatusOr<Written> Write(const Schedule& s, const Timeline& t) {
  std::string text;
  absl::StatusOr<ChromeTraceWriter> writer = ChromeTraceWriter::ToString(&text);
  if (!writer.ok()) return writer.status();
  AddTimelineToTrace(s, t, *writer);
  if (absl::Status status = writer->Finish(); !status.ok()) return status;
  Written w;
  w.json = Json::parse(text);
  absl::StatusOr<ChromeTraceSummary> summary = CheckChromeTrace(w.json);
  if (!summary.ok()) return summary.status();
  w.summary = *summary;
  return w;
}

TEST(TimelineTraceTest, OneProcessPerRankWithTracksInSchemaOrder) {
  ASSERT_OK_AND_ASSIGN(Written w, Write(TwoRanks(), Measured()));
  std::map<int, std::vector<std::string>> by_sort_index;  // pid -> names in tid order
  for (const auto& [key, name] : w.Threads()) by_sort_index[key.first].push_back(name);
  EXPECT_EQ(by_sort_index[0], (std::vector<std::string>{"compute", "send", "recv"}));
  EXPECT_EQ(by_sort_index[1], (std::vector<std::string>{"compute", "send", "recv"}));
  std::map<int, std::string> processes;
  for (const Json& e : w.json["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") processes[e["pid"]] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "thread_sort_index") {
      EXPECT_EQ(e["args"]["sort_index"], e["tid"]);
    }
  }
  EXPECT_EQ(processes, (std::map<int, std::string>{{0, "rank 0"}, {1, "rank 1"}}));
  EXPECT_EQ(w.json["otherData"]["time_axis"], "microseconds");
}

TEST(TimelineTraceTest, SlicesAreNamedByTheirActionWithIndexBytesAndPeer) {
  ASSERT_OK_AND_ASSIGN(Written w, Write(TwoRanks(), Measured()));
  const Json send = w.Slice(1, "1SEND_B0");
  ASSERT_FALSE(send.is_null());
  EXPECT_EQ(send["cat"], "p2p");
  EXPECT_EQ(send["args"], (Json{{"index", 3}, {"bytes", 64}, {"peer", 0}}));
  const Json compute = w.Slice(0, "0B0");
  ASSERT_FALSE(compute.is_null());
  EXPECT_EQ(compute["cat"], "compute");
  EXPECT_EQ(compute["args"], (Json{{"index", 3}}));
}

// The transfer table is what gives a transfer bytes, a peer and an arrow:
// without it the slices are still drawn.
TEST(TimelineTraceTest, WithoutTheTransferTableTransfersHaveNoArrowsOrPeers) {
  Timeline t = Measured();
  t.transfers.clear();
  ASSERT_OK_AND_ASSIGN(Written w, Write(TwoRanks(), t));
  EXPECT_EQ(w.summary.flows, 0);
  EXPECT_EQ(w.summary.slices, 8);
  EXPECT_EQ(w.Slice(1, "1SEND_B0")["args"], (Json{{"index", 3}}));
}

// Where the arrow of transfer 0 (0SEND_F0 on rank 0 -> 1RECV_F0 on rank 1)
// goes, for the times of its SEND and RECV.
enum class Arrow { kSendToArrival, kSendToRecv, kComputeToCompute };

struct ArrowCase {
  std::string name;
  double send_start, send_end, recv_start, recv_end;
  Arrow arrow;
};

class TimelineTraceArrowTest : public ::testing::TestWithParam<ArrowCase> {};

TEST_P(TimelineTraceArrowTest, TransferArrowGoesForwardsInTime) {
  const ArrowCase& c = GetParam();
  Timeline t = Measured();
  t.spans[1].start_us = c.send_start;
  t.spans[1].end_us = c.send_end;
  t.spans[4].start_us = c.recv_start;
  t.spans[4].end_us = c.recv_end;
  ASSERT_OK_AND_ASSIGN(Written w, Write(TwoRanks(), t));
  EXPECT_EQ(w.summary.flows, 2);  // transfer 1 always takes time: send -> arrival
  const std::string name = "act s0->s1 mb0";
  const auto from = w.FlowEnd("s", name);
  const auto to = w.FlowEnd("f", name);
  ASSERT_TRUE(from.has_value() && to.has_value());
  const bool arrival = !w.Slice(1, "arrived " + name).is_null();
  switch (c.arrow) {
    case Arrow::kSendToArrival:
      EXPECT_EQ(*from, std::make_pair(std::string("send"), c.send_start + 1));  // ts + 1 us
      EXPECT_EQ(*to, std::make_pair(std::string("recv"), c.recv_end + 1));
      EXPECT_TRUE(arrival);
      break;
    case Arrow::kSendToRecv:
      EXPECT_EQ(*from, std::make_pair(std::string("send"), c.send_start + 1));
      EXPECT_EQ(*to, std::make_pair(std::string("recv"), c.recv_start + 1));
      EXPECT_FALSE(arrival);
      break;
    case Arrow::kComputeToCompute:
      EXPECT_EQ(*from, std::make_pair(std::string("compute"), 0.0 + 1));   // 0F0
      EXPECT_EQ(*to, std::make_pair(std::string("compute"), 12.0 + 1));    // 1F0
      EXPECT_FALSE(arrival);
      break;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TimelineTraceArrowTest,
    ::testing::Values(
        // The data arrives 2 us after the post: a zero-length slice at the
        // end of the RECV marks it.
        ArrowCase{"costly", 10, 12, 0, 12, Arrow::kSendToArrival},
        // Free, and the receive is posted after the send: the RECV has no
        // length, the arrow ends on it.
        ArrowCase{"free_recv_later", 10, 10, 11, 11, Arrow::kSendToRecv},
        // Free, and the receive was posted first: data arrives at the send's
        // own instant, so the arrow runs from producer to consumer.
        ArrowCase{"free_recv_first", 10, 10, 0, 10, Arrow::kComputeToCompute}),
    [](const ::testing::TestParamInfo<ArrowCase>& c) { return c.param.name; });

// Counters: every category, their sum and (only where sampled) the arena's
// high-water mark, each written where it changes and once more at the
// rank's end.
TEST(TimelineTraceTest, CountersChangeOnlyAndEndAtTheRanksEnd) {
  Timeline t = Measured();
  t.memory[1].time_us = 50;
  MemorySample same = t.memory[0];  // an unchanged sample at 5 us writes nothing
  same.time_us = 5;
  t.memory.insert(t.memory.begin() + 1, same);
  ASSERT_OK_AND_ASSIGN(Written w, Write(TwoRanks(), t));
  // Written 1 us late; the end sample at 64 us (0B0's end).
  EXPECT_EQ(w.Counter(0, "mem.stash"),
            (std::vector<std::pair<double, double>>{{1, 256}, {51, 0}, {65, 0}}));
  EXPECT_EQ(w.Counter(0, "mem.live"),
            (std::vector<std::pair<double, double>>{{1, 256}, {51, 0}, {65, 0}}));
  EXPECT_EQ(w.Counter(0, "mem.activations"),
            (std::vector<std::pair<double, double>>{{1, 0}, {65, 0}}));
  EXPECT_TRUE(w.Counter(0, "mem.arena_high").empty());
  EXPECT_TRUE(w.Counter(1, "mem.live").empty());  // rank 1 has no samples

  for (MemorySample& m : t.memory) m.arena_high_bytes = 512;
  ASSERT_OK_AND_ASSIGN(Written arena, Write(TwoRanks(), t));
  EXPECT_EQ(arena.Counter(0, "mem.arena_high"),
            (std::vector<std::pair<double, double>>{{1, 512}, {65, 512}}));
  std::set<std::string> names;
  for (const Json& e : arena.json["traceEvents"]) {
    if (e["ph"] == "C") names.insert(e["name"]);
  }
  EXPECT_EQ(names, (std::set<std::string>{"mem.activations", "mem.stash", "mem.receive",
                                          "mem.gradients", "mem.parameters", "mem.live",
                                          "mem.arena_high"}));
}

// A last sample at the rank's end writes nothing more.
TEST(TimelineTraceTest, NoSecondSampleWhenTheLastOneIsAtTheEnd) {
  ASSERT_OK_AND_ASSIGN(Written w, Write(TwoRanks(), Measured()));  // last sample at 64 us
  EXPECT_EQ(w.Counter(0, "mem.stash"),
            (std::vector<std::pair<double, double>>{{1, 256}, {65, 0}}));
  EXPECT_EQ(w.Counter(0, "mem.activations"), (std::vector<std::pair<double, double>>{{1, 0}}));
}

// A second replica's ranks are named by pipeline rank and replica; their
// peers are in their own replica.
TEST(TimelineTraceTest, ReplicaRanksAreNamedAndPairedWithinTheirReplica) {
  Timeline t = Measured();
  for (TimelineSpan span : Measured().spans) {
    span.rank += 2;
    t.spans.push_back(span);
  }
  ASSERT_OK_AND_ASSIGN(Written w, Write(TwoRanks(), t));
  EXPECT_EQ(w.summary.flows, 4);
  std::set<std::string> processes;
  for (const Json& e : w.json["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") processes.insert(e["args"]["name"]);
  }
  EXPECT_EQ(processes, (std::set<std::string>{"rank 0", "rank 1",
                                              "rank 2 (pipeline rank 0, replica 1)",
                                              "rank 3 (pipeline rank 1, replica 1)"}));
  EXPECT_EQ(w.Slice(3, "1SEND_B0")["args"]["peer"], 2);
}

// Sends whose transfers overlap in time go to separate lanes, so each
// thread still nests strictly.
TEST(TimelineTraceTest, OverlappingSpansOfATrackGetLanes) {
  const Schedule s = LoweredFromText(2, 1, Placement::kLoop, 2,
                                     {"0F0 0SEND_F0 0F1 0SEND_F1", "1RECV_F0 1RECV_F1 1F0 1F1"});
  Timeline t;
  t.spans = {{0, TimelineTrack::kSend, 1, -1, 1.0, 5.0}, {0, TimelineTrack::kSend, 3, -1, 2.0, 6.0}};
  ASSERT_OK_AND_ASSIGN(Written w, Write(s, t));
  EXPECT_EQ(w.summary.slices, 2);
  std::set<std::string> threads;
  for (const auto& [key, name] : w.Threads()) threads.insert(name);
  EXPECT_EQ(threads, (std::set<std::string>{"send", "send 2"}));
}

}  // namespace
}  // namespace jitpipe::timeline_trace_test
