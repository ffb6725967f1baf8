#include "scheduler/ir/schedule_json.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::schedule_json_test {
namespace {

constexpr char kValid[] = R"({"format": "jitpipe.schedule", "version": 1, "schedule": "gpipe",
 "pp": 2, "stages_per_rank": 1, "microbatches": 2, "placement": "loop",
 "stage_to_rank": [0, 1], "lowered": false,
 "ranks": [["0F0", "0F1", null, "0B0", "0B1"], [null, "1F0", "1F1", "1B0", "1B1"]]})";

TEST(ScheduleJsonTest, ReadsTheDesignExample) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleJson(kValid));
  EXPECT_EQ(s.name, "gpipe");
  EXPECT_EQ(s.pp, 2);
  EXPECT_EQ(s.microbatches, 2);
  EXPECT_EQ(s.chains, 1);
  EXPECT_EQ(s.ranks[0][2], Action::Bubble());
  EXPECT_EQ(s.ranks[1][4].ToString(), "1B1");
}

TEST(ScheduleJsonTest, WriteThenReadIsTheIdentity) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleJson(kValid));
  ASSERT_OK_AND_ASSIGN(Schedule again, ParseScheduleJson(ScheduleToJson(s)));
  EXPECT_EQ(again, s);
}

TEST(ScheduleJsonTest, WritesChainsOnlyWhenNotOne) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleJson(kValid));
  EXPECT_EQ(ScheduleToJson(s).find("chains"), std::string::npos);
  s.chains = 2;
  s.ranks = {{}, {}};
  std::string text = ScheduleToJson(s);
  EXPECT_NE(text.find("\"chains\": 2"), std::string::npos);
  ASSERT_OK_AND_ASSIGN(Schedule again, ParseScheduleJson(text));
  EXPECT_EQ(again.chains, 2);
}

// The layer cut (export's first source) is written only when known and
// reads back; a file without it is byte for byte what it was.
TEST(ScheduleJsonTest, WritesTheLayoutOnlyWhenKnown) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleJson(kValid));
  EXPECT_EQ(s.layout, "");
  EXPECT_EQ(ScheduleToJson(s).find("layout"), std::string::npos);
  s.layout = "Et*2|t*2L";
  const std::string text = ScheduleToJson(s);
  EXPECT_NE(text.find("\"lowered\": false,\n \"layout\": \"Et*2|t*2L\",\n \"ranks\""),
            std::string::npos);
  ASSERT_OK_AND_ASSIGN(Schedule again, ParseScheduleJson(text));
  EXPECT_EQ(again, s);
}

// The model a planner made the program for: written only when known, read
// back, bounded, a string.
TEST(ScheduleJsonTest, RecordsTheModelFingerprint) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleJson(kValid));
  EXPECT_EQ(ScheduleToJson(s).find("model_fingerprint"), std::string::npos);
  s.layout = "Et*2|t*2L";
  s.model_fingerprint = "fnv1a64:00000000deadbeef";
  const std::string text = ScheduleToJson(s);
  EXPECT_NE(text.find("\"layout\": \"Et*2|t*2L\",\n \"model_fingerprint\": "
                      "\"fnv1a64:00000000deadbeef\",\n \"ranks\""),
            std::string::npos);
  ASSERT_OK_AND_ASSIGN(Schedule again, ParseScheduleJson(text));
  EXPECT_EQ(again, s);
  std::string number = kValid;
  number.insert(1, "\"model_fingerprint\": 7, ");
  EXPECT_FALSE(ParseScheduleJson(number).ok());
  std::string huge = kValid;
  huge.insert(1, absl::StrCat("\"layout\": \"", std::string((1 << 20) + 1, 't'), "\", "));
  EXPECT_EQ(::jitpipe::testing::Message(ParseScheduleJson(huge)),
            "\"layout\" is 1048577 bytes; at most 1048576 are read");
}

TEST(ScheduleJsonTest, IgnoresUnknownKeys) {
  std::string text = kValid;
  text.insert(1, "\"comment\": \"added later\", ");
  EXPECT_OK(ParseScheduleJson(text));
}

struct BadJson {
  std::string name;
  std::string from, to;  // replace `from` in kValid with `to`
  std::string error;
};

class ScheduleJsonErrorTest : public ::testing::TestWithParam<BadJson> {};

TEST_P(ScheduleJsonErrorTest, NamesTheField) {
  std::string text = kValid;
  size_t at = text.find(GetParam().from);
  ASSERT_NE(at, std::string::npos) << GetParam().from;
  text.replace(at, GetParam().from.size(), GetParam().to);
  absl::StatusOr<Schedule> s = ParseScheduleJson(text);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(::jitpipe::testing::Message(s.status()), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, ScheduleJsonErrorTest,
    ::testing::Values(
        BadJson{"NewerVersion", "\"version\": 1", "\"version\": 2",
                "jitpipe.schedule version 2 was written by a newer jitpipe; this build reads "
                "versions up to 1"},
        BadJson{"WrongFormat", "jitpipe.schedule", "jitpipe.model",
                "\"format\" is \"jitpipe.model\"; expected \"jitpipe.schedule\""},
        BadJson{"MissingFormat", "\"format\": \"jitpipe.schedule\", ", "",
                "missing \"format\" (expected \"jitpipe.schedule\")"},
        BadJson{"ZeroPp", "\"pp\": 2", "\"pp\": 0", "\"pp\" is 0; expected 1 to 2147483647"},
        BadJson{"FractionalMicrobatches", "\"microbatches\": 2", "\"microbatches\": 2.5",
                "\"microbatches\" must be a whole number, found 2.5"},
        BadJson{"HugeStages", "\"stages_per_rank\": 1", "\"stages_per_rank\": 99999999999",
                "\"stages_per_rank\" is 99999999999; expected 1 to 2147483647"},
        BadJson{"BadPlacement", "\"loop\"", "\"zigzag\"",
                "unknown placement \"zigzag\"; expected loop, v or custom"},
        BadJson{"RankOutOfRange", "[0, 1]", "[0, 2]", "stage_to_rank[1] is 2; expected 0 to 1"},
        BadJson{"PlacementMismatch", "[0, 1]", "[1, 0]",
                "stage_to_rank does not follow the loop placement; use \"custom\""},
        BadJson{"BadAction", "\"1F1\"", "\"1F1x\"",
                "rank 1, index 2 (\"1F1x\"): cannot parse action \"1F1x\": unexpected \"x\" at "
                "character 4; expected the end of the action"},
        BadJson{"NumberAsAction", "\"1F1\"", "7",
                "rank 1, index 2 (7): expected an action string or null"},
        BadJson{"BubbleInLowered", "\"lowered\": false", "\"lowered\": true",
                "rank 0, index 2: a bubble (null) in a lowered program"},
        BadJson{"TooFewRanks", ", [null, \"1F0\", \"1F1\", \"1B0\", \"1B1\"]", "",
                "\"ranks\" has 1 programs but pp is 2"},
        BadJson{"Syntax", "\"pp\": 2,", "\"pp\": 2,,",
                "line 2, column 10: invalid JSON: syntax error while parsing object key - "
                "unexpected ','; expected string literal"},
        BadJson{"InvalidUtf8", "gpipe", "gp\xff",
                "line 1, column 61: invalid JSON: syntax error while parsing value - invalid "
                "string: ill-formed UTF-8 byte; last read: '\"gp<FF>'"}),
    [](const ::testing::TestParamInfo<BadJson>& param_info) { return param_info.param.name; });

// Hand-written files may leave out "lowered", "stage_to_rank" and
// "placement": they are inferred from the programs as the CSV reader infers
// them. `fields` goes between the counts and "ranks".
std::string HandWritten(const std::string& header, const std::string& ranks,
                        const std::string& fields = "") {
  return R"({"format": "jitpipe.schedule", "version": 1, )" + header + ", " + fields +
         R"("ranks": )" + ranks + "}";
}

constexpr char kTwoRanks[] = R"("pp": 2, "stages_per_rank": 1, "microbatches": 2)";
constexpr char k1f1b[] = R"([["0F0", "0F1", "0B0", "0B1"], ["1F0", "1B0", "1F1", "1B1"]])";
constexpr char kLowered1f1b[] =
    R"([["0F0", "0SEND_F0", "0RECV_B0", "0B0"], ["1RECV_F0", "1F0", "1B0", "1SEND_B0"]])";
constexpr char kFourStages[] = R"("pp": 2, "stages_per_rank": 2, "microbatches": 1)";

struct Inferred {
  std::string name;
  std::string text;
  bool lowered;
  std::vector<int> stage_to_rank;
  Placement placement;
};

class ScheduleJsonInferenceTest : public ::testing::TestWithParam<Inferred> {};

TEST_P(ScheduleJsonInferenceTest, InfersTheLeftOutFields) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleJson(GetParam().text));
  EXPECT_EQ(s.lowered, GetParam().lowered);
  EXPECT_EQ(s.stage_to_rank, GetParam().stage_to_rank);
  EXPECT_EQ(s.placement, GetParam().placement);
  EXPECT_EQ(s.name, "");
}

INSTANTIATE_TEST_SUITE_P(
    HandWritten, ScheduleJsonInferenceTest,
    ::testing::Values(
        Inferred{"NeitherField", HandWritten(kTwoRanks, k1f1b), false, {0, 1}, Placement::kLoop},
        Inferred{"NullFields",
                 HandWritten(kTwoRanks, k1f1b,
                             R"("placement": null, "stage_to_rank": null, "lowered": null, )"),
                 false, {0, 1}, Placement::kLoop},
        Inferred{"SendsMakeItLowered", HandWritten(kTwoRanks, kLowered1f1b), true, {0, 1},
                 Placement::kLoop},
        Inferred{"UnshardMakesItLowered",
                 HandWritten(kTwoRanks, R"([["0UNSHARD", "0F0", "0B0"], ["1F0", "1B0"]])"), true,
                 {0, 1}, Placement::kLoop},
        Inferred{"ReduceGradMakesItLowered",
                 HandWritten(kTwoRanks, R"([["0F0", "0B0"], ["1F0", "1B0", "1REDUCE_GRAD"]])"),
                 true, {0, 1}, Placement::kLoop},
        Inferred{"WrittenLoweredWithoutCommunication",
                 HandWritten(kTwoRanks, k1f1b, R"("lowered": true, )"), true, {0, 1},
                 Placement::kLoop},
        Inferred{"VPlacementFromThePrograms",
                 HandWritten(kFourStages,
                             R"([["0F0", "3F0", "3B0", "0B0"], ["1F0", "2F0", "2B0", "1B0"]])"),
                 false, {0, 1, 1, 0}, Placement::kV},
        Inferred{"StagesInsideOverlapFB",
                 HandWritten(kFourStages,
                             R"([["0F0", "3F0", "(3B0;0B0)OVERLAP_F_B"], ["1F0", "2F0", "2B0", "1B0"]])"),
                 false, {0, 1, 1, 0}, Placement::kV},
        Inferred{"WrittenVPlacement",
                 HandWritten(kFourStages, R"([[], []])", R"("placement": "v", )"), false,
                 {0, 1, 1, 0}, Placement::kV},
        Inferred{"CustomPlacementFromThePrograms",
                 HandWritten(kTwoRanks, R"([["1F0", "1B0"], ["0F0", "0B0"]])",
                             R"("placement": "custom", )"),
                 false, {1, 0}, Placement::kCustom},
        Inferred{"PlacementDetectedFromAWrittenMap",
                 HandWritten(kTwoRanks, R"([["1F0", "1B0"], ["0F0", "0B0"]])",
                             R"("stage_to_rank": [1, 0], )"),
                 false, {1, 0}, Placement::kCustom},
        Inferred{"LoopWhenAStageAppearsNowhere",
                 HandWritten(kTwoRanks, R"([["0F0", "0B0"], []])"), false, {0, 1},
                 Placement::kLoop}),
    [](const ::testing::TestParamInfo<Inferred>& param_info) { return param_info.param.name; });

// The writer keeps writing every field: a hand-written file, written back,
// reads back to the same schedule and writes the same bytes again.
TEST(ScheduleJsonTest, HandWrittenFileWritesEveryField) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleJson(HandWritten(kTwoRanks, kLowered1f1b)));
  const std::string text = ScheduleToJson(s);
  EXPECT_NE(text.find(R"("stage_to_rank": [0, 1], "lowered": true)"), std::string::npos) << text;
  ASSERT_OK_AND_ASSIGN(Schedule again, ParseScheduleJson(text));
  EXPECT_EQ(again, s);
  EXPECT_EQ(ScheduleToJson(again), text);
}

struct Contradiction {
  std::string name;
  std::string text;
  std::string error;
};

class ScheduleJsonContradictionTest : public ::testing::TestWithParam<Contradiction> {};

TEST_P(ScheduleJsonContradictionTest, NamesBothSides) {
  absl::StatusOr<Schedule> s = ParseScheduleJson(GetParam().text);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(::jitpipe::testing::Message(s.status()), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    HandWritten, ScheduleJsonContradictionTest,
    ::testing::Values(
        Contradiction{"LoweredFalseWithSend",
                      HandWritten(kTwoRanks, kLowered1f1b, R"("lowered": false, )"),
                      "\"lowered\" is false but rank 0, index 1 (\"0SEND_F0\") is a SEND_F; a "
                      "compute-only program has no SEND/RECV, WAIT, UNSHARD, RESHARD or REDUCE_GRAD"},
        Contradiction{"LoweredFalseWithReduceGrad",
                      HandWritten(kTwoRanks, R"([["0F0", "0B0"], ["1F0", "1B0", "1REDUCE_GRAD"]])",
                                  R"("lowered": false, )"),
                      "\"lowered\" is false but rank 1, index 2 (\"1REDUCE_GRAD\") is a "
                      "REDUCE_GRAD; a compute-only program has no SEND/RECV, WAIT, UNSHARD, "
                      "RESHARD or REDUCE_GRAD"},
        // The WAIT kinds (PyTorch main) are communication too.
        Contradiction{"LoweredFalseWithWaitSend",
                      HandWritten(kTwoRanks,
                                  R"([["0F0", "0B0", "0WAIT_SEND_F0"], ["1F0", "1B0"]])",
                                  R"("lowered": false, )"),
                      "\"lowered\" is false but rank 0, index 2 (\"0WAIT_SEND_F0\") is a "
                      "WAIT_SEND_F; a compute-only program has no SEND/RECV, WAIT, UNSHARD, "
                      "RESHARD or REDUCE_GRAD"},
        Contradiction{"BubbleInAnInferredLoweredProgram",
                      HandWritten(kTwoRanks, R"([["0F0", "0SEND_F0", null, "0RECV_B0", "0B0"],
                                                 ["1RECV_F0", "1F0", "1B0", "1SEND_B0"]])"),
                      "rank 0, index 2: a bubble (null) in a lowered program (lowered because "
                      "rank 0, index 1 (\"0SEND_F0\") is a SEND_F)"},
        Contradiction{"WrittenMapAgainstThePrograms",
                      HandWritten(kTwoRanks, k1f1b, R"("stage_to_rank": [1, 0], )"),
                      "rank 0, index 0 (\"0F0\"): stage 0 appears on rank 0, but "
                      "\"stage_to_rank\" puts it on rank 1"},
        Contradiction{"WrittenMapAndAStageOnTwoRanks",
                      HandWritten(kTwoRanks,
                                  R"([["0F0", "0F1", "0B0", "0B1"], ["1F0", "0F1", "1B0"]])",
                                  R"("stage_to_rank": [0, 1], )"),
                      "rank 1, index 1 (\"0F1\"): stage 0 appears on rank 1, but "
                      "\"stage_to_rank\" puts it on rank 0"},
        Contradiction{"WrittenPlacementAgainstThePrograms",
                      HandWritten(kFourStages,
                                  R"([["0F0", "2F0", "2B0", "0B0"], ["1F0", "3F0", "3B0", "1B0"]])",
                                  R"("placement": "v", )"),
                      "rank 0, index 1 (\"2F0\"): stage 2 appears on rank 0, but the v placement "
                      "puts it on rank 1"},
        Contradiction{"DefaultLoopAgainstThePrograms",
                      HandWritten(kTwoRanks, R"([["1F0", "1B0"], []])"),
                      "rank 0, index 0 (\"1F0\"): stage 1 appears on rank 0, but the loop "
                      "placement (the default without \"placement\" and \"stage_to_rank\") puts "
                      "it on rank 1"},
        Contradiction{"ProgramsWithTwoStagesOnOneRank",
                      HandWritten(kTwoRanks, R"([["0F0", "1F0", "0B0", "1B0"], []])"),
                      "rank 0, index 1 (\"1F0\"): stage 1 appears on rank 0, but the loop "
                      "placement (the default without \"placement\" and \"stage_to_rank\") puts "
                      "it on rank 1"},
        Contradiction{"InferredStageOnTwoRanks",
                      HandWritten(kTwoRanks,
                                  R"([["0F0", "0F1", "0B0", "0B1"], ["1F0", "0F1", "1B0"]])"),
                      "rank 1, index 1 (\"0F1\"): stage 0 is also on rank 0 (index 0); a stage "
                      "lives on exactly one rank"},
        Contradiction{"CustomPlacementWithAStageNowhere",
                      HandWritten(kTwoRanks, R"([["0F0", "0B0"], []])",
                                  R"("placement": "custom", )"),
                      "stage 1 appears in no program, so the \"custom\" placement needs "
                      "\"stage_to_rank\""},
        Contradiction{"TooManyStagesToInferAMap",
                      HandWritten(R"("pp": 2, "stages_per_rank": 2147483647, "microbatches": 1)",
                                  R"([["0F0"], ["1F0"]])"),
                      "pp 2 x stages_per_rank 2147483647 = 4294967294 stages, but the programs "
                      "hold only 2 actions; each stage needs a forward and a backward"},
        // The real error in the file, not a missing field.
        Contradiction{"UnknownActionWithoutTheFields",
                      HandWritten(kTwoRanks,
                                  R"([["0F0", "0F1", "0B0", "0B1"], ["1F0", "1X0", "1F1", "1B1"]])"),
                      "rank 1, index 1 (\"1X0\"): cannot parse action \"1X0\": unexpected \"X\" "
                      "at character 2; expected an action type (F, B, I, W, SEND_F, RECV_F, "
                      "SEND_B, RECV_B, WAIT_SEND_F, WAIT_SEND_B, UNSHARD, RESHARD, REDUCE_GRAD or "
                      "WAIT_REDUCE_GRAD)"}),
    [](const ::testing::TestParamInfo<Contradiction>& param_info) {
      return param_info.param.name;
    });

TEST(ScheduleJsonTest, RefusesDeepNestingBeforeParsing) {
  std::string text(100000, '[');
  absl::StatusOr<Schedule> s = ParseScheduleJson(text);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(::jitpipe::testing::Message(s.status()), "line 1, column 65: JSON nested deeper than 64 levels");
}

TEST(ScheduleJsonTest, RefusesANonObject) {
  absl::StatusOr<Schedule> s = ParseScheduleJson("[1, 2]");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(::jitpipe::testing::Message(s.status()),
            "expected a JSON object with \"format\": \"jitpipe.schedule\", found an array");
}

}  // namespace
}  // namespace jitpipe::schedule_json_test
