#include "scheduler/ir/schedule_csv.h"

#include <string>

#include "gtest/gtest.h"
#include "scheduler/ir/schedule_json.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::schedule_csv_test {
namespace {

using ::jitpipe::testing::CsvFromJson;
using ::jitpipe::testing::PytorchConformanceNames;
using ::jitpipe::testing::ReadTestdata;
using ::jitpipe::testing::ReadTestdataJson;

class CsvConformanceTest : public ::testing::TestWithParam<std::string> {};

// Every order in the golden files survives CSV -> IR -> CSV and
// CSV -> IR -> JSON -> IR -> CSV unchanged.
TEST_P(CsvConformanceTest, EveryOrderRoundTrips) {
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/" + GetParam() + ".json");
  if (d.contains("error")) GTEST_SKIP() << "PyTorch refuses these parameters";
  for (const char* key : {"ranks", "ranks_before_reduce_grad", "ranks_with_comms",
                          "ranks_send_recv_only", "ranks_runtime_equivalent",
                          "ranks_before_add_bubbles"}) {
    if (!d.contains(key)) continue;
    SCOPED_TRACE(key);
    const std::string csv = CsvFromJson(d[key]);
    ASSERT_OK_AND_ASSIGN(Schedule schedule, ParseScheduleCsv(csv));
    EXPECT_EQ(ScheduleToCsv(schedule), csv);
    ASSERT_OK_AND_ASSIGN(Schedule from_json, ParseScheduleJson(ScheduleToJson(schedule)));
    EXPECT_EQ(from_json, schedule);
    EXPECT_EQ(ScheduleToCsv(from_json), csv);
  }
}

// A JSON file without "placement", "stage_to_rank" and "lowered" (as a
// hand-written one may be) infers them exactly as the CSV reader does.
TEST_P(CsvConformanceTest, JsonWithoutTheInferredFieldsReadsAsTheCsv) {
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/" + GetParam() + ".json");
  if (d.contains("error")) GTEST_SKIP() << "PyTorch refuses these parameters";
  for (const char* key : {"ranks", "ranks_with_comms", "ranks_send_recv_only"}) {
    if (!d.contains(key)) continue;
    SCOPED_TRACE(key);
    ASSERT_OK_AND_ASSIGN(Schedule from_csv, ParseScheduleCsv(CsvFromJson(d[key])));
    nlohmann::json doc = nlohmann::json::parse(ScheduleToJson(from_csv));
    for (const char* field : {"placement", "stage_to_rank", "lowered"}) doc.erase(field);
    ASSERT_OK_AND_ASSIGN(Schedule from_json, ParseScheduleJson(doc.dump()));
    EXPECT_EQ(from_json, from_csv);
  }
}

INSTANTIATE_TEST_SUITE_P(Pytorch, CsvConformanceTest,
                         ::testing::ValuesIn(PytorchConformanceNames()));

// PyTorch main's explicit waits (WAIT_SEND_F, WAIT_SEND_B, WAIT_REDUCE_GRAD)
// read and write byte for byte, through CSV and through JSON, and make a
// program lowered.
TEST(CsvTest, WaitActionsRoundTripByteForByte) {
  const std::string csv = ReadTestdata("wait_actions/1f1b_pp2_m2.csv");
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(csv));
  EXPECT_TRUE(s.lowered);
  EXPECT_EQ(s.microbatches, 2);
  EXPECT_EQ(s.ranks[0][6], Action::Make(ActionKind::kWaitSendF, 0, 0));
  EXPECT_EQ(s.ranks[1][8], Action::Make(ActionKind::kWaitSendB, 1, 0));
  EXPECT_EQ(s.ranks[0][11], Action::StageWide(ActionKind::kWaitReduceGrad, 0));
  EXPECT_EQ(ScheduleToCsv(s), csv);
  const std::string json = ScheduleToJson(s);
  EXPECT_NE(json.find("\"0WAIT_SEND_F0\""), std::string::npos);
  ASSERT_OK_AND_ASSIGN(Schedule from_json, ParseScheduleJson(json));
  EXPECT_EQ(from_json, s);
  EXPECT_EQ(ScheduleToJson(from_json), json);
  EXPECT_EQ(ScheduleToCsv(from_json), csv);
}

TEST(CsvTest, InfersParametersAsPyTorchDoes) {
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/Interleaved1F1B_pp4_mb8_v2.json");
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(CsvFromJson(d["ranks"])));
  EXPECT_EQ(s.pp, 4);
  EXPECT_EQ(s.stages_per_rank, 2);
  EXPECT_EQ(s.microbatches, 8);
  EXPECT_EQ(s.placement, Placement::kLoop);
  EXPECT_EQ(s.stage_to_rank, (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_FALSE(s.lowered);

  ASSERT_OK_AND_ASSIGN(Schedule lowered, ParseScheduleCsv(CsvFromJson(d["ranks_with_comms"])));
  EXPECT_TRUE(lowered.lowered);
}

TEST(CsvTest, InfersVPlacementFromTheRows) {
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/ZBVZeroBubble_pp4_mb8_v2.json");
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(CsvFromJson(d["ranks"])));
  EXPECT_EQ(s.placement, Placement::kV);
  EXPECT_EQ(s.stage_to_rank, (std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0}));
}

TEST(CsvTest, ReadsTheRealFilesFromPyTorchAndTorchtitan) {
  ASSERT_OK_AND_ASSIGN(Schedule dualpipev,
                       ParseScheduleCsv(ReadTestdata("conformance/real/dualpipev_4rank_10mb.csv")));
  EXPECT_EQ(dualpipev.pp, 4);
  EXPECT_EQ(dualpipev.placement, Placement::kV);
  EXPECT_EQ(dualpipev.microbatches, 10);

  ASSERT_OK_AND_ASSIGN(Schedule example,
                       ParseScheduleCsv(ReadTestdata("conformance/real/torchtitan_example.csv")));
  EXPECT_TRUE(example.lowered);
  EXPECT_EQ(example.num_stages(), 4);
  EXPECT_EQ(example.microbatches, 4);

  ASSERT_OK_AND_ASSIGN(Schedule four,
                       ParseScheduleCsv(ReadTestdata("conformance/real/torchtitan_4-rank.csv")));
  EXPECT_EQ(four.num_stages(), 8);
  EXPECT_EQ(four.microbatches, 6);
}

TEST(CsvTest, LegacyNamesReadBAsInputBackwardWhenAWFollows) {
  const std::string legacy = ReadTestdata("conformance/real/zb1p_2rank_2stagep_compute.csv");
  ASSERT_OK_AND_ASSIGN(Schedule plain, ParseScheduleCsv(legacy));
  EXPECT_EQ(plain.ranks[0][5].ToString(), "2B0");
  ASSERT_OK_AND_ASSIGN(Schedule renamed,
                       ParseScheduleCsv(legacy, CsvReadOptions{.legacy_backward_names = true}));
  EXPECT_EQ(renamed.ranks[0][5].ToString(), "2I0");
  EXPECT_EQ(renamed.ranks[0][3], Action::Bubble());
}

TEST(CsvTest, KeepsTrailingBubblesAndEmptyRows) {
  const std::string csv = "0F0,,0B0,\n\n";
  // Rank 1 holds nothing, so stage inference fails; a one-stage layout works:
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv("0F0,,0B0,\n"));
  EXPECT_EQ(s.ranks[0].size(), 4u);
  EXPECT_EQ(ScheduleToCsv(s), "0F0,,0B0,\n");
  EXPECT_FALSE(ParseScheduleCsv(csv).ok());
}

TEST(CsvTest, AcceptsCrLfAndQuotedCells) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv("\"0F0\",0B0\r\n"));
  EXPECT_EQ(ScheduleToCsv(s), "0F0,0B0\n");
}

TEST(CsvTest, QuotedCellsMayHoldCommasQuotesAndTextAfterTheQuote) {
  // `"0F"0` is the cell 0F0 (RFC 4180 readers join the parts, as Python's
  // csv module does); `""` is a quoted empty cell, a bubble; a comma ending
  // the text is followed by one empty cell.
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv("\"0F\"0,\"\",0B0,"));
  ASSERT_EQ(s.ranks[0].size(), 4u);
  EXPECT_EQ(ScheduleToCsv(s), "0F0,,0B0,\n");
  absl::StatusOr<Schedule> comma = ParseScheduleCsv("\"0F0,x\",0B0\n");
  EXPECT_EQ(::jitpipe::testing::Message(comma.status()),
            "line 1, cell 1 (rank 0, index 0) \"0F0,x\": cannot parse action \"0F0,x\": "
            "unexpected \",\" at character 4; expected the end of the action");
}

// What a CSV costs is its actions: each row's program is reserved once from
// its commas, and no table of cells is built beside it (5 MB of commas took
// 535 MB when every cell was a string first; issue 35).
TEST(CsvTest, ARowReservesExactlyItsCells) {
  std::string row = "0F0";
  for (int i = 0; i < 100000; ++i) row += ',';
  row += "0B0\n";
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(row));
  ASSERT_EQ(s.ranks[0].size(), 100001u);
  EXPECT_EQ(s.ranks[0].capacity(), 100001u);
}

TEST(CsvTest, ALoneBubbleIsQuotedAsPythonDoes) {
  Schedule s;
  s.ranks = {{Action::Bubble()}};
  EXPECT_EQ(ScheduleToCsv(s), "\"\"\n");
}

struct BadCsv {
  std::string name;
  std::string text;
  std::string error;
};

class CsvErrorTest : public ::testing::TestWithParam<BadCsv> {};

TEST_P(CsvErrorTest, NamesWhereAndWhat) {
  absl::StatusOr<Schedule> s = ParseScheduleCsv(GetParam().text);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(::jitpipe::testing::Message(s.status()), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, CsvErrorTest,
    ::testing::Values(
        BadCsv{"Empty", "", "the CSV is empty: expected one row per rank"},
        BadCsv{"BadCell", "0F0,0B0\n1F0,1F1x\n",
               "line 2, cell 2 (rank 1, index 1) \"1F1x\": cannot parse action \"1F1x\": "
               "unexpected \"x\" at character 4; expected the end of the action"},
        BadCsv{"StageOnTwoRanks", "0F0,1F0\n1B0,0B0\n",
               "line 2, cell 1 (rank 1, index 0) \"1B0\": stage 1 is also on rank 0 (index 1); "
               "a stage lives on exactly one rank"},
        BadCsv{"StageGap", "0F0,0B0\n2F0,2B0\n",
               "stage 1 appears on no rank, but stage 2 does; stages must be numbered 0.. "
               "without gaps"},
        BadCsv{"Uneven", "0F0,2F0,1F0\n3F0\n",
               "rank 0 (line 1) holds 3 stages; every rank must hold 2 (4 stages over 2 ranks)"},
        BadCsv{"UnclosedQuote", "0F0,\"0B0\n", "line 1: a quoted cell is not closed"},
        BadCsv{"BubbleInLowered", "0F0,0SEND_F0,\n1RECV_F0,1F0\n",
               "line 1, cell 3 (rank 0, index 2): an empty cell (a bubble) in a lowered "
               "program; PyTorch's compute_comms format has none"},
        BadCsv{"OnlyBubbles", ",,\n", "the CSV holds no actions"}),
    [](const ::testing::TestParamInfo<BadCsv>& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace jitpipe::schedule_csv_test
