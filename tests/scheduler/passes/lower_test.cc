#include "scheduler/passes/lower.h"

#include <cctype>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"
#include "scheduler/ir/schedule_csv.h"
#include "scheduler/passes/lower_send_recv_early.h"
#include "scheduler/analysis/validate.h"
#include "tests/scheduler/passes/pass_test_util.h"
#include "tests/testing/conformance.h"
#include "tests/testing/sanitizers.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::lower_test {
namespace {

using ::jitpipe::testing::CsvFromJson;
using ::jitpipe::testing::FromRows;
using ::jitpipe::testing::JsonText;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::ProgramText;
using ::jitpipe::testing::PytorchConformanceNames;
using ::jitpipe::testing::ReadTestdata;
using ::jitpipe::testing::ReadTestdataJson;
using ::jitpipe::testing::Rows;

constexpr ValidateOptions kRelaxed{.semantics = CommSemantics::kRelaxed};
constexpr ValidateOptions kStrict{.semantics = CommSemantics::kStrict};

// Every test lowers with the invariant checks on, whatever the build type.
LowerOptions Options(RecvPlacement recv, bool fsdp = false, bool reduce_grad = false,
                     BackwardForm backward = BackwardForm::kKeep) {
  LowerOptions options;
  options.recv = recv;
  options.backward = backward;
  options.fsdp = fsdp;
  options.reduce_grad = reduce_grad;
  options.check_invariants = true;
  return options;
}

// The golden file's compute order (see the conformance README).
Schedule ComputeOrder(const nlohmann::json& d) {
  const std::string source = d["schedule"] == "GPipe" ? "ranks_before_reduce_grad"
                             : d["schedule"] == "1F1B" ? "ranks_runtime_equivalent"
                                                       : "ranks";
  absl::StatusOr<Schedule> s = ParseScheduleCsv(CsvFromJson(d[source]));
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : Schedule{};
}

class LowerConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    d_ = ReadTestdataJson("conformance/pytorch/" + GetParam() + ".json");
    if (d_.contains("error")) GTEST_SKIP() << "PyTorch refuses these parameters";
    compute_ = ComputeOrder(d_);
  }
  nlohmann::json d_;
  Schedule compute_;
};

// PyTorch's full lowering (_prepare_schedule_with_comms: unshard/reshard,
// reduce_grad, send/recv), exactly.
TEST_P(LowerConformanceTest, EarlyWithFsdpAndReduceGradEqualsPyTorch) {
  if (!d_.contains("ranks_with_comms")) GTEST_SKIP() << "PyTorch cannot lower 1F1B's IR";
  ASSERT_OK_AND_ASSIGN(Schedule lowered,
                       Lower(compute_, Options(RecvPlacement::kEarly, true, true)));
  EXPECT_EQ(ProgramText(lowered.ranks), JsonText(d_["ranks_with_comms"]));
}

TEST_P(LowerConformanceTest, EarlyAloneEqualsAddSendRecv) {
  ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(compute_, Options(RecvPlacement::kEarly)));
  EXPECT_EQ(ProgramText(lowered.ranks),
            JsonText(d_[d_["schedule"] == "1F1B" ? "ranks_runtime_equivalent_send_recv"
                                                 : "ranks_send_recv_only"]));
}

// The options that change which passes run, for one receive placement.
std::vector<LowerOptions> Variants(RecvPlacement recv) {
  return {Options(recv), Options(recv, true, true),
          Options(recv, false, true, BackwardForm::kSplit),
          Options(recv, false, false, BackwardForm::kMerge)};
}

// "Prove it deadlock-free": the jit lowering passes Validate() under
// relaxed semantics, the jit-rendezvous one under strict semantics too, with
// and without the optional passes.
TEST_P(LowerConformanceTest, JitIsDeadlockFreeUnderRelaxedSemantics) {
  for (const LowerOptions& options : Variants(RecvPlacement::kJit)) {
    ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(compute_, options));
    EXPECT_TRUE(lowered.lowered);
    EXPECT_OK(Validate(lowered, kRelaxed));
  }
}

TEST_P(LowerConformanceTest, JitRendezvousIsDeadlockFreeUnderBothSemantics) {
  for (const LowerOptions& options : Variants(RecvPlacement::kJitRendezvous)) {
    ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(compute_, options));
    EXPECT_TRUE(lowered.lowered);
    EXPECT_OK(Validate(lowered, kRelaxed));
    EXPECT_OK(Validate(lowered, kStrict));
  }
}

INSTANTIATE_TEST_SUITE_P(Pytorch, LowerConformanceTest,
                         ::testing::ValuesIn(PytorchConformanceNames()));

// Every registered generator, pp 1..8, a range of microbatch counts and
// stages per rank: whatever the generator accepts lowers (invariants checked
// after every pass) with --recv jit to a program valid under relaxed
// semantics, and with --recv jit-rendezvous to one valid under relaxed and
// strict semantics and under FIFO completion on communicators per edge and
// per group.
class LowerGeneratorGridTest : public ::testing::TestWithParam<std::string> {};

// Under a sanitizer every third microbatch count (17 s of the ASan suite).
TEST_P(LowerGeneratorGridTest, JitLoweringsAreDeadlockFree) {
  int lowered_count = 0;
  // Index spaces: pp, stages per rank, microbatches.
  for (int pp = 1; pp <= 8; ++pp) {
    for (int v : {1, 2, 4}) {
      for (int m = 1; m <= 3 * pp + 1; m += testing::kSanitized ? 3 : 1) {
        absl::StatusOr<Schedule> s = Generate(
            {.schedule = GetParam(), .pp = pp, .microbatches = m, .stages_per_rank = v});
        if (!s.ok()) continue;  // parameters this schedule does not support
        const std::string what = absl::StrCat(GetParam(), " pp ", pp, " v ", v, " m ", m);
        for (RecvPlacement recv : {RecvPlacement::kJit, RecvPlacement::kJitRendezvous}) {
          for (const LowerOptions& options : {Options(recv), Options(recv, true, true)}) {
            absl::StatusOr<Schedule> lowered = Lower(*s, options);
            ASSERT_TRUE(lowered.ok()) << what << ": " << lowered.status();
            ASSERT_OK(Validate(*lowered, kRelaxed)) << what;
            if (recv == RecvPlacement::kJitRendezvous) {
              ASSERT_OK(Validate(*lowered, kStrict)) << what;
              // What `lower --comms` relies on: safe under strict semantics,
              // safe under FIFO completion in either communicator layout.
              ASSERT_OK(Validate(*lowered, {.comms = CommLayout::kPerGroup})) << what;
              ASSERT_OK(Validate(*lowered, {.comms = CommLayout::kPerEdge})) << what;
            }
          }
        }
        ++lowered_count;
      }
    }
  }
  EXPECT_GT(lowered_count, 0) << GetParam() << " accepted no parameters";
}

// Lowering a schedule it is given (released after the first pass) writes
// what lowering a borrowed one writes, whichever pass comes first: an
// in-place placement, a copying pass, or none at all beyond the lowering.
TEST(LowerTest, AGivenScheduleLowersAsABorrowedOne) {
  ASSERT_OK_AND_ASSIGN(const Schedule s, Generate({"interleaved-1f1b", 4, 8, 2}));
  const std::vector<LowerOptions> option_sets = {
      {},
      {.recv = RecvPlacement::kEarly, .fsdp = true},
      {.recv = RecvPlacement::kJitRendezvous, .backward = BackwardForm::kSplit,
       .reduce_grad = true, .dump_after = "split_backward"},
  };
  for (const LowerOptions& options : option_sets) {
    ASSERT_OK_AND_ASSIGN(LowerResult borrowed, LowerWithDump(s, options));
    Schedule copy = s;
    ASSERT_OK_AND_ASSIGN(LowerResult given, LowerWithDump(std::move(copy), options));
    EXPECT_EQ(given.lowered, borrowed.lowered);
    EXPECT_EQ(given.dumped, borrowed.dumped);
  }
  Schedule lowered_input = *Lower(s);
  EXPECT_EQ(Lower(std::move(lowered_input)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// Over FIFO communicators: --recv jit as it is deadlocks on one group
// communicator for most schedules (1F1B already), while with `comms` set
// the lowering places receives for them, and the result runs on both
// layouts, on every generator (the lowering checks it; so does the test).
TEST(LowerTest, CommsMakeTheJitLoweringSafeForFifoCommunicators) {
  ASSERT_OK_AND_ASSIGN(Schedule one_f_one_b, Generate({"1f1b", 4, 8, 0}));
  ASSERT_OK_AND_ASSIGN(Schedule jit, Lower(one_f_one_b));
  EXPECT_OK(Validate(jit, {.comms = CommLayout::kPerEdge}));
  EXPECT_FALSE(Validate(jit, {.comms = CommLayout::kPerGroup}).ok());
  for (const GeneratorInfo& info : AllGenerators()) {
    for (int pp : {2, 4}) {
      absl::StatusOr<Schedule> s = Generate({info.name, pp, 2 * pp, 2});
      if (!s.ok()) s = Generate({info.name, pp, 2 * pp, 0});
      ASSERT_OK(s.status()) << info.name;
      for (CommLayout layout : {CommLayout::kPerEdge, CommLayout::kPerGroup}) {
        SCOPED_TRACE(absl::StrCat(info.name, " pp ", pp, " ", CommLayoutName(layout)));
        ASSERT_OK_AND_ASSIGN(Schedule lowered,
                             Lower(*s, {.reduce_grad = true, .comms = layout}));
        EXPECT_OK(Validate(lowered, {.comms = CommLayout::kPerEdge}));
        EXPECT_OK(Validate(lowered, {.comms = CommLayout::kPerGroup}));
      }
    }
  }
}

std::vector<std::string> GeneratorNames() {
  std::vector<std::string> names;
  for (const GeneratorInfo& info : AllGenerators()) names.push_back(info.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(
    AllGenerators, LowerGeneratorGridTest, ::testing::ValuesIn(GeneratorNames()),
    [](const ::testing::TestParamInfo<std::string>& param) {
      std::string name;
      for (char c : param.param) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

TEST(LowerTest, RealFilesLowerAndValidate) {
  struct RealFile {
    const char* path;
    bool legacy_names;
  };
  for (const RealFile& file : {RealFile{"dualpipev_4rank_10mb.csv", false},
                               RealFile{"torchtitan_4-rank.csv", false},
                               RealFile{"zb1p_2rank_2stagep_compute.csv", true}}) {
    ASSERT_OK_AND_ASSIGN(
        Schedule s, ParseScheduleCsv(ReadTestdata(std::string("conformance/real/") + file.path),
                                     CsvReadOptions{.legacy_backward_names = file.legacy_names}));
    ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(s, Options(RecvPlacement::kJit)));
    EXPECT_OK(Validate(lowered, kRelaxed)) << file.path;
    ASSERT_OK_AND_ASSIGN(Schedule rendezvous, Lower(s, Options(RecvPlacement::kJitRendezvous)));
    EXPECT_OK(Validate(rendezvous, kStrict)) << file.path;
  }
}

TEST(LowerTest, RefusesALoweredSchedule) {
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleCsv(ReadTestdata(
                                       "conformance/real/torchtitan_example.csv")));
  absl::StatusOr<Schedule> lowered = Lower(s);
  EXPECT_EQ(lowered.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Message(lowered),
            "the schedule is already lowered (it holds sends, receives or reductions); lowering "
            "takes a compute-only schedule");
}

TEST(LowerTest, RefusesAnInvalidSchedule) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0F1 0B0 0B1", "1B0 1F0 1F1 1B1"}));
  absl::StatusOr<Schedule> lowered = Lower(s);
  EXPECT_EQ(lowered.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(lowered), "rank 1, index 0 (1B0): full backward of stage 1 microbatch 0 "
                              "comes before its forward");
}

TEST(LowerTest, APassErrorNamesThePass) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0B0 0F1 0B1", "1F1 1B1 1F0 1B0"}));
  absl::StatusOr<Schedule> lowered = Lower(s);
  EXPECT_EQ(lowered.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(lowered),
            "pass lower_send_recv_early: no rank can make progress (a cyclic wait; PyTorch: "
            "\"Malformed compute schedule, can't schedule sends/recvs\"): rank 0, index 1 (0B0) "
            "waits for 0RECV_B0 from rank 1; rank 1, index 0 (1F1) waits for 1RECV_F1 from rank "
            "0");
}

TEST(LowerTest, PassNamesFollowTheOptions) {
  EXPECT_EQ(LoweringPassNames({}),
            (std::vector<std::string>{"lower_send_recv_early", "place_recvs_just_in_time"}));
  EXPECT_EQ(LoweringPassNames(Options(RecvPlacement::kEarly, true, true, BackwardForm::kSplit)),
            (std::vector<std::string>{"split_backward", "add_unshard_reshard", "add_reduce_grad",
                                      "lower_send_recv_early"}));
  EXPECT_EQ(
      LoweringPassNames(Options(RecvPlacement::kJit, false, false, BackwardForm::kMerge)).front(),
      "merge_backward");
  EXPECT_EQ(LoweringPassNames(Options(RecvPlacement::kJitRendezvous)),
            (std::vector<std::string>{"lower_send_recv_early", "place_recvs_jit_rendezvous"}));
}

TEST(LowerTest, RecvPlacementNamesRoundTrip) {
  for (RecvPlacement recv : {RecvPlacement::kEarly, RecvPlacement::kJit,
                             RecvPlacement::kJitRendezvous, RecvPlacement::kOffset}) {
    ASSERT_OK_AND_ASSIGN(RecvPlacement parsed, ParseRecvPlacement(RecvPlacementName(recv)));
    EXPECT_EQ(parsed, recv) << RecvPlacementName(recv);
  }
  EXPECT_EQ(RecvPlacementName(RecvPlacement::kJitRendezvous), "jit-rendezvous");
  absl::StatusOr<RecvPlacement> bad = ParseRecvPlacement("late");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(bad),
            "unknown receive placement \"late\"; expected early, jit, jit-rendezvous or offset");
}

// recv offset runs place_recvs_ahead with what recv_offsets chooses from
// the early program: 0 everywhere lowers as jit, all as early.
TEST(LowerTest, OffsetPlacementRunsTheChooser) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0F1 0F2 0B0 0B1 0B2", "1F0 1B0 1F1 1B1 1F2 1B2"}));
  ASSERT_OK_AND_ASSIGN(Schedule jit, Lower(s, Options(RecvPlacement::kJit)));
  ASSERT_OK_AND_ASSIGN(Schedule early, Lower(s, Options(RecvPlacement::kEarly)));
  for (int k : {0, kRecvAheadAll}) {
    LowerOptions options = Options(RecvPlacement::kOffset);
    int calls = 0;
    options.recv_offsets = [&](const Schedule& in) -> absl::StatusOr<RecvOffsets> {
      ++calls;
      EXPECT_TRUE(in.lowered);
      return RecvOffsets{.fallback = k};
    };
    ASSERT_OK_AND_ASSIGN(Schedule offset, Lower(s, options));
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(Rows(offset), Rows(k == 0 ? jit : early)) << "k " << k;
  }
  EXPECT_EQ(LoweringPassNames({.recv = RecvPlacement::kOffset}),
            (std::vector<std::string>{"lower_send_recv_early", "place_recvs_ahead"}));
}

TEST(LowerTest, OffsetPlacementNeedsAChooserAndTagMatching) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0B0", "1F0 1B0"}));
  absl::StatusOr<Schedule> no_chooser = Lower(s, {.recv = RecvPlacement::kOffset});
  EXPECT_EQ(no_chooser.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(no_chooser).find("needs recv_offsets"), std::string::npos);
  LowerOptions fifo{.recv = RecvPlacement::kOffset,
                    .recv_offsets = [](const Schedule&) -> absl::StatusOr<RecvOffsets> {
                      return RecvOffsets{};
                    }};
  fifo.comms = CommLayout::kPerEdge;
  absl::StatusOr<Schedule> over_fifo = Lower(s, fifo);
  EXPECT_EQ(over_fifo.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(over_fifo).find("relaxed semantics only"), std::string::npos);
}

// The two just-in-time placements of the same crossing program: rank 1
// receives F1 right before 1F1 (jit), or before its SEND of B0 so that an
// ordered rendezvous transport cannot deadlock (jit-rendezvous).
TEST(LowerTest, JitAndJitRendezvousDifferWhereRanksSendToEachOther) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0F1 0B0 0B1", "1F0 1B0 1F1 1B1"}));
  ASSERT_OK_AND_ASSIGN(Schedule jit, Lower(s, Options(RecvPlacement::kJit)));
  ASSERT_OK_AND_ASSIGN(Schedule rendezvous, Lower(s, Options(RecvPlacement::kJitRendezvous)));
  EXPECT_EQ(Rows(jit)[1], "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1");
  EXPECT_EQ(Rows(rendezvous)[1], "1RECV_F0 1F0 1B0 1RECV_F1 1SEND_B0 1F1 1B1 1SEND_B1");
  EXPECT_EQ(Rows(jit)[0], Rows(rendezvous)[0]);
  EXPECT_FALSE(Validate(jit, kStrict).ok());
  EXPECT_OK(Validate(rendezvous, kStrict));
}

TEST(LowerTest, DumpsTheProgramAfterANamedPass) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0F1 0B0 0B1", "1F0 1B0 1F1 1B1"}));
  LowerOptions options = Options(RecvPlacement::kJit);
  options.dump_after = "lower_send_recv_early";
  ASSERT_OK_AND_ASSIGN(LowerResult result, LowerWithDump(s, options));
  ASSERT_TRUE(result.dumped.has_value());
  ASSERT_OK_AND_ASSIGN(Schedule early, LowerSendRecvEarly(s));
  EXPECT_EQ(*result.dumped, early);
  EXPECT_EQ(Rows(result.lowered),
            (std::vector<std::string>{"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
                                      "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1"}));
}

TEST(LowerTest, RefusesToDumpAPassThatDoesNotRun) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0B0", "1F0 1B0"}));
  LowerOptions options;
  options.dump_after = "add_reduce_grad";
  absl::StatusOr<Schedule> lowered = Lower(s, options);
  EXPECT_EQ(lowered.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(lowered),
            "no pass named \"add_reduce_grad\" in the lower pipeline; its passes are: "
            "lower_send_recv_early, place_recvs_just_in_time");
}

}  // namespace
}  // namespace jitpipe::lower_test
