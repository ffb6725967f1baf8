// The fast path of the JSON schedule reader takes well-formed documents only
// and leaves every other shape to the exact reader (schedule_json_scan.h):
// what it takes it reads as the exact reader does.
#include "scheduler/ir/schedule_json_scan.h"

#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"
#include "scheduler/ir/schedule_json.h"
#include "scheduler/passes/lower.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::schedule_json_scan_test {
namespace {

constexpr char kValid[] = R"({"format": "jitpipe.schedule", "version": 1, "schedule": "gpipe",
 "pp": 2, "stages_per_rank": 1, "microbatches": 2, "placement": "loop",
 "stage_to_rank": [0, 1], "lowered": false,
 "ranks": [["0F0", "0F1", null, "0B0", "0B1"], [null, "1F0", "1F1", "1B0", "1B1"]]})";

TEST(ScheduleJsonScanTest, ReadsTheHeaderAndThePrograms) {
  std::optional<ScannedScheduleJson> scanned = ScanScheduleJson(kValid);
  ASSERT_TRUE(scanned.has_value());
  EXPECT_EQ(scanned->header["pp"], 2);
  EXPECT_EQ(scanned->header["stage_to_rank"], nlohmann::json::array({0, 1}));
  EXPECT_FALSE(scanned->header.contains("ranks"));
  ASSERT_EQ(scanned->ranks.size(), 2u);
  EXPECT_EQ(scanned->ranks[0][2], Action::Bubble());
  EXPECT_EQ(scanned->ranks[1][4], Action::Make(ActionKind::kBackward, 1, 1));
}

// Every kind, a compound and spaces inside action strings read as the exact
// reader reads them.
TEST(ScheduleJsonScanTest, ReadsWhatTheExactReaderReads) {
  const std::string text = R"({"format": "jitpipe.schedule", "version": 1, "pp": 1,
 "stages_per_rank": 2, "microbatches": 1, "lowered": true, "ranks": [[
 "0UNSHARD", "0F0", "0SEND_F0", " 1RECV_F0", "1F0", "(1I0;1W0)OVERLAP_F_B", "1SEND_B0",
 "0RECV_B0", "0B0", "0WAIT_SEND_F0", "1WAIT_SEND_B0", "0REDUCE_GRAD", "0WAIT_REDUCE_GRAD",
 "0RESHARD", "1REDUCE_GRAD"]]})";
  std::optional<ScannedScheduleJson> scanned = ScanScheduleJson(text);
  ASSERT_TRUE(scanned.has_value());
  ASSERT_EQ(scanned->ranks.size(), 1u);
  std::vector<std::string> read;
  for (const Action& a : scanned->ranks[0]) read.push_back(a.ToString());
  EXPECT_EQ(read, (std::vector<std::string>{
                      "0UNSHARD", "0F0", "0SEND_F0", "1RECV_F0", "1F0", "(1I0;1W0)OVERLAP_F_B",
                      "1SEND_B0", "0RECV_B0", "0B0", "0WAIT_SEND_F0", "1WAIT_SEND_B0",
                      "0REDUCE_GRAD", "0WAIT_REDUCE_GRAD", "0RESHARD", "1REDUCE_GRAD"}));
}

// A large lowered program written and read back.
TEST(ScheduleJsonScanTest, ReadsBackWhatTheWriterWrites) {
  ASSERT_OK_AND_ASSIGN(Schedule generated, Generate({.schedule = "interleaved-1f1b",
                                                     .pp = 4,
                                                     .microbatches = 8,
                                                     .stages_per_rank = 2}));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(generated));
  const std::string text = ScheduleToJson(lowered);
  std::optional<ScannedScheduleJson> scanned = ScanScheduleJson(text);
  ASSERT_TRUE(scanned.has_value());
  EXPECT_EQ(scanned->ranks, lowered.ranks);
  ASSERT_OK_AND_ASSIGN(Schedule read, ParseScheduleJson(text));
  EXPECT_EQ(read, lowered);
}

struct Deferred {
  std::string name;
  std::string from, to;  // replace `from` in kValid with `to`
};

class ScheduleJsonScanDefersTest : public ::testing::TestWithParam<Deferred> {};

// Shapes the fast path does not take: the exact reader reads (or refuses)
// them and its message is the only one a user sees.
TEST_P(ScheduleJsonScanDefersTest, ToTheExactReader) {
  std::string text = kValid;
  const size_t at = text.find(GetParam().from);
  ASSERT_NE(at, std::string::npos) << GetParam().from;
  text.replace(at, GetParam().from.size(), GetParam().to);
  EXPECT_FALSE(ScanScheduleJson(text).has_value()) << text;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ScheduleJsonScanDefersTest,
    ::testing::Values(
        Deferred{"ByteOrderMark", "{\"format\"", "\xEF\xBB\xBF{\"format\""},
        Deferred{"EscapeInAction", "\"0F1\"", "\"0F\\u0031\""},
        Deferred{"EscapeInKey", "\"pp\"", "\"p\\u0070\""},
        Deferred{"NonAsciiInAction", "\"0F1\"", "\"0F1\xC3\xA9\""},
        Deferred{"DuplicateKey", "\"pp\": 2,", "\"pp\": 2, \"pp\": 2,"},
        Deferred{"BadAction", "\"0F1\"", "\"0F1x\""},
        Deferred{"NumberAsAction", "\"0F1\"", "1"},
        Deferred{"NotNull", "null", "nul"},
        Deferred{"TrailingComma", "\"1B1\"]]", "\"1B1\",]]"},
        Deferred{"TrailingText", "\"1B1\"]]}", "\"1B1\"]]} x"},
        Deferred{"BadHeaderValue", "\"pp\": 2", "\"pp\": 2x"},
        Deferred{"HeaderValueStartingOddly", "\"pp\": 2", "\"pp\": \xEF\xBB\xBF" "2"},
        Deferred{"DeepHeaderValue", "\"stage_to_rank\": [0, 1]",
                 "\"stage_to_rank\": [[[[[[[[[0]]]]]]]]]"},
        Deferred{"RanksNotArrays", "[\"0F0\", \"0F1\", null, \"0B0\", \"0B1\"]", "{}"},
        Deferred{"NoRanks", "\"ranks\"", "\"other\""},
        Deferred{"ControlCharacterInAction", "\"0F1\"", "\"0F1\t\""},
        Deferred{"BackslashAtTheEnd", "\"1B1\"]]}", "\"1B1\"]], \"x\": \"\\"}),
    [](const ::testing::TestParamInfo<Deferred>& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace jitpipe::schedule_json_scan_test
