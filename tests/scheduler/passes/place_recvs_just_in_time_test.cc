#include "scheduler/passes/place_recvs_just_in_time.h"

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/ir/schedule_csv.h"
#include "scheduler/passes/lower_send_recv_early.h"
#include "scheduler/analysis/validate.h"
#include "tests/scheduler/passes/pass_test_util.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::place_recvs_just_in_time_test {
namespace {

using ::jitpipe::testing::CsvFromJson;
using ::jitpipe::testing::FromRows;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::PytorchConformanceNames;
using ::jitpipe::testing::ReadTestdataJson;
using ::jitpipe::testing::Rows;
using ::jitpipe::testing::TwoChainsFromRows;

constexpr ValidateOptions kRelaxed{.semantics = CommSemantics::kRelaxed};
constexpr ValidateOptions kStrict{.semantics = CommSemantics::kStrict};

// Whether compute `a` (or a part of it) consumes `recv`.
bool Consumes(const Action& a, const Action& recv) {
  bool consumes = false;
  const bool forward = recv.kind == ActionKind::kRecvF;
  ForEachComputePart(a, [&](const Action& leaf) {
    const bool kind_matches = forward ? leaf.kind == ActionKind::kForward
                                      : leaf.kind == ActionKind::kBackward ||
                                            leaf.kind == ActionKind::kBackwardInput;
    consumes |= kind_matches && leaf.stage == recv.stage && leaf.microbatch == recv.microbatch;
  });
  return consumes;
}

// What the pass promises, checked on its output for `early`: the same
// actions with only RECVs moved, each RECV immediately before its consumer
// (only that consumer's other RECVs between them), valid under relaxed
// semantics.
void ExpectPureJitContract(const Schedule& early, const Schedule& jit) {
  ASSERT_EQ(jit.ranks.size(), early.ranks.size());
  EXPECT_TRUE(jit.lowered);
  for (size_t r = 0; r < jit.ranks.size(); ++r) {
    std::vector<std::string> kept_in, kept_out;
    std::map<std::string, int> recvs_in, recvs_out;
    for (const Action& a : early.ranks[r]) {
      if (IsRecv(a.kind)) {
        ++recvs_in[a.ToString()];
      } else {
        kept_in.push_back(a.ToString());
      }
    }
    const RankProgram& program = jit.ranks[r];
    for (size_t i = 0; i < program.size(); ++i) {
      if (!IsRecv(program[i].kind)) {
        kept_out.push_back(program[i].ToString());
        continue;
      }
      ++recvs_out[program[i].ToString()];
      size_t k = i + 1;
      while (k < program.size() && IsRecv(program[k].kind)) ++k;
      EXPECT_TRUE(k < program.size() && Consumes(program[k], program[i]))
          << "rank " << r << ": " << program[i].ToString() << " at index " << i
          << " is not right before its consumer";
    }
    EXPECT_EQ(kept_out, kept_in) << "rank " << r;
    EXPECT_EQ(recvs_out, recvs_in) << "rank " << r;
  }
  EXPECT_OK(Validate(jit, kRelaxed));
}

class JitConformanceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(JitConformanceTest, EveryRecvRightBeforeItsConsumerAndIdempotent) {
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/" + GetParam() + ".json");
  if (d.contains("error")) GTEST_SKIP() << "PyTorch refuses these parameters";
  const std::string source = d["schedule"] == "GPipe" ? "ranks_before_reduce_grad"
                             : d["schedule"] == "1F1B" ? "ranks_runtime_equivalent"
                                                       : "ranks";
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(CsvFromJson(d[source])));
  ASSERT_OK_AND_ASSIGN(Schedule early, LowerSendRecvEarly(s));
  ASSERT_OK_AND_ASSIGN(Schedule jit, PlaceRecvsJustInTime(early));
  ExpectPureJitContract(early, jit);
  ASSERT_OK_AND_ASSIGN(Schedule again, PlaceRecvsJustInTime(jit));
  EXPECT_EQ(Rows(again), Rows(jit));
}

INSTANTIATE_TEST_SUITE_P(Pytorch, JitConformanceTest,
                         ::testing::ValuesIn(PytorchConformanceNames()));

struct Case {
  std::string name;
  std::vector<std::string> compute;  // lowered early first
  std::vector<std::string> out;
  bool strict_ok;  // whether the result also passes strict semantics
};

class JitTextTest : public ::testing::TestWithParam<Case> {};

TEST_P(JitTextTest, PlacesEachRecvRightBeforeItsConsumer) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows(GetParam().compute));
  ASSERT_OK_AND_ASSIGN(Schedule early, LowerSendRecvEarly(s));
  ASSERT_OK_AND_ASSIGN(Schedule jit, PlaceRecvsJustInTime(early));
  EXPECT_EQ(Rows(jit), GetParam().out);
  ExpectPureJitContract(early, jit);
  EXPECT_EQ(Validate(jit, kStrict).ok(), GetParam().strict_ok);
}

INSTANTIATE_TEST_SUITE_P(
    Hand, JitTextTest,
    ::testing::Values(
        // The header's example: rank 1 no longer holds F1's input across
        // 1B0; under strict semantics ranks 0 and 1 each SEND first.
        Case{"TwoRanks",
             {"0F0 0F1 0B0 0B1", "1F0 1B0 1F1 1B1"},
             {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
              "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1"},
             false},
        // Rank 0 sends F0 before F1; rank 1 consumes F1 first and receives
        // it first: fine when messages match by tag, out of order for an
        // ordered transport.
        Case{"MessagesOfAPairMayComeInAnyOrder",
             {"0F0 0F1 0B0 0B1", "1F1 1F0 1B0 1B1"},
             {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
              "1RECV_F1 1F1 1RECV_F0 1F0 1B0 1SEND_B0 1B1 1SEND_B1"},
             false},
        // V placement: the RECVs of a compound stand right in front of it,
        // in sub-action order; the V turn (1F -> 2F, 2B -> 1B on rank 1)
        // needs none.
        Case{"OverlapGetsItsRecvsInFront",
             {"0F0 3F0 (0F1;3B0)OVERLAP_F_B 3F1 3B1 0B0 0B1",
              "1F0 2F0 1F1 2B0 2F1 1B0 2B1 1B1"},
             {"0F0 0SEND_F0 3RECV_F0 3F0 (0F1;3B0)OVERLAP_F_B 0SEND_F1 3SEND_B0 3RECV_F1 3F1 "
              "3B1 3SEND_B1 0RECV_B0 0B0 0RECV_B1 0B1",
              "1RECV_F0 1F0 2F0 2SEND_F0 1RECV_F1 1F1 2RECV_B0 2B0 2F1 2SEND_F1 1B0 1SEND_B0 "
              "2RECV_B1 2B1 1B1 1SEND_B1"},
             false},
        // GPipe on two ranks: no rank SENDs to a peer that SENDs back before
        // the RECV, so the pure placement also suits strict semantics.
        Case{"GpipeIsAlsoStrict",
             {"0F0 0F1 0B0 0B1", "1F0 1F1 1B0 1B1"},
             {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
              "1RECV_F0 1F0 1RECV_F1 1F1 1B0 1SEND_B0 1B1 1SEND_B1"},
             true},
        // One rank: no RECVs, nothing moves.
        Case{"OneRankDoesNothing", {"0F0 1F0 1B0 0B0"}, {"0F0 1F0 1B0 0B0"}, true}),
    [](const ::testing::TestParamInfo<Case>& param) { return param.param.name; });

// Two chains in opposite directions over two ranks (DualPipe's shape):
// chain 0 is stages 0 -> 1 (rank 0 -> 1), chain 1 stages 2 -> 3 (rank 1 -> 0).
// Both ranks send before they receive: fine when SENDs do not wait.
TEST(PlaceRecvsJustInTimeTest, TwoChainsInOppositeDirections) {
  ASSERT_OK_AND_ASSIGN(Schedule s, TwoChainsFromRows({"0F0 3F0 3B0 0B0", "2F0 1F0 1B0 2B0"}));
  ASSERT_OK_AND_ASSIGN(Schedule early, LowerSendRecvEarly(s));
  ASSERT_OK_AND_ASSIGN(Schedule jit, PlaceRecvsJustInTime(early));
  EXPECT_EQ(Rows(jit),
            (std::vector<std::string>{"0F0 0SEND_F0 3RECV_F0 3F0 3B0 3SEND_B0 0RECV_B0 0B0",
                                      "2F0 2SEND_F0 1RECV_F0 1F0 1B0 1SEND_B0 2RECV_B0 2B0"}));
  ExpectPureJitContract(early, jit);
  EXPECT_EQ(Message(Validate(jit, kStrict)),
            "deadlock under strict rendezvous semantics: wait cycle 0 -> 1 -> 0: rank 0 at "
            "index 1 (0SEND_F0) waits for rank 1 to post 1RECV_F0 (index 2); rank 1 at index 1 "
            "(2SEND_F0) waits for rank 0 to post 3RECV_F0 (index 2)");
}

// RECVs never wait under relaxed semantics, so the pass changes no wait: a
// program whose computes wait on each other deadlocks before and after, and
// the pass (unlike PlaceRecvsJitRendezvous) does not look for that.
TEST(PlaceRecvsJustInTimeTest, KeepsADeadlockOfTheComputes) {
  // Rank 0 needs B0 before it sends F1; rank 1 needs F1 before it computes
  // B0 (it waits for B1 first, which it sends before B0).
  ASSERT_OK_AND_ASSIGN(Schedule s,
                       FromRows({"0F0 0SEND_F0 0RECV_B0 0B0 0F1 0SEND_F1 0RECV_B1 0B1",
                                 "1RECV_F1 1F1 1B1 1SEND_B1 1RECV_F0 1F0 1B0 1SEND_B0"}));
  ASSERT_FALSE(Validate(s, kRelaxed).ok());
  ASSERT_OK_AND_ASSIGN(Schedule jit, PlaceRecvsJustInTime(s));
  EXPECT_EQ(Rows(jit), Rows(s));
  EXPECT_EQ(Message(Validate(jit, kRelaxed)), Message(Validate(s, kRelaxed)));
}

// A RECV after its consumer (no lowering pass writes one) moves earlier, to
// right before it; the rest of the program keeps its order.
TEST(PlaceRecvsJustInTimeTest, MovesARecvThatStandsAfterItsConsumer) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
                                             "1F0 1B0 1SEND_B0 1F1 1RECV_F0 1RECV_F1 1B1 "
                                             "1SEND_B1"}));
  ASSERT_OK_AND_ASSIGN(Schedule jit, PlaceRecvsJustInTime(s));
  EXPECT_EQ(Rows(jit),
            (std::vector<std::string>{"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
                                      "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1"}));
}

// The entry checks are MessageIndex::Build's (message_index_test.cc has
// them all); the pass returns them unchanged.
TEST(PlaceRecvsJustInTimeTest, RefusesWhatTheMessageIndexRefuses) {
  ASSERT_OK_AND_ASSIGN(Schedule compute_only, FromRows({"0F0 0B0", "1F0 1B0"}));
  absl::StatusOr<Schedule> jit = PlaceRecvsJustInTime(compute_only);
  EXPECT_EQ(jit.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Message(jit),
            "expected a lowered program (sends and receives placed, e.g. by "
            "LowerSendRecvEarly); this one is compute-only");
  ASSERT_OK_AND_ASSIGN(Schedule unmatched, FromRows({"0F0 0SEND_F0 0B0", "1F0 1B0"}));
  EXPECT_EQ(Message(PlaceRecvsJustInTime(unmatched)),
            "rank 0: a send to stage 1 has no matching 1RECV_F0 on rank 1");
}

}  // namespace
}  // namespace jitpipe::place_recvs_just_in_time_test
