#include "traces/trace_checker.h"

#include <ostream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::trace_checker_test {
namespace {

using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::WriteTextFile;

// A trace with every kind of event the rules know, all valid.
constexpr const char* kGoodTrace = R"({"traceEvents":[
{"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"rank 0"}},
{"name":"thread_sort_index","ph":"M","ts":0,"pid":0,"tid":1,"args":{"sort_index":1}},
{"name":"0F0","cat":"compute","ph":"X","ts":1,"dur":4,"pid":0,"tid":1,"args":{"mb":0}},
{"name":"inner","cat":"compute","ph":"B","ts":2,"pid":0,"tid":1},
{"name":"inner","cat":"compute","ph":"E","ts":3,"pid":0,"tid":1},
{"name":"send","cat":"p2p","ph":"X","ts":5,"dur":1,"pid":0,"tid":2},
{"name":"act","cat":"p2p","ph":"s","ts":5,"pid":0,"tid":2,"id":"0x1a"},
{"name":"recv","cat":"p2p","ph":"B","ts":5.5,"pid":1,"tid":3},
{"name":"act","cat":"p2p","ph":"f","bp":"e","ts":5.5,"pid":1,"tid":3,"id":26},
{"name":"recv","cat":"p2p","ph":"E","ts":6,"pid":1,"tid":3},
{"name":"0F0","cat":"compute","ph":"X","ts":3,"dur":4,"pid":0,"tid":3},
{"name":"mem","cat":"memory","ph":"C","ts":1,"pid":0,"tid":0,"args":{"bytes":1048576}},
{"name":"mark","ph":"i","s":"g","ts":7,"pid":0,"tid":0},
{"name":"alive","cat":"buf","ph":"b","ts":1,"pid":0,"tid":5,"id2":{"local":"0x1"}}
],"displayTimeUnit":"ns","otherData":{"format":"jitpipe.trace","version":1}})";

TEST(TraceCheckerTest, AcceptsAValidTraceAndSummarizesIt) {
  ASSERT_OK_AND_ASSIGN(ChromeTraceSummary summary,
                       CheckChromeTrace(nlohmann::json::parse(kGoodTrace)));
  EXPECT_EQ(summary.events, 14);
  EXPECT_EQ(summary.slices, 5);  // three X, two B/E pairs
  EXPECT_EQ(summary.flows, 1);
  EXPECT_EQ(summary.counters, 1);
  EXPECT_EQ(summary.instants, 1);
  EXPECT_EQ(summary.metadata, 2);
  EXPECT_EQ(summary.end_nanos, 7000);
}

TEST(TraceCheckerTest, AcceptsTheBareArrayForm) {
  nlohmann::json events = nlohmann::json::parse(kGoodTrace)["traceEvents"];
  ASSERT_OK_AND_ASSIGN(ChromeTraceSummary summary, CheckChromeTrace(events));
  EXPECT_EQ(summary.events, 14);
}

TEST(TraceCheckerTest, StreamsAFileWithTheSameResult) {
  std::string path = MakeTempDir("checker") + "/good.json";
  WriteTextFile(path, kGoodTrace);
  ASSERT_OK_AND_ASSIGN(ChromeTraceSummary summary, ReadAndCheckChromeTrace(path));
  EXPECT_EQ(summary.events, 14);
  EXPECT_EQ(summary.flows, 1);
  EXPECT_EQ(summary.slices, 5);
}

struct BadTrace {
  std::string label;
  std::string events;  // the text inside "traceEvents":[...]
  std::string message;
};

// gtest prints the label instead of the struct's bytes.
void PrintTo(const BadTrace& bad, std::ostream* os) { *os << bad.label; }

class TraceCheckerRejectsTest : public ::testing::TestWithParam<BadTrace> {};

TEST_P(TraceCheckerRejectsTest, NamesTheEventAndTheRule) {
  std::string text = absl::StrCat("{\"traceEvents\":[", GetParam().events, "]}");
  absl::StatusOr<ChromeTraceSummary> checked = CheckChromeTrace(nlohmann::json::parse(text));
  EXPECT_EQ(checked.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(checked), GetParam().message);

  std::string path = MakeTempDir("checker") + "/bad.json";
  WriteTextFile(path, text);
  EXPECT_EQ(Message(ReadAndCheckChromeTrace(path)), path + ": " + GetParam().message);
}

// Valid building blocks for the cases below.
#define SLICE(name, ts, dur) \
  "{\"name\":\"" name "\",\"cat\":\"c\",\"ph\":\"X\",\"ts\":" #ts ",\"dur\":" #dur ",\"pid\":0,\"tid\":1}"
#define FLOW(ph, ts, extra) \
  "{\"name\":\"act\",\"cat\":\"c\",\"ph\":\"" ph "\",\"ts\":" #ts ",\"pid\":0,\"tid\":1,\"id\":7" extra "}"

INSTANTIATE_TEST_SUITE_P(
    Cases, TraceCheckerRejectsTest,
    ::testing::Values(
        BadTrace{"NotAnObject", "5", "event 0: not a JSON object, found 5"},
        BadTrace{"MissingPh", R"({"name":"a"})", "event 0: missing \"ph\""},
        BadTrace{"UnknownPh", SLICE("a", 1, 1) R"(,{"name":"a","ph":"P"})",
                 "event 1: \"ph\" must be one of X B E i I C s f b e n M, found \"P\""},
        BadTrace{"MissingName", R"({"ph":"E","ts":1,"pid":0,"tid":1})",
                 "event 0 (ph \"E\"): \"name\" is missing"},
        BadTrace{"NumericName", R"({"ph":"X","name":5})",
                 "event 0 (ph \"X\"): \"name\" must be a string, found 5"},
        BadTrace{"MissingPid", R"({"ph":"i","name":"a","ts":1,"tid":1})",
                 "event 0 (ph \"i\", name \"a\"): missing \"pid\""},
        BadTrace{"NegativePid", R"({"ph":"i","name":"a","ts":1,"pid":-1,"tid":1})",
                 "event 0 (ph \"i\", name \"a\"): \"pid\" must be an integer in [0, 4294967295], "
                 "found -1"},
        BadTrace{"StringTid", R"({"ph":"i","name":"a","ts":1,"pid":0,"tid":"main"})",
                 "event 0 (ph \"i\", name \"a\"): \"tid\" must be an integer in [0, 4294967295], "
                 "found \"main\""},
        BadTrace{"NumericCat", R"({"ph":"i","name":"a","cat":1,"ts":1,"pid":0,"tid":1})",
                 "event 0 (ph \"i\", name \"a\"): \"cat\" must be a string, found 1"},
        BadTrace{"ArgsArray", R"({"ph":"i","name":"a","ts":1,"pid":0,"tid":1,"args":[1]})",
                 "event 0 (ph \"i\", name \"a\"): \"args\" must be an object, found [1]"},
        BadTrace{"MissingTs", R"({"ph":"X","name":"a","dur":1,"pid":0,"tid":1})",
                 "event 0 (ph \"X\", name \"a\"): missing \"ts\""},
        BadTrace{"NegativeTs", SLICE("a", -0.5, 1),
                 "event 0 (ph \"X\", name \"a\"): \"ts\" must be a number in [0, 9e15] "
                 "(microseconds), found -0.5"},
        BadTrace{"XWithoutDur", R"({"ph":"X","name":"a","ts":1,"pid":0,"tid":1})",
                 "event 0 (ph \"X\", name \"a\"): missing \"dur\" (Perfetto drops an X without "
                 "dur)"},
        BadTrace{"NegativeDur", SLICE("a", 1, -2),
                 "event 0 (ph \"X\", name \"a\"): \"dur\" must be a number in [0, 9e15] "
                 "(microseconds), found -2"},
        BadTrace{"BadInstantScope", R"({"ph":"i","name":"a","ts":1,"pid":0,"tid":1,"s":"x"})",
                 "event 0 (ph \"i\", name \"a\"): \"s\" must be \"t\", \"p\" or \"g\", found "
                 "\"x\""},
        BadTrace{"CounterWithStringArg",
                 R"({"ph":"C","name":"mem","ts":1,"pid":0,"tid":0,"args":{"bytes":"12"}})",
                 "event 0 (ph \"C\", name \"mem\"): counter arg \"bytes\" must be a finite "
                 "number, found \"12\""},
        BadTrace{"CounterWithoutArgs", R"({"ph":"C","name":"mem","ts":1,"pid":0,"tid":0})",
                 "event 0 (ph \"C\", name \"mem\"): a counter needs a non-empty \"args\" object "
                 "of numbers"},
        BadTrace{"UnknownMetadataName",
                 R"({"ph":"M","name":"process_labels","pid":0,"tid":0,"args":{"labels":"x"}})",
                 "event 0 (ph \"M\", name \"process_labels\"): metadata must be process_name, "
                 "thread_name, process_sort_index or thread_sort_index"},
        BadTrace{"ThreadNameWithoutName", R"({"ph":"M","name":"thread_name","pid":0,"tid":1})",
                 "event 0 (ph \"M\", name \"thread_name\"): \"args.name\" must be a string"},
        BadTrace{"StringSortIndex",
                 R"({"ph":"M","name":"process_sort_index","pid":0,"tid":0,"args":{"sort_index":"1"}})",
                 "event 0 (ph \"M\", name \"process_sort_index\"): \"args.sort_index\" must be an "
                 "integer, found \"1\""},
        BadTrace{"AsyncWithoutId", R"({"ph":"b","name":"buf","cat":"c","ts":1,"pid":0,"tid":5})",
                 "event 0 (ph \"b\", name \"buf\"): an async event needs \"id\", or \"id2\" with "
                 "\"local\" or \"global\""},
        BadTrace{"BWithoutE",
                 R"({"ph":"B","name":"a","cat":"c","ts":1,"pid":0,"tid":1},)"
                 R"({"ph":"B","name":"b","cat":"c","ts":2,"pid":0,"tid":1},)"
                 R"({"ph":"E","name":"b","cat":"c","ts":3,"pid":0,"tid":1})",
                 "event 0 (ph \"B\", name \"a\"): B without a matching E on pid 0 tid 1"},
        BadTrace{"EWithoutB", R"({"ph":"E","name":"a","cat":"c","ts":1,"pid":3,"tid":4})",
                 "event 0 (ph \"E\", name \"a\"): E without an open B on pid 3 tid 4"},
        BadTrace{"EWithAnotherName",
                 R"({"ph":"B","name":"a","cat":"c","ts":1,"pid":0,"tid":1},)"
                 R"({"ph":"E","name":"b","cat":"c","ts":2,"pid":0,"tid":1})",
                 "event 1 (ph \"E\", name \"b\"): E (cat \"c\") does not match the open B, event "
                 "0 (name \"a\", cat \"c\") on pid 0 tid 1"},
        BadTrace{"EWithoutCat",
                 R"({"ph":"B","name":"a","cat":"c","ts":1,"pid":0,"tid":1},)"
                 R"({"ph":"E","name":"a","ts":2,"pid":0,"tid":1})",
                 "event 1 (ph \"E\", name \"a\"): E (cat \"\") does not match the open B, event 0 "
                 "(name \"a\", cat \"c\") on pid 0 tid 1"},
        BadTrace{"OverlappingSlices", SLICE("a", 1, 4) "," SLICE("b", 3, 5),
                 "event 1 (ph \"X\", name \"b\"): slice [3, 8) us on pid 0 tid 1 overlaps event 0 "
                 "(name \"a\", [1, 5) us) without nesting"},
        BadTrace{"OverlapWithABeginEndSlice",
                 SLICE("a", 1, 4) R"(,{"ph":"B","name":"b","cat":"c","ts":4.5,"pid":0,"tid":1},)"
                 R"({"ph":"E","name":"b","cat":"c","ts":5.25,"pid":0,"tid":1})",
                 "event 1 (ph \"B\", name \"b\"): slice [4.5, 5.25) us on pid 0 tid 1 overlaps "
                 "event 0 (name \"a\", [1, 5) us) without nesting"},
        BadTrace{"FlowIdNegative", SLICE("a", 1, 1) "," FLOW("s", 1, ",\"id\":-7"),
                 "event 1 (ph \"s\", name \"act\"): \"id\" must be a non-negative integer or a "
                 "hex string, found -7"},
        BadTrace{"FlowWithoutEnd", SLICE("a", 1, 1) "," FLOW("s", 1, ""),
                 "event 1 (ph \"s\", name \"act\"): flow id 7 (cat \"c\") has no f event"},
        BadTrace{"FlowWithoutStart", SLICE("a", 1, 1) "," FLOW("f", 1, ",\"bp\":\"e\""),
                 "event 1 (ph \"f\", name \"act\"): flow id 7 (cat \"c\") has no s event"},
        BadTrace{"FlowEndWithoutBindPoint", SLICE("a", 1, 1) "," FLOW("f", 1, ""),
                 "event 1 (ph \"f\", name \"act\"): a flow end needs \"bp\": \"e\" (bind to the "
                 "enclosing slice)"},
        BadTrace{"FlowStartedTwice", SLICE("a", 1, 1) "," FLOW("s", 1, "") "," FLOW("s", 1, ""),
                 "event 2 (ph \"s\", name \"act\"): flow id 7 (cat \"c\") already has a start at "
                 "event 1"},
        BadTrace{"FlowEndsBeforeItStarts",
                 SLICE("a", 1, 1) "," SLICE("b", 3, 1) "," FLOW("f", 1, ",\"bp\":\"e\"") "," FLOW("s", 3, ""),
                 "event 2 (ph \"f\", name \"act\"): flow id 7 (cat \"c\") ends before its start, "
                 "event 3, in the file"},
        BadTrace{"FlowEndsAtItsStartTime",
                 SLICE("a", 1, 1) "," FLOW("s", 1, "") "," FLOW("f", 1, ",\"bp\":\"e\""),
                 "event 2 (ph \"f\", name \"act\"): flow id 7 (cat \"c\") ends at 1 us, not later "
                 "than its start, event 1, at 1 us"},
        // A flow event strictly inside its slice: Perfetto would bind it, the
        // DevTools engine would not (it needs the slice's exact ts).
        BadTrace{"FlowInsideButNotAtTheSliceStart",
                 SLICE("a", 1, 2) "," FLOW("s", 2, "") "," SLICE("b", 4, 2) "," FLOW("f", 4, ",\"bp\":\"e\""),
                 "event 1 (ph \"s\", name \"act\"): no slice on pid 0 tid 1 starts at 2 us; a "
                 "flow event binds to the slice with the same ts, pid, tid and cat"},
        BadTrace{"FlowCatDiffersFromItsSlice",
                 R"({"name":"a","cat":"compute","ph":"X","ts":1,"dur":1,"pid":0,"tid":1},)" FLOW(
                     "s", 1, "") "," SLICE("b", 4, 2) "," FLOW("f", 4, ",\"bp\":\"e\""),
                 "event 1 (ph \"s\", name \"act\"): binds to event 0 (name \"a\") whose cat "
                 "\"compute\" differs from the flow's cat \"c\""},
        BadTrace{"FlowSliceIsAmbiguous",
                 SLICE("a", 1, 2) "," SLICE("a2", 1, 1) "," FLOW("s", 1, "") "," SLICE("b", 4, 2) "," FLOW(
                     "f", 4, ",\"bp\":\"e\""),
                 "event 2 (ph \"s\", name \"act\"): 2 slices on pid 0 tid 1 start at 1 us (events "
                 "0 and 1); the flow's slice is ambiguous"},
        BadTrace{"FlowBeforeItsSliceInTheFile",
                 FLOW("s", 1, "") "," SLICE("a", 1, 2) "," SLICE("b", 4, 2) "," FLOW("f", 4, ",\"bp\":\"e\""),
                 "event 0 (ph \"s\", name \"act\"): binds to event 1 (name \"a\"), which comes "
                 "later in the file; write the slice first"}),
    [](const ::testing::TestParamInfo<BadTrace>& param_info) { return param_info.param.label; });

#undef SLICE
#undef FLOW

TEST(TraceCheckerTest, SlicesOnDifferentThreadsMayOverlap) {
  EXPECT_OK(CheckChromeTrace(nlohmann::json::parse(R"([
    {"name":"a","ph":"X","ts":1,"dur":4,"pid":0,"tid":1},
    {"name":"b","ph":"X","ts":3,"dur":4,"pid":0,"tid":2},
    {"name":"c","ph":"X","ts":3,"dur":4,"pid":1,"tid":1},
    {"name":"touching","ph":"X","ts":5,"dur":1,"pid":0,"tid":1}])")));
}

TEST(TraceCheckerTest, RejectsABadContainer) {
  const std::string container =
      "a trace is a JSON array of events or an object with a \"traceEvents\" array";
  EXPECT_EQ(Message(CheckChromeTrace(nlohmann::json::parse("5"))), container);
  EXPECT_EQ(Message(CheckChromeTrace(nlohmann::json::parse(R"({"events":[]})"))), container);
  EXPECT_EQ(Message(CheckChromeTrace(nlohmann::json::parse(R"({"traceEvents":{}})"))), container);
  EXPECT_EQ(Message(CheckChromeTrace(
                nlohmann::json::parse(R"({"traceEvents":[],"displayTimeUnit":"us"})"))),
            "\"displayTimeUnit\" must be \"ms\" or \"ns\", found \"us\"");
}

TEST(TraceCheckerTest, ReadingReportsFilesAndSyntaxByPath) {
  std::string dir = MakeTempDir("checker");
  EXPECT_EQ(ReadAndCheckChromeTrace(dir + "/none.json").status().code(),
            absl::StatusCode::kNotFound);

  WriteTextFile(dir + "/syntax.json", "{\"traceEvents\":[\n{\"ph\":}]}");
  EXPECT_EQ(Message(ReadAndCheckChromeTrace(dir + "/syntax.json")),
            dir + "/syntax.json: invalid JSON: parse error at line 2, column 7: syntax error "
                  "while parsing value - unexpected '}'; expected '[', '{', or a literal");

  WriteTextFile(dir + "/utf8.json", "[{\"name\":\"a\xFF\"}]");
  EXPECT_EQ(Message(ReadAndCheckChromeTrace(dir + "/utf8.json")),
            dir + "/utf8.json: invalid JSON: parse error at line 1, column 12: syntax error while "
                  "parsing value - invalid string: ill-formed UTF-8 byte; last read: '\"a<FF>'");

  WriteTextFile(dir + "/object.json", R"({"events":[]})");
  EXPECT_EQ(Message(ReadAndCheckChromeTrace(dir + "/object.json")),
            dir + "/object.json: a trace is a JSON array of events or an object with a "
                  "\"traceEvents\" array");

  WriteTextFile(dir + "/unit.json", R"({"displayTimeUnit":"us","traceEvents":[]})");
  EXPECT_EQ(Message(ReadAndCheckChromeTrace(dir + "/unit.json")),
            dir + "/unit.json: \"displayTimeUnit\" must be \"ms\" or \"ns\", found \"us\"");

  std::string deep = R"({"traceEvents":[{"name":"a","ph":"i","ts":1,"pid":0,"tid":0,"args":)";
  deep += std::string(100, '[') + std::string(100, ']') + "}]}";
  WriteTextFile(dir + "/deep.json", deep);
  EXPECT_EQ(Message(ReadAndCheckChromeTrace(dir + "/deep.json")),
            dir + "/deep.json: JSON nested deeper than 64 levels");
}

}  // namespace
}  // namespace jitpipe::trace_checker_test
