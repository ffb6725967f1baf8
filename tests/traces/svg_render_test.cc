#include "traces/svg_render.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/svg_structure.h"
#include "traces/svg_text.h"

namespace jitpipe::svg_render_test {
namespace {

using ::jitpipe::testing::Message;
using ::jitpipe::testing::ParsedSvg;
using ::jitpipe::testing::ParseSvg;
using ::jitpipe::testing::SvgBlocks;
using ::jitpipe::testing::SvgLayoutProblems;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// Two rows, plot 400 px wide over [0, 4]: 100 px per time unit from x = 80.
SvgDiagram TwoRanks() {
  SvgDiagram d;
  d.title = "demo <1F1B> & more";
  d.rows = {"rank 0", "rank 1"};
  d.styles = {{"F  forward", "#6baed6", "#000000"},
              {"B  backward", "#fd8d3c", "#000000"},
              {"unused", "#123456", "#000000"}};
  d.blocks = {{.row = 0, .start = 0, .duration = 1, .style = 0, .label = "0", .tooltip = "0F0"},
              {.row = 1, .start = 1, .duration = 1, .style = 0, .label = "0", .tooltip = "1F0"},
              {.row = 1, .start = 2, .duration = 2, .style = 1, .label = "0", .tooltip = "1B0"}};
  d.notes = {"labels: the microbatch"};
  return d;
}

std::vector<std::string> TextsOfClass(const ParsedSvg& p, const std::string& cls) {
  std::vector<std::string> texts;
  for (const auto* e : p.OfClass(cls)) texts.push_back(e->text);
  return texts;
}

TEST(SvgRenderTest, PlacesBlocksByTimeWithLabelsAndTooltips) {
  ASSERT_OK_AND_ASSIGN(std::string svg, RenderSvg(TwoRanks(), {.plot_width_px = 400}));
  EXPECT_THAT(svg, ::testing::StartsWith("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg "));
  EXPECT_THAT(svg, ::testing::EndsWith("</svg>\n"));
  EXPECT_THAT(SvgLayoutProblems(svg), IsEmpty());
  // Row 1 starts below the title (8 + 19 + 10 = 37 px) and row 0 (26 + 6 px).
  EXPECT_THAT(svg, HasSubstr("<g><title>1B0</title><rect x=\"280.00\" y=\"69.00\" "
                             "width=\"200.00\" height=\"26.00\" fill=\"#fd8d3c\""));
  const ParsedSvg p = ParseSvg(svg);
  EXPECT_THAT(TextsOfClass(p, "title"), ElementsAre("demo <1F1B> & more"));
  EXPECT_THAT(TextsOfClass(p, "row"), ElementsAre("rank 0", "rank 1"));
  EXPECT_THAT(TextsOfClass(p, "label"), ElementsAre("0", "0", "0"));
  // The legend: the idle background, then the styles in use only; the notes.
  EXPECT_THAT(TextsOfClass(p, "legend"), ElementsAre("idle (bubble)", "F  forward", "B  backward"));
  EXPECT_THAT(TextsOfClass(p, "note"), ElementsAre("labels: the microbatch"));
  // Ticks every 0.5 up to 4 (400 px: at most 5 intervals of 80 px) in us.
  EXPECT_THAT(TextsOfClass(p, "tick"), ElementsAre("0", "1", "2", "3", "4"));
  EXPECT_THAT(TextsOfClass(p, "axis"), ElementsAre("time (us)"));
  // Each row's background, the idle colour, spans the plot.
  for (const auto* idle : p.OfClass("idle")) EXPECT_EQ(idle->Num("width"), 400);
}

struct LabelCase {
  std::string name;
  double duration;  // at 100 px per unit
  std::string label, short_label;
  std::string shown;  // "" for none
};

class LabelFallbackTest : public ::testing::TestWithParam<LabelCase> {};

// A block shows its label where it fits, else its short label, else nothing.
TEST_P(LabelFallbackTest, ShowsTheLongestLabelThatFits) {
  SvgDiagram d = TwoRanks();
  d.blocks[0].duration = GetParam().duration;
  d.blocks[0].label = GetParam().label;
  d.blocks[0].short_label = GetParam().short_label;
  ASSERT_OK_AND_ASSIGN(std::string svg, RenderSvg(d, {.plot_width_px = 400}));
  EXPECT_THAT(SvgLayoutProblems(svg), IsEmpty());
  const ParsedSvg p = ParseSvg(svg);
  const auto blocks = SvgBlocks(p);
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[0].label == nullptr ? "" : blocks[0].label->text, GetParam().shown);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, LabelFallbackTest,
    ::testing::Values(LabelCase{"Fits", 1, "15/63", "63", "15/63"},
                      // "15/63" at 12 px: 35.3 px and 2 px each side; 39 px holds it.
                      LabelCase{"JustFits", 0.394, "15/63", "63", "15/63"},
                      LabelCase{"ShortFits", 0.39, "15/63", "63", "63"},
                      LabelCase{"NoShort", 0.39, "15/63", "", ""},
                      LabelCase{"NothingFits", 0.1, "15/63", "63", ""},
                      LabelCase{"Escaped", 1, "a&b", "", "a&b"}),
    [](const auto& test) { return test.param.name; });

TEST(SvgRenderTest, ThinLanesGoUnderTheirRowAndUnusedOnesTakeNoSpace) {
  SvgDiagram d = TwoRanks();
  d.blocks.push_back({.row = 0, .lane = 2, .start = 1, .duration = 1, .style = 1,
                      .label = "never drawn", .tooltip = "reduce"});
  ASSERT_OK_AND_ASSIGN(std::string svg, RenderSvg(d, {.plot_width_px = 400}));
  // Lane 2 is the only thin lane (round(0.35 x 26) = 9 px), 1 px under row 0's band.
  EXPECT_THAT(svg, HasSubstr("<title>reduce</title><rect x=\"180.00\" y=\"64.00\" "
                             "width=\"100.00\" height=\"7.00\""));
  EXPECT_THAT(svg, Not(HasSubstr("never drawn")));
  // Row 1 moves down by the lane: 37 + 26 + 9 + 6.
  EXPECT_THAT(svg, HasSubstr("<title>1B0</title><rect x=\"280.00\" y=\"78.00\""));
}

// What pp 8, m 64 looks like to the renderer: 8 rows of 256 blocks, F one
// unit and B two, labels "stage/microbatch".
SvgDiagram Pipeline(int rows, int blocks_per_row) {
  SvgDiagram d;
  d.title = "interleaved-1f1b: pp 8, v 2, m 64, 16 stages; makespan 4.581 s, bubble 19.4%; "
            "model /some/where/a-model-file-with-a-rather-long-name.json";
  d.styles = {{"F  forward", "#6baed6", "#000000"}, {"B  backward", "#fd8d3c", "#000000"}};
  for (int r = 0; r < rows; ++r) {
    d.rows.push_back(absl::StrCat("rank ", r));
    double t = r;
    for (int i = 0; i < blocks_per_row; ++i) {
      const bool forward = i % 2 == 0;
      const double duration = forward ? 1 : 2;
      d.blocks.push_back({.row = r, .start = t * 1000, .duration = duration * 1000,
                          .style = forward ? 0 : 1, .label = absl::StrCat(r + 8, "/", i / 2),
                          .short_label = absl::StrCat(i / 2), .tooltip = "x"});
      t += duration;
    }
  }
  d.notes = {"Labels: stage/microbatch; the microbatch alone where the block is narrow."};
  return d;
}

struct LayoutCase {
  std::string name;
  double width;  // 0: automatic
  double row_height;
  int blocks_per_row;
};

class LayoutTest : public ::testing::TestWithParam<LayoutCase> {};

// Whatever the width and row height: labels inside their blocks, the title
// and legend inside the page, round ticks, well-formed XML; --width honoured.
TEST_P(LayoutTest, EverythingFitsAndTheWidthIsHonoured) {
  const LayoutCase& c = GetParam();
  const SvgDiagram d = Pipeline(8, c.blocks_per_row);
  ASSERT_OK_AND_ASSIGN(std::string svg,
                       RenderSvg(d, {.plot_width_px = c.width, .row_height_px = c.row_height}));
  EXPECT_THAT(SvgLayoutProblems(svg), IsEmpty());
  const ParsedSvg p = ParseSvg(svg);
  const double width = c.width > 0 ? c.width : AutoPlotWidthPx(d, c.row_height);
  ASSERT_EQ(p.OfClass("idle").size(), 8u);
  for (const auto* idle : p.OfClass("idle")) {
    EXPECT_DOUBLE_EQ(idle->Num("width"), width);
    EXPECT_DOUBLE_EQ(idle->Num("height"), c.row_height);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, LayoutTest,
    ::testing::Values(LayoutCase{"Automatic", 0, 26, 256}, LayoutCase{"AutoSmall", 0, 26, 4},
                      LayoutCase{"Narrowest", kMinPlotWidthPx, 26, 256},
                      LayoutCase{"Medium", 1500, 26, 256}, LayoutCase{"Wide", 30000, 26, 256},
                      LayoutCase{"LowRows", 0, kMinRowHeightPx, 256},
                      LayoutCase{"TallRows", 4000, 60, 64}),
    [](const auto& test) { return test.param.name; });

// At the automatic width pp 8 m 64 shows nearly every full label.
TEST(SvgRenderTest, TheAutomaticWidthShowsMostLabels) {
  const SvgDiagram d = Pipeline(8, 256);
  ASSERT_OK_AND_ASSIGN(std::string svg, RenderSvg(d));
  int full = 0;
  const ParsedSvg p = ParseSvg(svg);
  for (const auto& b : SvgBlocks(p)) {
    full += b.label != nullptr && b.label->text.find('/') != std::string::npos;
  }
  EXPECT_GE(full, static_cast<int>(0.9 * d.blocks.size()));
}

TEST(SvgRenderTest, TheAutomaticWidthGrowsWithTheStepWithinItsBounds) {
  // 9 in 10 blocks need (35.3 + 4) px over their 1000 (F) or 2000 (B) us:
  // the 90th percentile is an F's 0.0393 px/us.
  const double per_f = TextWidthPx("10/0", 12) + 4;
  EXPECT_DOUBLE_EQ(AutoPlotWidthPx(Pipeline(1, 100), 26), std::ceil(150 * per_f));
  EXPECT_DOUBLE_EQ(AutoPlotWidthPx(Pipeline(1, 2), 26), kMinAutoWidthPx);
  EXPECT_DOUBLE_EQ(AutoPlotWidthPx(Pipeline(8, 4096), 26), kMaxAutoWidthPx);
  SvgDiagram unlabelled = Pipeline(1, 4);
  for (SvgBlock& b : unlabelled.blocks) b.label.clear();
  EXPECT_DOUBLE_EQ(AutoPlotWidthPx(unlabelled, 26), kDefaultPlotWidthPx);
}

struct UnitCase {
  std::string name;
  SvgTimeUnit unit;
  double extent;
  std::string axis;
  std::string last_tick;
};

class TimeUnitTest : public ::testing::TestWithParam<UnitCase> {};

// Microseconds in us, ms or s as FormatMicros chooses them; abstract units as named.
TEST_P(TimeUnitTest, ChoosesTheUnitByMagnitude) {
  SvgDiagram d = TwoRanks();
  d.time_unit = GetParam().unit;
  d.abstract_unit = "units of F";
  d.blocks[2].duration = GetParam().extent - d.blocks[2].start;
  ASSERT_OK_AND_ASSIGN(std::string svg, RenderSvg(d, {.plot_width_px = 800}));
  EXPECT_THAT(SvgLayoutProblems(svg), IsEmpty());
  const ParsedSvg p = ParseSvg(svg);
  EXPECT_THAT(TextsOfClass(p, "axis"), ElementsAre(GetParam().axis));
  EXPECT_EQ(TextsOfClass(p, "tick").back(), GetParam().last_tick);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TimeUnitTest,
    ::testing::Values(UnitCase{"Micro", SvgTimeUnit::kMicroseconds, 850, "time (us)", "800"},
                      UnitCase{"Milli", SvgTimeUnit::kMicroseconds, 12350, "time (ms)", "12"},
                      UnitCase{"Seconds", SvgTimeUnit::kMicroseconds, 4.58139e6, "time (s)",
                               "4.5"},
                      UnitCase{"Units", SvgTimeUnit::kAbstract, 51, "time (units of F)", "50"}),
    [](const auto& test) { return test.param.name; });

TEST(SvgRenderTest, ALongTitleWrapsInsideThePage) {
  SvgDiagram d = TwoRanks();
  d.title = "zbv: pp 4, v 2, m 8, 8 stages; makespan 51 units of F, bubble 5.9%; model "
            "/a/path/without/any/spaces/that/is/wider/than/the/whole/page/model.json";
  ASSERT_OK_AND_ASSIGN(std::string svg, RenderSvg(d, {.plot_width_px = 100}));
  EXPECT_THAT(SvgLayoutProblems(svg), IsEmpty());
  EXPECT_GE(ParseSvg(svg).OfClass("title").size(), 3u);
}

TEST(SvgRenderTest, RefusesBadBlocksAndOptions) {
  SvgDiagram d = TwoRanks();
  d.blocks[2].row = 2;
  EXPECT_EQ(Message(RenderSvg(d)), "block 2: row 2 is not one of the 2 rows");
  d = TwoRanks();
  d.blocks[1].style = 3;
  EXPECT_EQ(Message(RenderSvg(d)), "block 1: style 3 is not one of the 3 styles");
  d = TwoRanks();
  d.blocks[1].lane = -1;
  EXPECT_EQ(Message(RenderSvg(d)), "block 1: lane -1 is negative");
  d = TwoRanks();
  d.blocks[0].duration = -1;
  EXPECT_EQ(Message(RenderSvg(d)), "block 0: start 0 and duration -1 must be finite and >= 0");
  EXPECT_EQ(Message(RenderSvg(TwoRanks(), {.plot_width_px = 99})),
            "plot width 99 px is outside [100, 200000] (0: automatic)");
  EXPECT_EQ(Message(RenderSvg(TwoRanks(), {.plot_width_px = -1})),
            "plot width -1 px is outside [100, 200000] (0: automatic)");
  EXPECT_EQ(Message(RenderSvg(TwoRanks(), {.row_height_px = 7})),
            "row height 7 px is outside [8, 200]");
}

TEST(SvgRenderTest, TickStepIsOneTwoOrFiveTimesAPowerOfTen) {
  EXPECT_DOUBLE_EQ(TickStep(51, 12), 5);
  EXPECT_DOUBLE_EQ(TickStep(4, 12), 0.5);
  EXPECT_DOUBLE_EQ(TickStep(5892, 12), 500);
  EXPECT_DOUBLE_EQ(TickStep(100, 10), 10);
  EXPECT_DOUBLE_EQ(TickStep(101, 10), 20);
}

}  // namespace
}  // namespace jitpipe::svg_render_test
