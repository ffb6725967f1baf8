#include "traces/chrome_trace_writer.h"

#include <malloc.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/sanitizers.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"
#include "traces/trace_checker.h"

namespace jitpipe::chrome_trace_writer_test {
namespace {

using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::ReadTestdata;
using ::jitpipe::testing::WriteTextFile;

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  return names;
}

// Two ranks of GPipe (pp 2, m 2) in the recommended layout: tid 1 compute,
// tid 2 send, tid 3 recv; an activation arrow per microbatch; a memory
// counter per rank sampled at every change and at the end.
void WriteTwoRankExample(ChromeTraceWriter& writer) {
  for (int rank = 0; rank < 2; ++rank) {
    writer.SetProcessName(rank, rank == 0 ? "rank 0 (stage 0)" : "rank 1 (stage 1)");
    writer.SetProcessSortIndex(rank, rank);
    const char* names[] = {"compute", "send", "recv"};
    for (int tid = 1; tid <= 3; ++tid) {
      writer.SetThreadName(rank, tid, names[tid - 1]);
      writer.SetThreadSortIndex(rank, tid, tid);
    }
  }
  const TraceArg mb0[] = {{"stage", 0}, {"mb", 0}};
  const TraceArg mb1[] = {{"stage", 0}, {"mb", 1}};
  writer.AddSlice({.name = "0F0", .cat = "compute", .pid = 0, .tid = 1, .ts_us = 0, .dur_us = 2,
                   .args = mb0});
  writer.AddCounter({.name = "mem.activations", .cat = "memory", .pid = 0, .ts_us = 0,
                     .key = "bytes", .value = 1048576});
  writer.AddSlice({.name = "0SEND_F0", .cat = "p2p", .pid = 0, .tid = 2, .ts_us = 2,
                   .dur_us = 0.5, .flow_out = TraceFlow{"act s0->s1 mb0", 1}});
  writer.AddSlice({.name = "0F1", .cat = "compute", .pid = 0, .tid = 1, .ts_us = 2, .dur_us = 2,
                   .args = mb1});
  writer.AddCounter({.name = "mem.activations", .cat = "memory", .pid = 0, .ts_us = 2,
                     .key = "bytes", .value = 2097152});
  writer.AddSlice({.name = "0SEND_F1", .cat = "p2p", .pid = 0, .tid = 2, .ts_us = 4,
                   .dur_us = 0.5, .flow_out = TraceFlow{"act s0->s1 mb1", 2}});
  const TraceArg s1mb0[] = {{"stage", 1}, {"mb", 0}};
  const TraceArg s1mb1[] = {{"stage", 1}, {"mb", 1}};
  writer.AddSlice({.name = "1RECV_F0", .cat = "p2p", .pid = 1, .tid = 3, .ts_us = 2.25,
                   .dur_us = 0.25, .flow_in = TraceFlow{"act s0->s1 mb0", 1}});
  writer.AddSlice({.name = "1F0", .cat = "compute", .pid = 1, .tid = 1, .ts_us = 2.5,
                   .dur_us = 2, .args = s1mb0});
  writer.AddCounter({.name = "mem.activations", .cat = "memory", .pid = 1, .ts_us = 2.25,
                     .key = "bytes", .value = 1048576});
  writer.AddSlice({.name = "1RECV_F1", .cat = "p2p", .pid = 1, .tid = 3, .ts_us = 4.25,
                   .dur_us = 0.25, .flow_in = TraceFlow{"act s0->s1 mb1", 2}});
  writer.AddSlice({.name = "1F1", .cat = "compute", .pid = 1, .tid = 1, .ts_us = 4.5,
                   .dur_us = 2, .args = s1mb1});
  writer.AddCounter({.name = "mem.activations", .cat = "memory", .pid = 1, .ts_us = 4.25,
                     .key = "bytes", .value = 2097152});
  for (int rank = 0; rank < 2; ++rank) {
    writer.AddCounter({.name = "mem.activations", .cat = "memory", .pid = rank, .ts_us = 6.5,
                       .key = "bytes", .value = 2097152});
  }
  const TraceArg step[] = {{"makespan_us", 6.5}, {"schedule", "gpipe"}, {"ok", true}};
  writer.AddInstant({.name = "step end", .cat = "step", .pid = 0, .tid = 1, .ts_us = 6.5,
                     .scope = TraceInstantScope::kGlobal, .args = step});
  writer.SetMetadata("schedule", "gpipe");
  writer.SetMetadata("pp", 2);
}

TEST(ChromeTraceWriterTest, WritesTheGoldenExampleTrace) {
  std::string out;
  ASSERT_OK_AND_ASSIGN(ChromeTraceWriter writer, ChromeTraceWriter::ToString(&out));
  WriteTwoRankExample(writer);
  ASSERT_OK(writer.Finish());
  std::string golden = ReadTestdata("traces/two_rank_example.json");
  if (out != golden) {
    std::string actual = MakeTempDir("golden") + "/two_rank_example.json";
    WriteTextFile(actual, out);
    ADD_FAILURE() << "the trace differs from tests/testdata/traces/two_rank_example.json; "
                  << "this run's output is in " << actual;
  }
  ASSERT_OK_AND_ASSIGN(ChromeTraceSummary summary, CheckChromeTrace(nlohmann::json::parse(out)));
  EXPECT_EQ(summary.events, writer.events_written());
  EXPECT_EQ(summary.slices, 8);
  EXPECT_EQ(summary.flows, 2);
  EXPECT_EQ(summary.counters, 6);
  EXPECT_EQ(summary.instants, 1);
  EXPECT_EQ(summary.metadata, 16);
  EXPECT_EQ(summary.end_nanos, 7500);  // 6.5 us + the default 1 us offset
}

TEST(ChromeTraceWriterTest, OtherDataCarriesFormatVersionOffsetAndMetadata) {
  std::string out;
  ASSERT_OK_AND_ASSIGN(ChromeTraceWriter writer,
                       ChromeTraceWriter::ToString(&out, {.ts_offset_us = 0}));
  writer.SetMetadata("makespan_us", 10);
  writer.SetMetadata("schedule", "1f1b");
  writer.SetMetadata("makespan_us", 12.5);  // replaced in place
  ASSERT_OK(writer.Finish());
  nlohmann::json trace = nlohmann::json::parse(out);
  EXPECT_EQ(trace["traceEvents"], nlohmann::json::array());
  EXPECT_EQ(out.substr(out.find("\"otherData\"")),
            "\"otherData\":{\"format\":\"jitpipe.trace\",\"version\":1,\"ts_offset_us\":0,"
            "\"makespan_us\":12.5,\"schedule\":\"1f1b\"}}\n");
}

TEST(ChromeTraceWriterTest, EscapesStringsAndRepairsInvalidUtf8) {
  std::string out;
  ASSERT_OK_AND_ASSIGN(ChromeTraceWriter writer, ChromeTraceWriter::ToString(&out));
  const TraceArg args[] = {{"note", "line1\nline2\t\"q\"\\"}, {"bad\xFF", "\xC0"}};
  writer.AddSlice({.name = "a \"quoted\"\x01 name\xE2\x82", .cat = "c\\at", .pid = 0, .tid = 0,
                   .ts_us = 1, .dur_us = 1, .args = args});
  ASSERT_OK(writer.Finish());
  nlohmann::json event = nlohmann::json::parse(out)["traceEvents"][0];
  EXPECT_EQ(event["name"], "a \"quoted\"\x01 name\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(event["cat"], "c\\at");
  EXPECT_EQ(event["args"]["note"], "line1\nline2\t\"q\"\\");
  EXPECT_EQ(event["args"]["bad\xEF\xBF\xBD"], "\xEF\xBF\xBD");
}

TEST(ChromeTraceWriterTest, RoundsEndsSoThatNestedSlicesStayNested) {
  std::string out;
  ASSERT_OK_AND_ASSIGN(ChromeTraceWriter writer,
                       ChromeTraceWriter::ToString(&out, {.ts_offset_us = 0}));
  // Both end at 10.0008 us, written 10.001. Rounding ts and dur separately
  // would end the parent at 10 and the child at 10.001: an overlap.
  writer.AddSlice({.name = "parent", .cat = "c", .ts_us = 0.0004, .dur_us = 10.0004});
  writer.AddSlice({.name = "child", .cat = "c", .ts_us = 5.0006, .dur_us = 5.0002});
  ASSERT_OK(writer.Finish());
  nlohmann::json trace = nlohmann::json::parse(out);
  EXPECT_EQ(trace["traceEvents"][0]["ts"], 0);
  EXPECT_EQ(trace["traceEvents"][0]["dur"], 10.001);
  EXPECT_EQ(trace["traceEvents"][1]["ts"], 5.001);
  EXPECT_EQ(trace["traceEvents"][1]["dur"], 5);
  EXPECT_OK(CheckChromeTrace(trace));
}

TEST(ChromeTraceWriterTest, InstantsCarryTheirScope) {
  std::string out;
  ASSERT_OK_AND_ASSIGN(ChromeTraceWriter writer, ChromeTraceWriter::ToString(&out));
  writer.AddInstant({.name = "t", .cat = "c", .ts_us = 1});
  writer.AddInstant({.name = "p", .cat = "c", .ts_us = 1, .scope = TraceInstantScope::kProcess});
  writer.AddInstant({.name = "g", .cat = "c", .ts_us = 1, .scope = TraceInstantScope::kGlobal});
  ASSERT_OK(writer.Finish());
  nlohmann::json events = nlohmann::json::parse(out)["traceEvents"];
  EXPECT_EQ(events[0]["s"], "t");
  EXPECT_EQ(events[1]["s"], "p");
  EXPECT_EQ(events[2]["s"], "g");
  EXPECT_EQ(events[2]["ts"], 2);
}

struct BadEventCase {
  std::string label;
  void (*add)(ChromeTraceWriter&);
  std::string message;
};

// gtest prints the label instead of the struct's bytes.
void PrintTo(const BadEventCase& bad, std::ostream* os) { *os << bad.label; }

class ChromeTraceWriterRejectsTest : public ::testing::TestWithParam<BadEventCase> {};

TEST_P(ChromeTraceWriterRejectsTest, KeepsTheFirstErrorAndDropsLaterEvents) {
  std::string out;
  ASSERT_OK_AND_ASSIGN(ChromeTraceWriter writer, ChromeTraceWriter::ToString(&out));
  writer.AddSlice({.name = "ok", .cat = "c", .ts_us = 0, .dur_us = 1});
  GetParam().add(writer);
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(writer.status()), GetParam().message);
  writer.AddSlice({.name = "later", .cat = "c", .ts_us = 1, .dur_us = 1});
  EXPECT_EQ(writer.events_written(), 1);
  absl::Status finished = writer.Finish();
  EXPECT_EQ(Message(finished), GetParam().message);
  EXPECT_EQ(out.find("later"), std::string::npos);
}

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

INSTANTIATE_TEST_SUITE_P(
    Cases, ChromeTraceWriterRejectsTest,
    ::testing::Values(
        BadEventCase{"NanTs",
                     [](ChromeTraceWriter& w) { w.AddSlice({.name = "0F1", .ts_us = kNan}); },
                     "trace event 1 (ph \"X\", name \"0F1\"): ts_us is nan; times must be finite "
                     "and >= 0"},
        BadEventCase{"InfiniteDur",
                     [](ChromeTraceWriter& w) { w.AddSlice({.name = "0F1", .dur_us = kInf}); },
                     "trace event 1 (ph \"X\", name \"0F1\"): dur_us is inf; times must be "
                     "finite and >= 0"},
        BadEventCase{"NegativeTs",
                     [](ChromeTraceWriter& w) { w.AddInstant({.name = "i", .ts_us = -1}); },
                     "trace event 1 (ph \"i\", name \"i\"): ts_us is -1; times must be finite and "
                     ">= 0"},
        BadEventCase{"AbsoluteClock",
                     [](ChromeTraceWriter& w) {
                       w.AddCounter({.name = "m", .ts_us = 1.7e15, .key = "bytes"});
                     },
                     "trace event 1 (ph \"C\", name \"m\"): ts_us is 1.7e+15 us, beyond 9e+12 "
                     "us; write times relative to the start of the run"},
        BadEventCase{"EndBeyondTheLimit",
                     [](ChromeTraceWriter& w) {
                       w.AddSlice({.name = "long", .ts_us = 5e12, .dur_us = 5e12});
                     },
                     "trace event 1 (ph \"X\", name \"long\"): ts_us + dur_us is 1e+13 us, "
                     "beyond 9e+12 us; write times relative to the start of the run"},
        BadEventCase{"NanCounter",
                     [](ChromeTraceWriter& w) {
                       w.AddCounter({.name = "m", .key = "bytes", .value = kNan});
                     },
                     "trace event 1 (ph \"C\", name \"m\"): value is nan; counter values must be "
                     "finite"},
        BadEventCase{"EmptyCounterKey",
                     [](ChromeTraceWriter& w) { w.AddCounter({.name = "m", .value = 1}); },
                     "trace event 1 (ph \"C\", name \"m\"): the counter key is empty"},
        BadEventCase{"NanArg",
                     [](ChromeTraceWriter& w) {
                       const TraceArg args[] = {{"mb", 1}, {"ratio", -kInf}};
                       w.AddSlice({.name = "0F1", .args = args});
                     },
                     "trace event 1 (ph \"X\", name \"0F1\"): args.ratio is -inf; numbers must "
                     "be finite"},
        BadEventCase{"NegativePid",
                     [](ChromeTraceWriter& w) { w.SetThreadName(-1, 2, "compute"); },
                     "trace event 1 (ph \"M\", name \"thread_name\"): pid -1 / tid 2: both must "
                     "be >= 0"},
        BadEventCase{"FlowIdBeyondJavaScriptIntegers",
                     [](ChromeTraceWriter& w) {
                       w.AddSlice({.name = "send", .flow_out = TraceFlow{"act", int64_t{1} << 53}});
                     },
                     "trace event 1 (ph \"X\", name \"send\"): flow id 9007199254740992 is "
                     "outside [0, 2^53 - 1]"},
        BadEventCase{"ReservedMetadata",
                     [](ChromeTraceWriter& w) { w.SetMetadata("version", 2); },
                     "trace metadata key \"version\" is reserved"},
        BadEventCase{"NanMetadata",
                     [](ChromeTraceWriter& w) {
                       w.SetMetadata("ranks", {{{"peak", 1.0}}, {{"peak", kNan}}});
                     },
                     "trace metadata \"ranks[1].peak\" is not a finite number"}),
    [](const ::testing::TestParamInfo<BadEventCase>& param_info) { return param_info.param.label; });

TEST(ChromeTraceWriterTest, RefusesBadOptions) {
  std::string out;
  EXPECT_EQ(Message(ChromeTraceWriter::ToString(&out, {.ts_offset_us = -1})),
            "ts_offset_us must be in [0, 9e+12], found -1");
  EXPECT_EQ(Message(ChromeTraceWriter::ToString(nullptr)),
            "ChromeTraceWriter::ToString: null output");
  EXPECT_EQ(ChromeTraceWriter::ToFile("/nonexistent-dir/t.json").status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(ChromeTraceWriterTest, FinishTwiceIsAPreconditionError) {
  std::string out;
  ASSERT_OK_AND_ASSIGN(ChromeTraceWriter writer, ChromeTraceWriter::ToString(&out));
  ASSERT_OK(writer.Finish());
  std::string finished = out;
  writer.AddSlice({.name = "after", .cat = "c", .ts_us = 1});
  EXPECT_EQ(writer.Finish().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(out, finished);
}

TEST(ChromeTraceWriterTest, AMovedWriterKeepsWriting) {
  std::string out;
  ASSERT_OK_AND_ASSIGN(ChromeTraceWriter first, ChromeTraceWriter::ToString(&out));
  first.AddSlice({.name = "a", .cat = "c", .ts_us = 0, .dur_us = 1});
  ChromeTraceWriter second = std::move(first);
  second.AddSlice({.name = "b", .cat = "c", .ts_us = 1, .dur_us = 1});
  ASSERT_OK(second.Finish());
  ASSERT_OK_AND_ASSIGN(ChromeTraceSummary summary, CheckChromeTrace(nlohmann::json::parse(out)));
  EXPECT_EQ(summary.slices, 2);
}

TEST(ChromeTraceWriterTest, AFileAppearsOnlyOnASuccessfulFinish) {
  std::string dir = MakeTempDir("trace_file");
  std::string path = dir + "/trace.json";
  {
    ASSERT_OK_AND_ASSIGN(ChromeTraceWriter writer, ChromeTraceWriter::ToFile(path));
    writer.AddSlice({.name = "a", .cat = "c", .ts_us = 0, .dur_us = 1});
    EXPECT_TRUE(FilesIn(dir).empty());  // the temporary file is anonymous
  }  // destroyed without Finish()
  EXPECT_TRUE(FilesIn(dir).empty());

  {
    ASSERT_OK_AND_ASSIGN(ChromeTraceWriter writer, ChromeTraceWriter::ToFile(path));
    writer.AddSlice({.name = "a", .cat = "c", .ts_us = kNan});
    EXPECT_FALSE(writer.Finish().ok());
  }
  EXPECT_TRUE(FilesIn(dir).empty());

  ASSERT_OK_AND_ASSIGN(ChromeTraceWriter writer, ChromeTraceWriter::ToFile(path));
  WriteTwoRankExample(writer);
  ASSERT_OK(writer.Finish());
  EXPECT_EQ(FilesIn(dir), std::vector<std::string>{"trace.json"});
  ASSERT_OK_AND_ASSIGN(ChromeTraceSummary summary, ReadAndCheckChromeTrace(path));
  EXPECT_EQ(summary.flows, 2);
}

size_t HeapBytesInUse() {
  struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;  // small chunks plus mmap'ed blocks
}

// A million events go to a file while the heap stays flat: nothing is held
// per event. The file is then checked by the streaming reader. Under a
// sanitizer a fifth of that (still 18 MB, far above the heap bound): the
// full volume took minutes there and checks nothing more.
// 200,000 events (an 18 MB file) against a heap bound of 4 MiB: a writer that
// held its events would need five times the bound. (A million events took a
// minute of the release suite, mostly reading the file back to check it.)
TEST(ChromeTraceWriterTest, StreamsEventsWithoutHoldingThem) {
  constexpr int kSlices = 100'000;
  std::string path = MakeTempDir("large_trace") + "/large.json";
  ASSERT_OK_AND_ASSIGN(ChromeTraceWriter writer, ChromeTraceWriter::ToFile(path));
  size_t heap_before = HeapBytesInUse();
  size_t heap_peak = heap_before;
  for (int i = 0; i < kSlices; ++i) {
    int pid = i % 8;
    double ts = (i / 8) * 2.0;
    const TraceArg args[] = {{"mb", i / 8}};
    writer.AddSlice({.name = "F", .cat = "compute", .pid = pid, .tid = 1, .ts_us = ts,
                     .dur_us = 1.5, .args = args});
    writer.AddCounter({.name = "mem", .cat = "memory", .pid = pid, .ts_us = ts, .key = "bytes",
                       .value = static_cast<double>(i % 1000)});
    if (i % 65536 == 0) heap_peak = std::max(heap_peak, HeapBytesInUse());
  }
  heap_peak = std::max(heap_peak, HeapBytesInUse());
  ASSERT_OK(writer.Finish());
  EXPECT_EQ(writer.events_written(), 2 * kSlices);
  // Events take about 90 bytes each in the file; the writer's buffer is 64 KiB.
  EXPECT_LT(heap_peak - heap_before, size_t{4} << 20);
  EXPECT_GT(std::filesystem::file_size(path), size_t{50} * 2 * kSlices);

  ASSERT_OK_AND_ASSIGN(ChromeTraceSummary summary, ReadAndCheckChromeTrace(path));
  EXPECT_EQ(summary.events, 2 * kSlices);
  EXPECT_EQ(summary.slices, kSlices);
  EXPECT_EQ(summary.counters, kSlices);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace jitpipe::chrome_trace_writer_test
