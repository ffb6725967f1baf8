// End-to-end runs of the jitpipe binary: exit codes, messages and outputs.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/conformance.h"
#include "tests/testing/testdata.h"

namespace jitpipe::cli_test {
namespace {

using ::jitpipe::testing::CliResult;
using ::jitpipe::testing::CsvFromJson;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::ReadTestdataJson;
using ::jitpipe::testing::RunCli;
using ::jitpipe::testing::TestdataPath;
using ::jitpipe::testing::WriteTextFile;
using ::testing::HasSubstr;

TEST(CliTest, ShowPrintsPyTorchsGrid) {
  std::string dir = MakeTempDir("cli");
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/InterleavedZeroBubble_pp4_mb8_v2.json");
  WriteTextFile(dir + "/s.csv", CsvFromJson(d["ranks"]));
  CliResult r = RunCli({"show", dir + "/s.csv"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, d["formatted"].get<std::string>());
}

TEST(CliTest, ConvertRoundTripsCsvThroughJson) {
  std::string dir = MakeTempDir("cli");
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/DualPipeV_pp4_mb8_v2.json");
  const std::string csv = CsvFromJson(d["ranks"]);
  WriteTextFile(dir + "/s.csv", csv);
  ASSERT_EQ(RunCli({"convert", dir + "/s.csv", "-o", dir + "/s.json"}).exit_code, 0);
  ASSERT_EQ(RunCli({"convert", dir + "/s.json", "--output", dir + "/back.csv"}).exit_code, 0);
  CliResult show = RunCli({"show", dir + "/back.csv"});
  CliResult original = RunCli({"show", dir + "/s.csv"});
  EXPECT_EQ(show.out, original.out);
}

TEST(CliTest, ValidateSummarisesAValidSchedule) {
  CliResult r = RunCli({"validate", TestdataPath("conformance/real/torchtitan_4-rank.csv")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("ok: pp 4, 8 stages (loop placement), 6 microbatches"));
}

TEST(CliTest, InvalidInputExitsOneNamingFileRankIndexAndAction) {
  std::string dir = MakeTempDir("cli");
  WriteTextFile(dir + "/bad.csv", "0F0,0F1,0B0,0B1\n1B0,1F0,1F1,1B1\n");
  CliResult r = RunCli({"validate", dir + "/bad.csv"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "jitpipe validate: " + dir +
                       "/bad.csv: rank 1, index 0 (1B0): full backward of stage 1 microbatch 0 "
                       "comes before its forward\n");
}

TEST(CliTest, MissingFileExitsOne) {
  CliResult r = RunCli({"show", "/nonexistent/s.json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/s.json: no such file"));
}

struct UsageCase {
  std::string name;
  std::vector<std::string> args;
  std::string message;
};

class CliUsageTest : public ::testing::TestWithParam<UsageCase> {};

TEST_P(CliUsageTest, ExitsTwoWithAMessage) {
  CliResult r = RunCli(GetParam().args);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Usage, CliUsageTest,
    ::testing::Values(
        UsageCase{"NoCommand", {}, "usage: jitpipe <command>"},
        UsageCase{"UnknownCommand", {"frobnicate"}, "unknown command \"frobnicate\""},
        UsageCase{"MissingFile", {"show"}, "missing argument; usage: jitpipe show FILE"},
        UsageCase{"ExtraArgument", {"show", "a", "b"}, "unexpected argument \"b\""},
        UsageCase{"UnknownOption", {"show", "a.csv", "--bogus"}, "unknown option --bogus"},
        UsageCase{"OptionOfAnotherCommand", {"show", "a.csv", "-o", "x.csv"},
                  "unknown option -o for 'show'"},
        UsageCase{"MissingOutput", {"convert", "a.csv"}, "missing -o OUT"},
        UsageCase{"BadOutputExtension", {"convert", "a.csv", "-o", "x.yaml"},
                  "the output name must end in .json or .csv"},
        UsageCase{"OptionWithoutValue", {"convert", "a.csv", "-o"}, "option -o needs a value"}),
    [](const ::testing::TestParamInfo<UsageCase>& param_info) { return param_info.param.name; });

TEST(CliTest, VersionPrintsTheProjectVersionAndExitsZero) {
  CliResult r = RunCli({"--version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::MatchesRegex("jitpipe [0-9]+\\.[0-9]+\\.[0-9]+\n"));
  EXPECT_EQ(r.err, "");
}

TEST(CliTest, HelpForEachCommandExitsZero) {
  for (const char* command : {"show", "convert", "validate"}) {
    CliResult r = RunCli({command, "--help"});
    EXPECT_EQ(r.exit_code, 0) << command;
    EXPECT_THAT(r.out, HasSubstr(std::string("usage: jitpipe ") + command));
  }
  CliResult r = RunCli({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("validate"));
}

}  // namespace
}  // namespace jitpipe::cli_test
