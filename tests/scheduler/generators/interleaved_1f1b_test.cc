#include "scheduler/generators/interleaved_1f1b.h"

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "gtest/gtest.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"
#include "tests/testing/unit_cost_replay.h"

namespace jitpipe::interleaved_1f1b_test {
namespace {

using ::jitpipe::testing::Message;
using ::jitpipe::testing::ProgramText;
using ::jitpipe::testing::ReadTestdataJson;
using ::jitpipe::testing::ReplayUnitCosts;
using ::jitpipe::testing::UnitCostResult;
using Text = std::vector<std::vector<std::string>>;

// p = 2, v = 2, m = 2: warmup 4 on rank 0, 2 on rank 1; the padding puts the
// first backward on step v*p + 2(p-1-r) + 1: 7 and 5.
TEST(Interleaved1F1BTest, SmallOrderWithBubbles) {
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateInterleaved1F1B(2, 2, 2));
  EXPECT_EQ(ProgramText(s.ranks),
            (Text{{"0F0", "0F1", "2F0", "2F1", "", "", "", "2B0", "", "2B1", "", "0B0", "", "0B1"},
                  {"", "1F0", "1F1", "", "3F0", "3B0", "3F1", "3B1", "", "1B0", "", "1B1"}}));
  EXPECT_EQ(s.name, "interleaved-1f1b");
  EXPECT_EQ(s.stage_to_rank, (std::vector<int>{0, 1, 0, 1}));
}

// Megatron's anchor action "F3c1" / "BW0c0" on `rank` as our text: stage
// chunk*p + rank; a fused backward BW is our B.
std::string FromMegatron(const std::string& anchor, int pp, int rank) {
  const bool backward = anchor.rfind("BW", 0) == 0;
  const size_t c = anchor.find('c');
  const std::string mb = anchor.substr(backward ? 2 : 1, c - (backward ? 2 : 1));
  int chunk = 0;
  EXPECT_TRUE(absl::SimpleAtoi(anchor.substr(c + 1), &chunk)) << anchor;
  return std::to_string(chunk * pp + rank) + (backward ? "B" : "F") + mb;
}

struct MegatronCase {
  std::string file;
  int pp, microbatches, stages_per_rank;
};

class Interleaved1F1BMegatronTest : public ::testing::TestWithParam<MegatronCase> {};

// PyTorch's flexible rounds deal microbatches out in groups of m / rounds;
// where that equals Megatron's microbatch group size the orders agree
// exactly, bubbles aside.
TEST_P(Interleaved1F1BMegatronTest, MatchesMegatronsOrder) {
  const MegatronCase& c = GetParam();
  nlohmann::json d = ReadTestdataJson("conformance/anchors/" + c.file);
  Text want;
  for (size_t r = 0; r < d["ranks"].size(); ++r) {
    want.emplace_back();
    for (const auto& a : d["ranks"][r]) want.back().push_back(FromMegatron(a, c.pp, r));
  }
  ASSERT_OK_AND_ASSIGN(Schedule s,
                       GenerateInterleaved1F1B(c.pp, c.microbatches, c.stages_per_rank));
  Text got;
  for (const RankProgram& program : s.ranks) {
    got.emplace_back();
    for (const Action& a : program) {
      if (!a.is_bubble()) got.back().push_back(a.ToString());
    }
  }
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(
    Anchors, Interleaved1F1BMegatronTest,
    ::testing::Values(MegatronCase{"megatron_interleaved_pp4_mb8.json", 4, 8, 2},
                      MegatronCase{"megatron_interleaved_pp4_mb8_v4.json", 4, 8, 4},
                      MegatronCase{"megatron_interleaved_pp4_mb10_g5.json", 4, 10, 2}));

// Megatron's anchor for pp4 m8 v2 under unit costs: busy 48 + (p-1)(F+B) = 57;
// peak activations 5.5, 4.5, 3.5, 2.5 full-rank units = 11, 9, 7, 5 stages.
TEST(Interleaved1F1BTest, MatchesMegatronsUnitCostAnchor) {
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateInterleaved1F1B(4, 8, 2));
  ASSERT_OK_AND_ASSIGN(UnitCostResult r, ReplayUnitCosts(s));
  EXPECT_EQ(r.makespan, 57);
  EXPECT_EQ(r.busy, (std::vector<double>{48, 48, 48, 48}));
  EXPECT_EQ(r.peak_stage_units, (std::vector<int>{11, 9, 7, 5}));
}

TEST(Interleaved1F1BTest, OneStagePerRankIsPlain1F1BWithBubbles) {
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateInterleaved1F1B(2, 2, 1));
  EXPECT_EQ(ProgramText(s.ranks),
            (Text{{"0F0", "0F1", "", "", "", "0B0", "", "0B1"}, {"", "1F0", "1B0", "1F1", "1B1"}}));
}

TEST(Interleaved1F1BTest, RefusesMicrobatchesThatDoNotFillTheRounds) {
  absl::StatusOr<Schedule> s = GenerateInterleaved1F1B(4, 9, 2);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(s),
            "interleaved-1f1b: 9 microbatches is not a multiple of max(1, 9 // 4) = 2; use 8 or 10");
}

}  // namespace
}  // namespace jitpipe::interleaved_1f1b_test
