// End-to-end runs of `jitpipe compare`: the table, --json, skipped
// schedules, exit codes.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/testdata.h"

namespace jitpipe::cmd_compare_test {
namespace {

using ::jitpipe::testing::CliResult;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::RunCli;
using ::jitpipe::testing::WriteTextFile;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kUnitModel[] = R"({"format": "jitpipe.model", "version": 1,
 "defaults": {"forward_us": 1, "backward_input_us": 1, "backward_weight_us": 1,
              "stash_bytes": 1024}})";

class CmdCompareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("compare");
    model_ = dir_ + "/unit.json";
    WriteTextFile(model_, kUnitModel);
  }
  std::string dir_, model_;
};

// v = 2 at pp 4, m 8: the V and interleaved schedules and DualPipe, sorted
// by makespan (DualPipe's 26 first); the single-stage ones are skipped.
TEST_F(CmdCompareTest, JsonSortsByMakespanAndListsTheSkipped) {
  CliResult r = RunCli({"compare", "--pp", "4", "--microbatches", "8", "--stages-per-rank", "2",
                        "--model", model_, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["pp"], 4);
  EXPECT_EQ(j["stages_per_rank"], 2);
  const nlohmann::json& rows = j["schedules"];
  ASSERT_GE(rows.size(), 6u);
  EXPECT_EQ(rows[0]["schedule"], "dualpipe");
  EXPECT_EQ(rows[0]["makespan_us"], 26);
  EXPECT_EQ(rows[0]["best"], true);
  EXPECT_EQ(rows[0]["work"], 8);
  for (size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i]["best"], false);
    EXPECT_LE(rows[i - 1]["makespan_us"].get<double>(), rows[i]["makespan_us"].get<double>());
    for (const char* key : {"bubble_fraction", "span_bubble_fraction", "exposed_reduce_us",
                            "jit_peak_bytes", "eager_peak_bytes", "arena_bytes"}) {
      EXPECT_TRUE(rows[i].contains(key)) << key;
    }
    EXPECT_LE(rows[i]["jit_peak_bytes"].get<int64_t>(), rows[i]["eager_peak_bytes"].get<int64_t>());
  }
  bool gpipe_skipped = false;
  for (const nlohmann::json& s : j["skipped"]) {
    if (s["schedule"] == "gpipe") {
      gpipe_skipped = true;
      EXPECT_FALSE(s["reason"].get<std::string>().empty());
    }
  }
  EXPECT_TRUE(gpipe_skipped);
}

TEST_F(CmdCompareTest, TableMarksTheBestAndSaysWhatWasSkipped) {
  CliResult r = RunCli({"compare", "--pp", "4", "--microbatches", "8", "--stages-per-rank", "2",
                        "--model", model_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("pp 4, 8 microbatches; sorted by makespan, * = best"));
  EXPECT_THAT(r.out, HasSubstr("\n* dualpipe            2      8        26 us "));
  EXPECT_THAT(r.out, HasSubstr("\n  zbv                 2     16        51 us "));
  EXPECT_THAT(r.out, HasSubstr("note: work = stage-microbatch pairs per rank"));
  EXPECT_THAT(r.out, HasSubstr("not valid for these parameters:\n  gpipe: needs exactly 1 stage "
                               "per rank, got 2\n"));
}

TEST_F(CmdCompareTest, DefaultStagesPerRankMixesAndSaysSo) {
  CliResult r = RunCli({"compare", "--pp", "2", "--microbatches", "4", "--model", model_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("  gpipe               1      4 "));
  EXPECT_THAT(r.out, HasSubstr("  zbv                 2      8 "));
  EXPECT_THAT(r.out, HasSubstr("note: work = stage-microbatch pairs per rank"));
}

TEST_F(CmdCompareTest, ExitCodes) {
  EXPECT_EQ(RunCli({"compare", "--pp", "4", "--model", model_}).exit_code, 2);
  EXPECT_EQ(RunCli({"compare", "--pp", "4", "--microbatches", "8"}).exit_code, 2);
  EXPECT_EQ(RunCli({"compare", "--pp", "0", "--microbatches", "8", "--model", model_}).exit_code,
            2);
  // Beyond the generators' size limit, every schedule refuses.
  CliResult none = RunCli({"compare", "--pp", "1024", "--microbatches", "1024",
                           "--stages-per-rank", "32", "--model", model_});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_THAT(none.err, HasSubstr(
      "jitpipe compare: no schedule accepts pp 1024, 1024 microbatches, 32 stages per rank\n"));
  EXPECT_EQ(RunCli({"compare", "--pp", "4", "--microbatches", "8", "--model",
                    dir_ + "/none.json"}).exit_code, 1);
}

}  // namespace
}  // namespace jitpipe::cmd_compare_test
