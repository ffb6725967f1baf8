// End-to-end runs of `jitpipe generate`: outputs, exit codes and messages.
#include <fstream>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/ir/schedule_io.h"
#include "scheduler/ir/schedule_json.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::cmd_generate_test {
namespace {

using ::jitpipe::testing::CliResult;
using ::jitpipe::testing::CsvFromJson;
using ::jitpipe::testing::JsonText;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::ProgramText;
using ::jitpipe::testing::ReadTestdataJson;
using ::jitpipe::testing::RunCli;
using ::testing::HasSubstr;

TEST(CmdGenerateTest, WritesJsonToStdout) {
  CliResult r = RunCli({"generate", "--schedule", "Interleaved1F1B", "--pp", "4",
                        "--microbatches", "8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleJson(r.out));
  EXPECT_EQ(s.name, "interleaved-1f1b");
  EXPECT_EQ(s.stages_per_rank, 2);  // the schedule's default
  EXPECT_EQ(s.stage_to_rank, (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/Interleaved1F1B_pp4_mb8_v2.json");
  EXPECT_EQ(ProgramText(s.ranks), JsonText(d["ranks"]));
}

// A CSV file is PyTorch's format exactly: one row per rank, bubbles empty.
TEST(CmdGenerateTest, WritesCsvByExtension) {
  const std::string dir = MakeTempDir("generate");
  CliResult r = RunCli({"generate", "--schedule=zbv", "--pp=4", "--microbatches=5",
                        "--stages-per-rank", "2", "-o", dir + "/zbv.csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/ZBVZeroBubble_pp4_mb5_v2.json");
  std::ifstream in(dir + "/zbv.csv");
  std::string csv((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(csv, CsvFromJson(d["ranks"]));
}

TEST(CmdGenerateTest, WritesJsonFileByExtension) {
  const std::string dir = MakeTempDir("generate");
  CliResult r = RunCli({"generate", "--schedule", "gpipe", "--pp", "2", "--microbatches", "3",
                        "-o", dir + "/g.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_OK_AND_ASSIGN(Schedule s, LoadSchedule(dir + "/g.json"));
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/GPipe_pp2_mb3_v1.json");
  EXPECT_EQ(ProgramText(s.ranks), JsonText(d["ranks_before_reduce_grad"]));
}

struct FailureCase {
  std::string name;
  std::vector<std::string> args;
  int exit_code;
  std::string err;  // the whole of stderr (exit 1) or its first line (exit 2)
};

void PrintTo(const FailureCase& c, std::ostream* os) { *os << c.name; }

class CmdGenerateFailureTest : public ::testing::TestWithParam<FailureCase> {};

TEST_P(CmdGenerateFailureTest, ExitsWithTheMessage) {
  std::vector<std::string> args = {"generate"};
  args.insert(args.end(), GetParam().args.begin(), GetParam().args.end());
  CliResult r = RunCli(args);
  EXPECT_EQ(r.exit_code, GetParam().exit_code) << r.err;
  EXPECT_EQ(r.out, "");
  if (GetParam().exit_code == 1) {
    EXPECT_EQ(r.err, GetParam().err);
  } else {
    EXPECT_EQ(r.err.substr(0, r.err.find('\n') + 1), GetParam().err);
    EXPECT_THAT(r.err, HasSubstr("(see: jitpipe generate --help)"));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CmdGenerateFailureTest,
    ::testing::Values(
        FailureCase{"RoundsNotFilled",
                    {"--schedule", "interleaved-1f1b", "--pp", "4", "--microbatches", "9"},
                    1,
                    "jitpipe generate: interleaved-1f1b: 9 microbatches is not a multiple of "
                    "max(1, 9 // 4) = 2; use 8 or 10\n"},
        FailureCase{"TooFewForDualPipeV",
                    {"--schedule", "DualPipeV", "--pp", "4", "--microbatches", "5"},
                    1,
                    "jitpipe generate: dualpipev: needs at least 2 x pp = 8 microbatches (2 "
                    "stages per rank x 4 ranks), got 5\n"},
        FailureCase{"WrongStagesPerRank",
                    {"--schedule", "zbv", "--pp", "4", "--microbatches", "8",
                     "--stages-per-rank", "4"},
                    1,
                    "jitpipe generate: zbv: needs exactly 2 stages per rank, got 4\n"},
        FailureCase{"ZeroRanks",
                    {"--schedule", "gpipe", "--pp", "0", "--microbatches", "8"},
                    1,
                    "jitpipe generate: gpipe: pp must be at least 1, got 0\n"},
        FailureCase{"MissingSchedule",
                    {"--pp", "4", "--microbatches", "8"},
                    2,
                    "jitpipe generate: missing --schedule; usage: jitpipe generate --schedule "
                    "NAME --pp P --microbatches M [--stages-per-rank V] [-o FILE]\n"},
        FailureCase{"MissingMicrobatches",
                    {"--schedule", "gpipe", "--pp", "4"},
                    2,
                    "jitpipe generate: missing --microbatches; usage: jitpipe generate "
                    "--schedule NAME --pp P --microbatches M [--stages-per-rank V] [-o FILE]\n"},
        FailureCase{"NotANumber",
                    {"--schedule", "gpipe", "--pp", "four", "--microbatches", "8"},
                    2,
                    "jitpipe generate: bad value \"four\" for --pp: Illegal value 'four' "
                    "specified for flag 'pp'\n"},
        FailureCase{"UnknownOutputExtension",
                    {"--schedule", "gpipe", "--pp", "2", "--microbatches", "2", "-o", "x.txt"},
                    2,
                    "jitpipe generate: x.txt: the output name must end in .json or .csv\n"},
        FailureCase{"UnexpectedPositional",
                    {"--schedule", "gpipe", "--pp", "2", "--microbatches", "2", "extra"},
                    2,
                    "jitpipe generate: unexpected argument \"extra\"; usage: jitpipe generate "
                    "--schedule NAME --pp P --microbatches M [--stages-per-rank V] [-o FILE]\n"}),
    [](const ::testing::TestParamInfo<FailureCase>& test) { return test.param.name; });

TEST(CmdGenerateTest, UnknownScheduleIsAUsageErrorListingTheKnownNames) {
  CliResult r = RunCli({"generate", "--schedule", "pipedream", "--pp", "4", "--microbatches", "8"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("jitpipe generate: unknown schedule \"pipedream\"; known: gpipe, "
                               "1f1b, interleaved-1f1b, looped-bfs, interleaved-zb, zbv, "
                               "dualpipev"));
}

TEST(CmdGenerateTest, HelpListsTheSchedules) {
  CliResult r = RunCli({"generate", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("usage: jitpipe generate --schedule NAME"));
  EXPECT_THAT(r.out, HasSubstr("interleaved-zb (InterleavedZeroBubble)"));
  EXPECT_THAT(r.out, HasSubstr("--stages-per-rank"));
}

}  // namespace
}  // namespace jitpipe::cmd_generate_test
