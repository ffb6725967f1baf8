// End-to-end runs of `jitpipe render`: the SVG written, exit codes.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/testdata.h"

namespace jitpipe::cmd_render_test {
namespace {

using ::jitpipe::testing::CliResult;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::RunCli;
using ::jitpipe::testing::WriteTextFile;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

class CmdRenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("render");
    schedule_ = dir_ + "/zbv.json";
    CliResult r = RunCli({"generate", "--schedule", "zbv", "--pp", "4", "--microbatches", "8",
                          "-o", schedule_});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  std::string dir_, schedule_;
};

// Unit costs: ZB-V's makespan 51, every block 1 unit wide.
TEST_F(CmdRenderTest, DrawsUnitWidthsWithoutAModel) {
  const std::string out = dir_ + "/zbv.svg";
  CliResult r = RunCli({"render", schedule_, "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  const std::string svg = ReadFile(out);
  EXPECT_THAT(svg, StartsWith("<?xml"));
  EXPECT_THAT(svg, HasSubstr("zbv  pp 4, 8 stages, 8 microbatches: makespan 51 units"));
  EXPECT_THAT(svg, HasSubstr(">rank 3</text>"));
  EXPECT_THAT(svg, HasSubstr("<title>rank 0: 0F0, 0 to 1 units of F</title>"));
  EXPECT_THAT(svg, HasSubstr(">W  weight grad, later stage</text>"));
  EXPECT_THAT(svg, Not(HasSubstr("gradient reduction")));  // free without data parallelism
}

TEST_F(CmdRenderTest, DrawsModelTimesAndReductions) {
  WriteTextFile(dir_ + "/m.json", R"({"format": "jitpipe.model", "version": 1,
   "defaults": {"forward_us": 10, "backward_input_us": 10, "backward_weight_us": 10,
                "param_bytes": 4000},
   "dp": {"size": 2, "gb_per_s": 1}})");
  const std::string out = dir_ + "/m.svg";
  CliResult r = RunCli({"render", schedule_, "-o", out, "--model", dir_ + "/m.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string svg = ReadFile(out);
  EXPECT_THAT(svg, HasSubstr("<title>rank 0: 0F0, 0 to 10 us</title>"));
  EXPECT_THAT(svg, HasSubstr(">gradient reduction</text>"));
  EXPECT_THAT(svg, HasSubstr("REDUCE_GRAD bucket 0, "));
}

TEST_F(CmdRenderTest, ExitCodes) {
  EXPECT_EQ(RunCli({"render", schedule_}).exit_code, 2);
  EXPECT_EQ(RunCli({"render", schedule_, "-o", dir_ + "/x.png"}).exit_code, 2);
  EXPECT_EQ(RunCli({"render", schedule_, "-o", dir_ + "/x.svg", "--model", dir_ + "/none.json"})
                .exit_code,
            1);
  EXPECT_EQ(RunCli({"render", dir_ + "/none.json", "-o", dir_ + "/x.svg"}).exit_code, 1);
}

// The extension is matched as file systems that ignore case would: x.SVG is
// an SVG.
TEST_F(CmdRenderTest, AnUpperCaseExtensionIsAnSvg) {
  EXPECT_EQ(RunCli({"render", schedule_, "-o", dir_ + "/x.SVG"}).exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/x.SVG"));
}

}  // namespace
}  // namespace jitpipe::cmd_render_test
