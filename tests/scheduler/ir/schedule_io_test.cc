#include "scheduler/ir/schedule_io.h"

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "scheduler/ir/schedule_csv.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::schedule_io_test {
namespace {

using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::TestdataPath;
using ::jitpipe::testing::WriteTextFile;

TEST(ScheduleIoTest, ChoosesTheFormatByExtensionThenContent) {
  std::string dir = MakeTempDir("io");
  ASSERT_OK_AND_ASSIGN(Schedule s, LoadSchedule(TestdataPath("conformance/real/torchtitan_4-rank.csv")));
  ASSERT_OK(SaveSchedule(dir + "/s.json", s));
  ASSERT_OK(SaveSchedule(dir + "/s.csv", s));
  std::filesystem::copy_file(dir + "/s.json", dir + "/s.txt");
  ASSERT_OK_AND_ASSIGN(Schedule from_json, LoadSchedule(dir + "/s.json"));
  ASSERT_OK_AND_ASSIGN(Schedule from_csv, LoadSchedule(dir + "/s.csv"));
  ASSERT_OK_AND_ASSIGN(Schedule sniffed, LoadSchedule(dir + "/s.txt"));
  EXPECT_EQ(from_json, s);
  EXPECT_EQ(from_csv, s);
  EXPECT_EQ(sniffed, s);
}

TEST(ScheduleIoTest, ErrorsStartWithThePath) {
  std::string dir = MakeTempDir("io");
  WriteTextFile(dir + "/bad.csv", "0F0,0Q0\n");
  absl::StatusOr<Schedule> s = LoadSchedule(dir + "/bad.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(std::string(s.status().message()).rfind(dir + "/bad.csv: line 1, cell 2", 0), 0u)
      << s.status();
  absl::StatusOr<Schedule> missing = LoadSchedule(dir + "/none.json");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST(ScheduleIoTest, RefusesAnUnknownOutputExtension) {
  EXPECT_EQ(FormatForOutput("x.yaml").status().message(),
            "x.yaml: the output name must end in .json or .csv");
}

}  // namespace
}  // namespace jitpipe::schedule_io_test
