// The three timeline traces the CLI writes -- planned (`plan --trace`, over
// program index), simulated (`simulate --trace`) and measured (`replay
// --trace`) -- share one track schema (traces/timeline_trace.h): a process
// "rank R" per rank, the threads in schema order, arrows from sends, the
// same memory counters (and the arena's high-water mark where planned).
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"
#include "traces/trace_checker.h"

namespace jitpipe::trace_schema_test {
namespace {

using ::jitpipe::testing::CliResult;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::RunCli;
using ::jitpipe::testing::WriteTextFile;

// Sizes only: plan --trace draws program index.
constexpr char kSizes[] = R"({"format": "jitpipe.model", "version": 1,
 "defaults": {"input_bytes": 4096, "output_bytes": 4096, "stash_bytes": 8192,
              "param_bytes": 16384}})";

// Times, latency and data parallelism: simulated transfers and reductions.
constexpr char kTimed[] = R"({"format": "jitpipe.model", "version": 1,
 "defaults": {"forward_us": 10, "backward_input_us": 10, "backward_weight_us": 10,
              "input_bytes": 4096, "output_bytes": 4096, "stash_bytes": 8192,
              "param_bytes": 16384},
 "p2p": {"latency_us": 1}, "dp": {"size": 2}})";

struct TraceCase {
  std::string name;
  std::vector<std::string> command;  // "S": the schedule, "L": it lowered, "D/x": a file x
  std::string time_axis;
  bool arena_high;
};

class TraceSchemaTest : public ::testing::TestWithParam<TraceCase> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTempDir("trace_schema"));
    WriteTextFile(*dir_ + "/sizes.json", kSizes);
    WriteTextFile(*dir_ + "/timed.json", kTimed);
    CliResult g = RunCli({"generate", "--schedule", "interleaved-1f1b", "--pp", "2",
                          "--stages-per-rank", "2", "--microbatches", "4", "-o",
                          *dir_ + "/s.json"});
    ASSERT_EQ(g.exit_code, 0) << g.err;
    CliResult l = RunCli({"lower", *dir_ + "/s.json", "--reduce-grad", "-o", *dir_ + "/l.json"});
    ASSERT_EQ(l.exit_code, 0) << l.err;
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::string* dir_;
};

std::string* TraceSchemaTest::dir_ = nullptr;

// A thread's track: its name without the lane number ("send 2" -> "send").
std::string TrackOf(const std::string& thread) { return thread.substr(0, thread.find(' ')); }

TEST_P(TraceSchemaTest, OneProcessPerRankWithTheSchemasTracksArrowsAndCounters) {
  const TraceCase& c = GetParam();
  const std::string trace = absl::StrCat(*dir_, "/", c.name, ".trace.json");
  std::vector<std::string> args;
  for (const std::string& a : c.command) {
    args.push_back(a == "S" ? *dir_ + "/s.json" : a == "L" ? *dir_ + "/l.json" : a);
    if (a.rfind("D/", 0) == 0) args.back() = *dir_ + a.substr(1);
  }
  args.insert(args.end(), {"--trace", trace});
  CliResult r = RunCli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_OK_AND_ASSIGN(ChromeTraceSummary summary, ReadAndCheckChromeTrace(trace));
  EXPECT_GT(summary.flows, 0);

  std::ifstream in(trace);
  const nlohmann::json doc = nlohmann::json::parse(in);
  const std::vector<std::string> schema = {"compute", "send", "recv", "reduce", "unshard"};
  std::set<std::string> processes, counters;
  std::map<int, std::vector<std::string>> tracks;  // pid -> tracks in tid order
  for (const nlohmann::json& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") processes.insert(e["args"]["name"]);
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      std::vector<std::string>& list = tracks[e["pid"].get<int>()];
      const std::string track = TrackOf(e["args"]["name"]);
      if (list.empty() || list.back() != track) list.push_back(track);
    }
    if (e["ph"] == "C") counters.insert(e["name"]);
  }
  EXPECT_EQ(processes, (std::set<std::string>{"rank 0", "rank 1"}));
  for (const auto& [pid, list] : tracks) {
    // Compute, send and recv on every rank, all in the schema's order.
    ASSERT_GE(list.size(), 3u) << "pid " << pid;
    EXPECT_EQ(std::vector<std::string>(list.begin(), list.begin() + 3),
              (std::vector<std::string>{"compute", "send", "recv"}));
    size_t k = 0;
    for (const std::string& track : list) {
      while (k < schema.size() && schema[k] != track) ++k;
      EXPECT_LT(k, schema.size()) << "pid " << pid << ": track " << track << " out of order";
    }
  }
  std::set<std::string> expected = {"mem.activations", "mem.stash",      "mem.receive",
                                    "mem.gradients",   "mem.parameters", "mem.live"};
  if (c.arena_high) expected.insert("mem.arena_high");
  EXPECT_EQ(counters, expected);
  EXPECT_EQ(doc["otherData"]["time_axis"], c.time_axis);
}

INSTANTIATE_TEST_SUITE_P(
    Traces, TraceSchemaTest,
    ::testing::Values(
        TraceCase{"planned", {"plan", "L", "--model", "D/sizes.json"}, "program index", true},
        TraceCase{"simulated", {"simulate", "L", "--model", "D/timed.json"}, "microseconds",
                  false},
        TraceCase{"replayed", {"replay", "S", "--stage", "mlp"}, "microseconds", false}),
    [](const ::testing::TestParamInfo<TraceCase>& c) { return c.param.name; });

}  // namespace
}  // namespace jitpipe::trace_schema_test
