#include "traces/svg_render.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::svg_render_test {
namespace {

using ::jitpipe::testing::Message;
using ::testing::HasSubstr;
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
  return d;
}

TEST(SvgRenderTest, PlacesBlocksByTimeWithLabelsAndTooltips) {
  ASSERT_OK_AND_ASSIGN(std::string svg, RenderSvg(TwoRanks(), {.plot_width_px = 400}));
  EXPECT_THAT(svg, ::testing::StartsWith("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg "));
  EXPECT_THAT(svg, ::testing::EndsWith("</svg>\n"));
  // Row 1 starts below the title (34 px) and row 0 (26 + 6 px).
  EXPECT_THAT(svg, HasSubstr("<g><title>1B0</title><rect x=\"280.00\" y=\"66.00\" "
                             "width=\"200.00\" height=\"26.00\" fill=\"#fd8d3c\""));
  EXPECT_THAT(svg, HasSubstr(">rank 1</text>"));
  EXPECT_THAT(svg, HasSubstr("dominant-baseline=\"central\">0</text>"));
  EXPECT_THAT(svg, HasSubstr("demo &lt;1F1B&gt; &amp; more"));
  // The legend lists the styles in use only.
  EXPECT_THAT(svg, HasSubstr(">B  backward</text>"));
  EXPECT_THAT(svg, Not(HasSubstr("unused")));
  // Ticks every 0.5 up to 4 (at most 12 intervals) and the unit.
  EXPECT_THAT(svg, HasSubstr(">3.5</text>"));
  EXPECT_THAT(svg, HasSubstr(">time (us)</text>"));
}

TEST(SvgRenderTest, LeavesOutLabelsThatDoNotFit) {
  SvgDiagram d = TwoRanks();
  d.blocks[0].label = "a label far too long for a 100 px block";
  ASSERT_OK_AND_ASSIGN(std::string svg, RenderSvg(d, {.plot_width_px = 400}));
  EXPECT_THAT(svg, Not(HasSubstr("far too long</text>")));
  EXPECT_THAT(svg, HasSubstr("<title>0F0</title>"));
}

TEST(SvgRenderTest, ThinBlocksGoUnderTheirRow) {
  SvgDiagram d = TwoRanks();
  d.blocks.push_back({.row = 0, .thin = true, .start = 1, .duration = 1, .style = 1,
                      .tooltip = "reduce"});
  ASSERT_OK_AND_ASSIGN(std::string svg, RenderSvg(d, {.plot_width_px = 400}));
  // The thin band (round(0.35 x 26) = 9 px) sits 1 px under row 0's band.
  EXPECT_THAT(svg, HasSubstr("<title>reduce</title><rect x=\"180.00\" y=\"61.00\" "
                             "width=\"100.00\" height=\"7.00\""));
}

TEST(SvgRenderTest, RefusesBadBlocksAndOptions) {
  SvgDiagram d = TwoRanks();
  d.blocks[2].row = 2;
  EXPECT_EQ(Message(RenderSvg(d)), "block 2: row 2 is not one of the 2 rows");
  d = TwoRanks();
  d.blocks[1].style = 3;
  EXPECT_EQ(Message(RenderSvg(d)), "block 1: style 3 is not one of the 3 styles");
  d = TwoRanks();
  d.blocks[0].duration = -1;
  EXPECT_EQ(Message(RenderSvg(d)), "block 0: start 0 and duration -1 must be finite and >= 0");
  EXPECT_EQ(Message(RenderSvg(TwoRanks(), {.plot_width_px = 0})),
            "plot width and row height must be positive");
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
