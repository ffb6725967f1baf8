#include "base/json_text.h"

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace jitpipe::json_text_test {
namespace {

std::string Quoted(absl::string_view s) {
  std::string out;
  AppendJsonString(&out, s);
  return out;
}

struct StringCase {
  std::string input;
  std::string expected;
};

void PrintTo(const StringCase& c, std::ostream* os) { *os << ::testing::PrintToString(c.input); }

class JsonStringTest : public ::testing::TestWithParam<StringCase> {};

TEST_P(JsonStringTest, EscapesAndRepairs) {
  std::string out = Quoted(GetParam().input);
  EXPECT_EQ(out, GetParam().expected);
  // Whatever the input, the output is JSON that nlohmann accepts as UTF-8.
  EXPECT_NO_THROW(nlohmann::json::parse(out)) << out;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, JsonStringTest,
    ::testing::Values(
        StringCase{"0F1", "\"0F1\""}, StringCase{"", "\"\""},
        StringCase{"say \"hi\"\\", "\"say \\\"hi\\\"\\\\\""},
        StringCase{"a\nb\tc\rd\be\ff", "\"a\\nb\\tc\\rd\\be\\ff\""},
        StringCase{std::string("\x01\x1f\x7f", 3), "\"\\u0001\\u001f\x7f\""},
        StringCase{std::string("nul\0byte", 8), "\"nul\\u0000byte\""},
        // Valid multi-byte UTF-8 is copied: é, €, 𝄞.
        StringCase{"\xC3\xA9 \xE2\x82\xAC \xF0\x9D\x84\x9E", "\"\xC3\xA9 \xE2\x82\xAC \xF0\x9D\x84\x9E\""},
        // Each byte that does not start a valid sequence becomes U+FFFD.
        StringCase{"a\xFFz", "\"a\xEF\xBF\xBDz\""},                 // never valid
        StringCase{"\x80", "\"\xEF\xBF\xBD\""},                     // stray continuation
        StringCase{"\xC0\xAF", "\"\xEF\xBF\xBD\xEF\xBF\xBD\""},     // overlong '/'
        StringCase{"\xED\xA0\x80", "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\""},  // surrogate
        StringCase{"\xF4\x90\x80\x80x", "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDx\""},
        StringCase{"end\xE2\x82", "\"end\xEF\xBF\xBD\xEF\xBF\xBD\""}));  // truncated

TEST(JsonTextTest, DoublesUseTheShortestExactText) {
  struct Case {
    double value;
    const char* expected;
  };
  for (const Case& c : {Case{3, "3"}, Case{0.1, "0.1"}, Case{-2.5, "-2.5"}, Case{1e21, "1e+21"},
                        Case{1048576, "1048576"}, Case{0.1 + 0.2, "0.30000000000000004"}}) {
    std::string out;
    AppendJsonDouble(&out, c.value);
    EXPECT_EQ(out, c.expected);
    EXPECT_EQ(nlohmann::json::parse(out).get<double>(), c.value);
  }
}

TEST(JsonTextTest, IntegersKeepEveryDigit) {
  std::string out;
  AppendJsonInt(&out, std::numeric_limits<int64_t>::min());
  out += ' ';
  AppendJsonInt(&out, 42);
  EXPECT_EQ(out, "-9223372036854775808 42");
}

TEST(JsonTextTest, NanosecondsBecomeExactMicroseconds) {
  struct Case {
    int64_t nanos;
    const char* expected;
  };
  for (const Case& c : {Case{0, "0"}, Case{1500, "1.5"}, Case{2000, "2"}, Case{1, "0.001"},
                        Case{123456789, "123456.789"}, Case{10, "0.01"}, Case{-1, "-0.001"},
                        Case{std::numeric_limits<int64_t>::min(), "-9223372036854775.808"}}) {
    EXPECT_EQ(MicrosFromNanos(c.nanos), c.expected) << c.nanos;
  }
}

}  // namespace
}  // namespace jitpipe::json_text_test
