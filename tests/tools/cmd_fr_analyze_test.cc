// End-to-end runs of `jitpipe fr-analyze DIR` over records written by the
// flight recorder.
#include <memory>
#include <string>
#include <vector>

#include "comm/flight_recorder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::cmd_fr_analyze_test {
namespace {

using ::jitpipe::testing::CliResult;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::RunCli;
using ::jitpipe::testing::WriteTextFile;
using ::testing::HasSubstr;

// Rank 0 sent microbatch 0's activation and rank 1 received it; with
// `unmatched`, rank 1 also waits for microbatch 1, which rank 0 never sent.
std::string WriteRecords(bool unmatched) {
  const std::string dir = MakeTempDir("fr");
  FlightRecorder r0(0, 2), r1(1, 2);
  r0.RecordDone(r0.RecordPost(FlightOpKind::kSend, 1, {}, 0, 64, {0, 0, 1, "0SEND_F0"}),
                absl::OkStatus());
  r1.RecordDone(r1.RecordPost(FlightOpKind::kRecv, 0, {}, 0, 64, {1, 0, 0, "1RECV_F0"}),
                absl::OkStatus());
  if (unmatched) {
    r1.RecordPost(FlightOpKind::kRecv, 0, {}, 2, 64, {1, 1, 2, "1RECV_F1"});
    r0.SetPosition(2, "0F1");
  }
  EXPECT_OK(r0.Dump(dir, "timeout"));
  EXPECT_OK(r1.Dump(dir, "timeout"));
  return dir;
}

TEST(CmdFrAnalyzeTest, AllMatchedExitsZero) {
  CliResult r = RunCli({"fr-analyze", WriteRecords(false)});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "all operations matched\n");
  EXPECT_EQ(r.err, "");
}

TEST(CmdFrAnalyzeTest, NamesTheReceiveThatNeverMatched) {
  CliResult r = RunCli({"fr-analyze", WriteRecords(true)});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "first unmatched: rank 1 waits at index 2 (1RECV_F1) for rank 0; rank 0's "
                   "last op was index 1 (0SEND_F0), and it is at index 2 (0F1)\n");
}

TEST(CmdFrAnalyzeTest, MissingOrUnreadableRecordsExitOne) {
  const std::string empty = MakeTempDir("fr_empty");
  CliResult none = RunCli({"fr-analyze", empty});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_EQ(none.err, "jitpipe fr-analyze: " + empty + ": no rank_*.json flight records\n");
  const std::string bad = MakeTempDir("fr_bad");
  WriteTextFile(bad + "/rank_0.json", "{\"format\": \"jitpipe.flight_record\", \"version\": 9}");
  CliResult unreadable = RunCli({"fr-analyze", bad});
  EXPECT_EQ(unreadable.exit_code, 1);
  EXPECT_THAT(unreadable.err, HasSubstr(bad + "/rank_0.json: "));
  EXPECT_EQ(RunCli({"fr-analyze"}).exit_code, 2);
}

}  // namespace
}  // namespace jitpipe::cmd_fr_analyze_test
