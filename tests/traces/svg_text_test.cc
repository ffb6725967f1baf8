#include "traces/svg_text.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace jitpipe::svg_text_test {
namespace {

using ::testing::ElementsAre;

TEST(SvgTextTest, EscapesTheFourCharactersXmlReserves) {
  EXPECT_EQ(EscapeXml("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c'");
  EXPECT_EQ(EscapeXml(""), "");
}

struct WidthCase {
  std::string text;
  double font_px;
  FontWeight weight;
  double px;
};

class TextWidthTest : public ::testing::TestWithParam<WidthCase> {};

// Helvetica's advance x 1.17, at least 0.34 em a character: a digit is
// 0.556 x 1.17 = 0.65052 em, "/" (0.278 x 1.17 = 0.325) gets the floor.
TEST_P(TextWidthTest, BoundsHelveticaAndDejaVu) {
  EXPECT_NEAR(TextWidthPx(GetParam().text, GetParam().font_px, GetParam().weight), GetParam().px,
              1e-9);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TextWidthTest,
    ::testing::Values(WidthCase{"", 12, FontWeight::kNormal, 0},
                      WidthCase{"0123456789", 10, FontWeight::kNormal, 65.052},
                      WidthCase{"15/63", 12, FontWeight::kNormal, (4 * 0.65052 + 0.34) * 12},
                      WidthCase{"W", 10, FontWeight::kNormal, 0.944 * 1.17 * 10},
                      WidthCase{"ii", 10, FontWeight::kNormal, 2 * 0.34 * 10},
                      WidthCase{"8", 10, FontWeight::kBold, 0.65052 * 1.1 * 10},
                      // "µs": one non-ASCII code point (two bytes) at 1 em, then "s".
                      WidthCase{"\xC2\xB5s", 10, FontWeight::kNormal, 10 + 0.5 * 1.17 * 10}));

TEST(SvgTextTest, WrapsAtSpacesWithinTheWidth) {
  // Each word is 4 digits: 26.02 px at 10 px; with a space, two take 55.45.
  EXPECT_THAT(WrapText("1111 2222 3333", 10, 60), ElementsAre("1111 2222", "3333"));
  EXPECT_THAT(WrapText("1111 2222 3333", 10, 1000), ElementsAre("1111 2222 3333"));
  EXPECT_THAT(WrapText("1111   2222", 10, 30), ElementsAre("1111", "2222"));
  EXPECT_THAT(WrapText("", 10, 30), ElementsAre(""));
}

TEST(SvgTextTest, BreaksAWordWiderThanALine) {
  // 6.5052 px a digit: four fit in 27 px.
  EXPECT_THAT(WrapText("a 1234567890 b", 10, 27), ElementsAre("a", "1234", "5678", "90 b"));
  // A line holds at least one character, even one wider than the line.
  EXPECT_THAT(WrapText("WW", 10, 5), ElementsAre("W", "W"));
  // A UTF-8 sequence is never cut.
  EXPECT_THAT(WrapText("\xC2\xB5\xC2\xB5", 10, 11), ElementsAre("\xC2\xB5", "\xC2\xB5"));
}

TEST(SvgTextTest, EveryWrappedLineFitsUnlessItIsOneCharacter) {
  const std::string title =
      "interleaved-1f1b: pp 8, v 2, m 64, 16 stages; makespan 4.581 s, bubble 19.4%; model "
      "/a/very/long/path/to/the/model/file/that/has/no/spaces/at/all/model.json";
  for (double width : {40.0, 120.0, 300.0, 900.0}) {
    for (const std::string& line : WrapText(title, 15, width, FontWeight::kBold)) {
      EXPECT_LE(TextWidthPx(line, 15, FontWeight::kBold), width) << line;
    }
  }
}

}  // namespace
}  // namespace jitpipe::svg_text_test
