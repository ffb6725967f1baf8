#include "comm/flight_analysis.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::flight_analysis_test {
namespace {

using ::testing::HasSubstr;

// Builds records as a set of ranks would have written them.
class Ranks {
 public:
  explicit Ranks(int n) {
    for (int r = 0; r < n; ++r) recorders_.push_back(std::make_unique<FlightRecorder>(r, n));
  }
  void Send(int from, int to, uint64_t tag, int index, const std::string& action) {
    uint64_t seq = recorders_[from]->RecordPost(FlightOpKind::kSend, to, {}, tag, 8,
                                                {-1, -1, index, action});
    recorders_[from]->RecordDone(seq, absl::OkStatus());
  }
  void Recv(int at, int from, uint64_t tag, int index, const std::string& action, bool done) {
    uint64_t seq = recorders_[at]->RecordPost(FlightOpKind::kRecv, from, {}, tag, 8,
                                              {-1, -1, index, action});
    if (done) recorders_[at]->RecordDone(seq, absl::OkStatus());
  }
  void Matching(FlightMatching matching) {
    for (auto& r : recorders_) r->SetMatching(matching);
  }
  void At(int rank, int index, const std::string& action) {
    recorders_[rank]->SetPosition(index, action);
  }
  // Round trip through the JSON files, as fr-analyze reads them.
  std::vector<FlightRecord> Records(const std::vector<int>& skip = {}) {
    std::string dir = testing::MakeTempDir("fra");
    for (auto& r : recorders_) {
      if (std::find(skip.begin(), skip.end(), r->rank()) != skip.end()) continue;
      EXPECT_OK(r->Dump(dir, "timeout"));
    }
    absl::StatusOr<std::vector<FlightRecord>> records = LoadFlightRecords(dir);
    EXPECT_OK(records);
    return records.ok() ? *records : std::vector<FlightRecord>{};
  }

 private:
  std::vector<std::unique_ptr<FlightRecorder>> recorders_;
};

TEST(FlightAnalysisTest, AllMatched) {
  Ranks ranks(2);
  ranks.Send(0, 1, 1, 1, "0SEND_F0");
  ranks.Recv(1, 0, 1, 0, "1RECV_F0", true);
  FlightAnalysis a = AnalyzeFlightRecords(ranks.Records());
  EXPECT_TRUE(a.ok()) << a.ToString();
  EXPECT_EQ(a.ToString(), "all operations matched\n");
}

// Rank 2 waits for a gradient rank 3 never sends; rank 1 waits on rank 2 in
// turn. The root is rank 2's wait.
TEST(FlightAnalysisTest, NamesTheRootOfAChainOfWaits) {
  Ranks ranks(4);
  ranks.Send(3, 0, 7, 15, "6SEND_F4");  // stage 6 -> 7, another peer
  ranks.Recv(0, 3, 7, 20, "7RECV_F4", true);
  ranks.Recv(2, 3, 9, 17, "5RECV_B3", false);
  ranks.Recv(1, 2, 11, 12, "2RECV_B3", false);
  ranks.At(3, 16, "6F5");
  FlightAnalysis a = AnalyzeFlightRecords(ranks.Records());
  EXPECT_EQ(a.first,
            "rank 2 waits at index 17 (5RECV_B3) for rank 3; rank 3's last op was index 15 "
            "(6SEND_F4), and it is at index 16 (6F5)");
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_THAT(a.findings[0], HasSubstr("rank 1 waits at index 12 (2RECV_B3) for rank 2"));
}

TEST(FlightAnalysisTest, ReportsACycleAsADeadlock) {
  Ranks ranks(2);
  ranks.Recv(0, 1, 1, 3, "0RECV_B0", false);
  ranks.Recv(1, 0, 2, 2, "1RECV_F1", false);
  FlightAnalysis a = AnalyzeFlightRecords(ranks.Records());
  EXPECT_THAT(a.first, HasSubstr("deadlock: ranks wait on each other"));
  EXPECT_THAT(a.first, HasSubstr("rank 0 waits at index 3 (0RECV_B0) for rank 1"));
  EXPECT_THAT(a.first, HasSubstr("rank 1 waits at index 2 (1RECV_F1) for rank 0"));
}

// A transport that pairs in posting order (NCCL) pairs the first receive
// with the first send whatever their tags: a different operation is named.
TEST(FlightAnalysisTest, ReportsMisorderedPairsAndMissingRanks) {
  Ranks ranks(3);
  ranks.Matching(FlightMatching::kByOrder);
  ranks.Send(0, 1, 100, 1, "0SEND_F1");
  ranks.Recv(1, 0, 200, 0, "1RECV_F0", true);
  FlightAnalysis a = AnalyzeFlightRecords(ranks.Records({2}));
  EXPECT_THAT(a.first, HasSubstr("pairs with rank 0's send at index 1 (0SEND_F1), a different "
                                 "operation (tag 200 vs 100)"));
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0], "rank 2 wrote no flight record");
}

// A rank killed (or stopped) writes no record. The ranks waiting on it name
// it first, not a bystander: rank 1 and rank 3 wait on the silent rank 2,
// rank 0 on rank 3 (which waits too); before, rank 0's wait on rank 3 came
// first and rank 2 only among the missing records.
TEST(FlightAnalysisTest, NamesTheRankThatStoppedAnsweringFirst) {
  Ranks ranks(4);
  ranks.Recv(1, 2, 5, 7, "1RECV_B3", false);
  ranks.Recv(3, 2, 6, 4, "3RECV_F4", false);
  ranks.Recv(0, 3, 9, 8, "0RECV_B2", false);
  FlightAnalysis a = AnalyzeFlightRecords(ranks.Records({2}));
  EXPECT_EQ(a.first,
            "rank 2 wrote no flight record: it died or stopped answering; rank 1 waits at "
            "index 7 (1RECV_B3) for it (and 1 more operations wait on it)");
  for (const std::string& f : a.findings) {
    EXPECT_NE(f, "rank 2 wrote no flight record") << "named twice";
  }
  EXPECT_THAT(a.ToString(), HasSubstr("rank 0 waits at index 8 (0RECV_B2) for rank 3"));
}

// Under tag matching (in-process, MPI) a receive finds its send by tag, as
// the transport did: --recv jit posts receives from one peer in another
// order than the sends, which pairing by order would call mismatched; a
// receive whose tag no send carries is the one left waiting.
TEST(FlightAnalysisTest, PairsByTagWhereTheTransportDoes) {
  Ranks ranks(2);
  ranks.Send(0, 1, 100, 1, "0SEND_F0");
  ranks.Send(0, 1, 101, 3, "0SEND_F1");
  ranks.Recv(1, 0, 101, 0, "1RECV_F1", true);
  ranks.Recv(1, 0, 100, 2, "1RECV_F0", true);
  ranks.Recv(1, 0, 102, 5, "1RECV_F2", false);
  ranks.At(0, 4, "0F2");
  FlightAnalysis a = AnalyzeFlightRecords(ranks.Records());
  EXPECT_EQ(a.first,
            "rank 1 waits at index 5 (1RECV_F2) for rank 0; rank 0's last op was index 3 "
            "(0SEND_F1), and it is at index 4 (0F2)");
  EXPECT_TRUE(a.findings.empty()) << a.ToString();
  // The same records paired by order see two mismatches.
  ranks.Matching(FlightMatching::kByOrder);
  FlightAnalysis by_order = AnalyzeFlightRecords(ranks.Records());
  EXPECT_THAT(by_order.ToString(), HasSubstr("a different operation (tag 101 vs 100)"));
}

TEST(FlightAnalysisTest, RefusesNewerRecordsAndEmptyDirectories) {
  EXPECT_EQ(testing::Message(ParseFlightRecord(
                R"({"format": "jitpipe.flight_record", "version": 9, "rank": 0})")),
            "jitpipe.flight_record version 9 was written by a newer jitpipe; this build reads "
            "versions up to 1");
  EXPECT_EQ(LoadFlightRecords(testing::MakeTempDir("empty")).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace jitpipe::flight_analysis_test
