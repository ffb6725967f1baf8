#include "comm/flight_recorder.h"

#include <thread>

#include "base/atomic_file.h"
#include "comm/inproc/inproc_world.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::flight_recorder_test {
namespace {

using ::testing::HasSubstr;

TEST(FlightRecorderTest, RecordsPostAndCompletionThroughTheTransport) {
  auto world = CreateInProcessWorld(2);
  FlightRecorder r0(0, 2), r1(1, 2);
  RecordingTransport t0(&world->transport(0), &r0), t1(&world->transport(1), &r1);
  std::vector<std::byte> out(4), in(4);
  ASSERT_OK_AND_ASSIGN(RequestId recv, t1.PostRecv(0, 5, absl::MakeSpan(in),
                                                   {1, 0, 3, "1RECV_F0"}));
  ASSERT_OK_AND_ASSIGN(RequestId send, t0.PostSend(1, 5, out, {0, 0, 1, "0SEND_F0"}));
  ASSERT_OK(t0.Wait(send, absl::Seconds(10)));
  ASSERT_OK(t1.Wait(recv, absl::Seconds(10)));
  std::vector<FlightEntry> e1 = r1.Entries();
  ASSERT_EQ(e1.size(), 1u);
  EXPECT_EQ(e1[0].kind, FlightOpKind::kRecv);
  EXPECT_EQ(e1[0].peer, 0);
  EXPECT_EQ(e1[0].state, FlightOpState::kCompleted);
  EXPECT_EQ(e1[0].info.action, "1RECV_F0");
  EXPECT_GE(e1[0].completed_us, e1[0].posted_us);
}

TEST(FlightRecorderTest, KeepsTheLastEntriesAndCountsPerPeer) {
  FlightRecorder r(0, 3, /*capacity=*/4);
  for (int i = 0; i < 10; ++i) {
    r.RecordPost(FlightOpKind::kSend, 1 + i % 2, {}, i, 8, {});
  }
  std::vector<FlightEntry> e = r.Entries();
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e.front().seq, 6u);
  EXPECT_EQ(e.back().peer_seq, 4u);  // the fifth send to rank 2
}

TEST(FlightRecorderTest, DumpWritesAWholeJsonFile) {
  FlightRecorder r(2, 4);
  r.SetPosition(17, "5RECV_B3");
  uint64_t seq = r.RecordPost(FlightOpKind::kRecv, 3, {}, 9, 16, {5, 3, 17, "5RECV_B3"});
  r.RecordDone(seq, absl::DeadlineExceededError("timed out"));
  std::string dir = testing::MakeTempDir("fr");
  ASSERT_OK(r.Dump(dir, "timeout"));
  ASSERT_OK_AND_ASSIGN(std::string text, ReadFile(dir + "/rank_2.json"));
  nlohmann::json d = nlohmann::json::parse(text);
  EXPECT_EQ(d["format"], "jitpipe.flight_record");
  EXPECT_EQ(d["rank"], 2);
  EXPECT_EQ(d["position"]["index"], 17);
  ASSERT_EQ(d["entries"].size(), 1u);
  EXPECT_EQ(d["entries"][0]["state"], "failed");
  EXPECT_EQ(d["entries"][0]["error"], "timed out");
}

}  // namespace
}  // namespace jitpipe::flight_recorder_test
