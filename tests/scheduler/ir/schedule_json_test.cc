#include "scheduler/ir/schedule_json.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe {
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
}  // namespace jitpipe
