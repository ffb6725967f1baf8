// End-to-end runs of `jitpipe render`: the SVG written, exit codes.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/svg_structure.h"
#include "tests/testing/testdata.h"

namespace jitpipe::cmd_render_test {
namespace {

using ::jitpipe::testing::CliResult;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::ParsedSvg;
using ::jitpipe::testing::ParseSvg;
using ::jitpipe::testing::RunCli;
using ::jitpipe::testing::SvgLayoutProblems;
using ::jitpipe::testing::WriteTextFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
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
  EXPECT_THAT(SvgLayoutProblems(svg), IsEmpty());
  const ParsedSvg p = ParseSvg(svg);
  ASSERT_EQ(p.OfClass("title").size(), 1u);
  EXPECT_EQ(p.OfClass("title")[0]->text,
            "zbv: pp 4, v 2, m 8, 8 stages; makespan 51 units of F, bubble 5.9%; unit costs");
  EXPECT_THAT(svg, HasSubstr(">rank 3</text>"));
  EXPECT_THAT(svg, HasSubstr("<title>rank 0: 0F0, 0 to 1 units of F</title>"));
  EXPECT_THAT(svg, HasSubstr(">W  weight grad, later stage</text>"));
  EXPECT_THAT(svg, HasSubstr(">time (units of F)</text>"));
  // Rank 0 holds stages 0 and 7: its first block is 0F0, labelled stage/microbatch.
  EXPECT_EQ(p.OfClass("label")[0]->text, "0/0");
  for (const auto* legend : p.OfClass("legend")) {  // free without data parallelism
    EXPECT_NE(legend->text, "gradient reduction");
  }
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
  EXPECT_THAT(SvgLayoutProblems(svg), IsEmpty());
  EXPECT_THAT(svg, HasSubstr("<title>rank 0: 0F0, 0 to 10 us</title>"));
  EXPECT_THAT(svg, HasSubstr(">gradient reduction</text>"));
  EXPECT_THAT(svg, HasSubstr(">time (us)</text>"));
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

// Bad --width and --row-height values are usage errors naming the flag.
TEST_F(CmdRenderTest, RefusesBadSizes) {
  const std::vector<std::vector<std::string>> cases = {
      {"--width", "99"},        {"--width", "-1"},        {"--width", "200001"},
      {"--width", "wide"},      {"--width", "1.5"},       {"--row-height", "7"},
      {"--row-height", "201"},  {"--row-height", "tall"}};
  for (const std::vector<std::string>& flag : cases) {
    std::vector<std::string> args = {"render", schedule_, "-o", dir_ + "/bad.svg"};
    args.insert(args.end(), flag.begin(), flag.end());
    CliResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 2) << flag[0] << " " << flag[1];
    EXPECT_THAT(r.err, HasSubstr(flag[0])) << flag[1];
    EXPECT_FALSE(std::filesystem::exists(dir_ + "/bad.svg"));
  }
}

struct DiagramCase {
  std::string name;
  std::vector<std::string> generate;  // generate's flags
  std::vector<std::string> render;    // render's extra flags
  bool model;                         // under a model with p2p and dp costs
  double width;                       // the plot width expected; 0: not checked
  double row_height;
  bool labelled;  // some block has room for a label
};

class RenderDiagramTest : public ::testing::TestWithParam<DiagramCase> {};

// Whatever the schedule and sizes: well-formed, labels inside their blocks,
// the title and legend inside the page, round ticks; --width and
// --row-height honoured; the title names the schedule, pp, v, m, makespan.
TEST_P(RenderDiagramTest, IsReadable) {
  const DiagramCase& c = GetParam();
  const std::string dir = MakeTempDir("render_" + c.name);
  std::vector<std::string> generate = {"generate", "-o", dir + "/s.json"};
  generate.insert(generate.end(), c.generate.begin(), c.generate.end());
  CliResult g = RunCli(generate);
  ASSERT_EQ(g.exit_code, 0) << g.err;
  std::vector<std::string> render = {"render", dir + "/s.json", "-o", dir + "/s.svg"};
  render.insert(render.end(), c.render.begin(), c.render.end());
  if (c.model) {
    WriteTextFile(dir + "/m.json", R"({"format": "jitpipe.model", "version": 1,
     "defaults": {"forward_us": 4800, "backward_input_us": 5500, "backward_weight_us": 4100,
                  "input_bytes": 33554432, "output_bytes": 33554432, "param_bytes": 400000000},
     "p2p": {"gb_per_s": 50}, "dp": {"size": 4, "gb_per_s": 100}})");
    render.insert(render.end(), {"--model", dir + "/m.json"});
  }
  CliResult r = RunCli(render);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string svg = ReadFile(dir + "/s.svg");
  EXPECT_THAT(SvgLayoutProblems(svg), IsEmpty());
  const ParsedSvg p = ParseSvg(svg);
  ASSERT_FALSE(p.OfClass("idle").empty());
  for (const auto* idle : p.OfClass("idle")) {
    if (c.width > 0) {
      EXPECT_DOUBLE_EQ(idle->Num("width"), c.width);
    }
    EXPECT_DOUBLE_EQ(idle->Num("height"), c.row_height);
  }
  std::string title;
  for (const auto* line : p.OfClass("title")) title += (title.empty() ? "" : " ") + line->text;
  EXPECT_THAT(title, HasSubstr("makespan "));
  EXPECT_THAT(title, HasSubstr(c.model ? "; model " : "; unit costs"));
  EXPECT_EQ(!p.OfClass("label").empty(), c.labelled);
  if (c.width == 0) {  // the automatic width shows 9 in 10 compute blocks' full label
    int compute = 0, full = 0;
    for (const auto& b : ::jitpipe::testing::SvgBlocks(p)) {
      if (b.rect->Num("height") != c.row_height) continue;
      ++compute;
      full += b.label != nullptr && b.label->text.find('/') != std::string::npos;
    }
    EXPECT_GE(full, 0.9 * compute) << compute << " compute blocks";
  }
  EXPECT_FALSE(p.OfClass("note").empty());
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RenderDiagramTest,
    ::testing::Values(
        // The issue's case: wide enough by default (16000 to 19000 px) for its labels.
        DiagramCase{"Interleaved_pp8_m64",
                    {"--schedule", "interleaved-1f1b", "--pp", "8", "--microbatches", "64",
                     "--stages-per-rank", "2"},
                    {},
                    true,
                    0,
                    26,
                    true},
        DiagramCase{"Interleaved_pp8_m64_Narrow",
                    {"--schedule", "interleaved-1f1b", "--pp", "8", "--microbatches", "64",
                     "--stages-per-rank", "2"},
                    {"--width", "1000", "--row-height", "40"},
                    true,
                    1000,
                    40,
                    false},
        DiagramCase{"Zbv_UnitCosts_Narrowest",
                    {"--schedule", "zbv", "--pp", "4", "--microbatches", "8"},
                    {"--width", "100", "--row-height", "8"},
                    false,
                    100,
                    8,
                    false},
        DiagramCase{"DualPipeV_Wide",
                    {"--schedule", "dualpipev", "--pp", "4", "--microbatches", "16"},
                    {"--width", "5000"},
                    true,
                    5000,
                    26,
                    true},
        DiagramCase{"GPipe_UnitCosts",
                    {"--schedule", "gpipe", "--pp", "2", "--microbatches", "4"},
                    {},
                    false,
                    0,
                    26,
                    true}),
    [](const auto& test) { return test.param.name; });

// The issue's case draws pp 8, v 2, m 64 in seconds with its title whole.
TEST(RenderTitleTest, NamesScheduleSizesAndMakespan) {
  const std::string dir = MakeTempDir("render_title");
  ASSERT_EQ(RunCli({"generate", "--schedule", "interleaved-1f1b", "--pp", "8", "--microbatches",
                    "64", "--stages-per-rank", "2", "-o", dir + "/s.json"})
                .exit_code,
            0);
  CliResult r = RunCli({"render", dir + "/s.json", "-o", dir + "/s.svg", "--width", "400"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const ParsedSvg p = ParseSvg(ReadFile(dir + "/s.svg"));
  std::string title;
  for (const auto* line : p.OfClass("title")) title += (title.empty() ? "" : " ") + line->text;
  EXPECT_THAT(title, ::testing::MatchesRegex("interleaved-1f1b: pp 8, v 2, m 64, 16 stages; "
                                             "makespan [0-9.]+ units of F, bubble [0-9.]+%; "
                                             "unit costs"));
  EXPECT_GE(p.OfClass("title").size(), 2u);  // wrapped to the 400 px plot
}

// The extension is matched as file systems that ignore case would: x.SVG is
// an SVG.
TEST_F(CmdRenderTest, AnUpperCaseExtensionIsAnSvg) {
  EXPECT_EQ(RunCli({"render", schedule_, "-o", dir_ + "/x.SVG"}).exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/x.SVG"));
}

}  // namespace
}  // namespace jitpipe::cmd_render_test
