// End-to-end runs of `jitpipe validate`: summary line, relaxed vs strict
// semantics, exit codes, messages and the grid printed after them.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/testdata.h"

namespace jitpipe::cmd_validate_test {
namespace {

using ::jitpipe::testing::CliResult;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::RunCli;
using ::jitpipe::testing::TestdataPath;
using ::jitpipe::testing::WriteTextFile;
using ::testing::HasSubstr;
using ::testing::Not;

// Writes `csv` to a fresh directory and returns its path.
std::string CsvFile(const std::string& csv) {
  const std::string path = MakeTempDir("cmd_validate") + "/s.csv";
  WriteTextFile(path, csv);
  return path;
}

// The second line of the output, by what the program is safe for.
constexpr char kSafeForEveryTransport[] =
    "  safe for every transport: deadlock-free under relaxed semantics (tag-matched transports) "
    "and under strict rendezvous semantics (one NCCL stream, MPI_Ssend)\n";
constexpr char kSafeForTagMatchedUseJitRendezvous[] =
    "  safe for tag-matched transports (relaxed semantics: jitpipe's in-process and MPI replay, "
    "PyTorch's runtime); for rendezvous transports (one NCCL stream, MPI_Ssend, large MPI sends "
    "that complete only once received) lower with --recv jit-rendezvous (validate --strict "
    "checks that lowering; --verbose says why --recv jit is not enough)\n";
constexpr char kSafeForTagMatchedOnly[] =
    "  safe for tag-matched transports (relaxed semantics: jitpipe's in-process and MPI replay, "
    "PyTorch's runtime) only, not for rendezvous transports (one NCCL stream, MPI_Ssend, large "
    "MPI sends that complete only once received): --verbose says why; the compute-only "
    "schedule lowered with --recv jit-rendezvous is safe for those\n";

TEST(CmdValidateTest, LoweredProgramDeadlockFreeUnderBothSemantics) {
  const std::string path = CsvFile("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  CliResult r = RunCli({"validate", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, path +
                       ": ok: pp 2, 2 stages (loop placement), 1 microbatches, lowered, 8 actions\n" +
                       kSafeForEveryTransport);
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(RunCli({"validate", "--strict", path}).out, r.out);
  EXPECT_EQ(RunCli({"validate", "--verbose", path}).out, r.out);
}

constexpr char kTorchtitanStrictDeadlock[] =
    "deadlock under strict rendezvous semantics: wait cycle 0 -> 1 -> 0: rank 0 at index 5 "
    "(0SEND_F1) waits for rank 1 to post 1RECV_F1 (index 5); rank 1 at index 4 (1SEND_F0) "
    "waits for rank 0 to post 2RECV_F0 (index 6)";

// A valid program reads as valid: "ok", then what it is safe for; why strict
// semantics fail only with --verbose (or, as an error, with --strict).
TEST(CmdValidateTest, SaysWhichProgramsNeedTheRelaxedModel) {
  const std::string path = TestdataPath("conformance/real/torchtitan_example.csv");
  CliResult r = RunCli({"validate", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string ok =
      path + ": ok: pp 2, 4 stages (loop placement), 4 microbatches, lowered, 86 actions\n";
  EXPECT_EQ(r.out, ok + kSafeForTagMatchedOnly);
  CliResult verbose = RunCli({"validate", "--verbose", path});
  EXPECT_EQ(verbose.exit_code, 0) << verbose.err;
  EXPECT_EQ(verbose.out, ok + kSafeForTagMatchedOnly + "  under strict semantics: " +
                             kTorchtitanStrictDeadlock + "\n");
}

TEST(CmdValidateTest, StrictFailsWithTheCycleAndTheGrid) {
  const std::string path = TestdataPath("conformance/real/torchtitan_example.csv");
  CliResult r = RunCli({"validate", path, "--strict"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "jitpipe validate: " + path + ": " + kTorchtitanStrictDeadlock +
                       "\n"
                       "        Rank 0   Rank 1  \n"
                       "Step 0: 0UNSHARD 1UNSHARD\n"
                       "Step 1: 2UNSHARD 3UNSHARD\n"
                       "Step 2: 0F0      1RECV_F0\n"
                       "Step 3: 0SEND_F0 1F0     \n"
                       "Step 4: 0F1              \n"
                       "Step 5: 0SEND_F1 1SEND_F0 <-- ERROR HERE\n");
}

TEST(CmdValidateTest, DeadlockExitsOneNamingTheCycle) {
  const std::string path = CsvFile("0F0,0RECV_B0,0B0,0SEND_F0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  CliResult r = RunCli({"validate", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "jitpipe validate: " + path +
                       ": deadlock under relaxed semantics: wait cycle 0 -> 1 -> 0: rank 0 at "
                       "index 2 (0B0) waits for rank 1 to post 1SEND_B0 (index 3); rank 1 at "
                       "index 1 (1F0) waits for rank 0 to post 0SEND_F0 (index 3)\n"
                       "        Rank 0   Rank 1  \n"
                       "Step 0: 0F0      1RECV_F0\n"
                       "Step 1: 0RECV_B0         \n"
                       "Step 2: 0B0      1F0      <-- ERROR HERE\n");
}

TEST(CmdValidateTest, MatchingErrorExitsOneWithTheProgramGrid) {
  const std::string path = CsvFile("0F0,0SEND_F0,0RECV_B0,0B0\n1F0,1B0,1SEND_B0\n");
  CliResult r = RunCli({"validate", path, "--grid-rows", "2"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "jitpipe validate: " + path +
                       ": rank 0, index 1 (0SEND_F0): no matching 1RECV_F0 on rank 1\n"
                       "        Rank 0   Rank 1\n"
                       "Step 0: 0F0      1F0   \n"
                       "Step 1: 0SEND_F0 1B0    <-- ERROR HERE\n"
                       "  (steps 2-3 not shown)\n");
}

TEST(CmdValidateTest, GridRowsZeroPrintsTheMessageOnly) {
  const std::string path = CsvFile("0F0,0SEND_F0,0RECV_B0,0B0\n1F0,1B0,1SEND_B0\n");
  CliResult r = RunCli({"validate", path, "--grid-rows=0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "jitpipe validate: " + path +
                       ": rank 0, index 1 (0SEND_F0): no matching 1RECV_F0 on rank 1\n");
}

TEST(CmdValidateTest, NegativeGridRowsIsAUsageError) {
  const std::string path = CsvFile("0F0,0B0\n1F0,1B0\n");
  EXPECT_EQ(RunCli({"validate", path, "--grid-rows", "-1"}).exit_code, 2);
}

// A compute-only file is lowered with --recv jit: the line says when the
// result needs tag-matched transports and what to do for ordered ones;
// --strict lowers with --recv jit-rendezvous instead.
TEST(CmdValidateTest, ComputeOnlyFileLoweredWithJitOrJitRendezvous) {
  const std::string path = CsvFile("0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  const std::string summary =
      path + ": ok: pp 2, 2 stages (loop placement), 2 microbatches, compute-only, 8 actions; ";
  CliResult r = RunCli({"validate", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, summary + "lowered with --recv jit: 16 actions\n" +
                       kSafeForTagMatchedUseJitRendezvous);
  CliResult verbose = RunCli({"validate", "--verbose", path});
  EXPECT_EQ(verbose.exit_code, 0) << verbose.err;
  EXPECT_EQ(verbose.out, r.out +
                             "  --recv jit under strict semantics: deadlock under strict "
                             "rendezvous semantics: wait cycle 0 -> 1 -> 0: rank 0 at index 3 "
                             "(0SEND_F1) waits for rank 1 to post 1RECV_F1 (index 4); rank 1 at "
                             "index 3 (1SEND_B0) waits for rank 0 to post 0RECV_B0 (index 4)\n");
  CliResult strict = RunCli({"validate", "--strict", path});
  EXPECT_EQ(strict.exit_code, 0) << strict.err;
  EXPECT_EQ(strict.out,
            summary + "lowered with --recv jit-rendezvous: 16 actions\n" + kSafeForEveryTransport);
}

TEST(CmdValidateTest, RealComputeOnlyFilesAreLoweredThenChecked) {
  for (const char* file :
       {"torchtitan_4-rank.csv", "dualpipev_4rank_10mb.csv", "zb1p_2rank_2stagep_compute.csv"}) {
    const std::string path = TestdataPath(std::string("conformance/real/") + file);
    CliResult r = RunCli({"validate", "--legacy-names", path});
    EXPECT_EQ(r.exit_code, 0) << file << ": " << r.err;
    EXPECT_THAT(r.out, HasSubstr(", compute-only, ")) << file;
    EXPECT_THAT(r.out, HasSubstr("; lowered with --recv jit: ")) << file;
    EXPECT_THAT(r.out, HasSubstr(std::string(" actions\n") + kSafeForTagMatchedUseJitRendezvous))
        << file;
    CliResult strict = RunCli({"validate", "--strict", "--legacy-names", path});
    EXPECT_EQ(strict.exit_code, 0) << file << ": " << strict.err;
    EXPECT_THAT(strict.out, HasSubstr("; lowered with --recv jit-rendezvous: ")) << file;
    EXPECT_THAT(strict.out, HasSubstr(std::string(" actions\n") + kSafeForEveryTransport))
        << file;
  }
}

// The per-pair order is a strict rule only: relaxed semantics accept the
// file, --strict names the receive out of order.
TEST(CmdValidateTest, PerPairOrderFailsOnlyUnderStrict) {
  const std::string path = CsvFile(
      "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
      "1RECV_F1,1RECV_F0,1F0,1F1,1B0,1SEND_B0,1B1,1SEND_B1\n");
  const std::string order_error =
      "rank 1, index 0 (1RECV_F1): out of order with rank 0: rank 0 sends 0SEND_F0 (index 1) "
      "before 0SEND_F1 (index 3), but this rank receives 1RECV_F1 before 1RECV_F0 (index 1); "
      "under strict rendezvous semantics sends and receives between two ranks match in posting "
      "order";
  CliResult r = RunCli({"validate", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(kSafeForTagMatchedOnly));
  EXPECT_THAT(r.out, Not(HasSubstr(order_error)));
  CliResult verbose = RunCli({"validate", "--verbose", path});
  EXPECT_THAT(verbose.out, HasSubstr(std::string(kSafeForTagMatchedOnly) +
                                     "  under strict semantics: " + order_error + "\n"));
  CliResult strict = RunCli({"validate", "--strict", "--grid-rows=0", path});
  EXPECT_EQ(strict.exit_code, 1);
  EXPECT_EQ(strict.err, "jitpipe validate: " + path + ": " + order_error + "\n");
}

TEST(CmdValidateTest, StructureErrorIsOneLineWithoutGrid) {
  const std::string path = CsvFile("0F0,0B0\n1B0,1F0\n");
  CliResult r = RunCli({"validate", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "jitpipe validate: " + path +
                       ": rank 1, index 0 (1B0): full backward of stage 1 microbatch 0 comes "
                       "before its forward\n");
}

// A file from the zero-bubble repository names the input backward B: the
// error says which flag reads it.
TEST(CmdValidateTest, LegacyZeroBubbleFilePointsAtLegacyNames) {
  const std::string path = TestdataPath("conformance/real/zb1p_2rank_2stagep_compute.csv");
  CliResult r = RunCli({"validate", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "jitpipe validate: " + path +
                       ": rank 0, index 6 (2W0): weight backward of stage 2 microbatch 0 after "
                       "the full backward at index 5; B already computes weight gradients (W "
                       "needs an I) (files from the zero-bubble repository use B for the input "
                       "backward: pass --legacy-names)\n");
  CliResult legacy = RunCli({"validate", "--legacy-names", path});
  EXPECT_EQ(legacy.exit_code, 0) << legacy.err;
  EXPECT_THAT(legacy.out, HasSubstr(": ok: pp 2, 4 stages (loop placement), 8 microbatches"));
}

// A JSON file written by hand from the format documentation, without
// "placement", "stage_to_rank" and "lowered", loads and validates.
TEST(CmdValidateTest, HandWrittenJsonWithoutTheInferredFieldsValidates) {
  const std::string path = MakeTempDir("cmd_validate") + "/hand.json";
  WriteTextFile(path, R"({"format": "jitpipe.schedule", "version": 1, "pp": 2,
 "stages_per_rank": 1, "microbatches": 2,
 "ranks": [["0F0", "0F1", "0B0", "0B1"], ["1F0", "1B0", "1F1", "1B1"]]}
)");
  CliResult r = RunCli({"validate", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, path +
                       ": ok: pp 2, 2 stages (loop placement), 2 microbatches, compute-only, 8 "
                       "actions; lowered with --recv jit: 16 actions\n" +
                       kSafeForTagMatchedUseJitRendezvous);
}

// The issue's acceptance test: a program that relaxed semantics and one
// communicator per directed pair of ranks run, and whose shared FIFO on one
// group communicator deadlocks: validate --comms per-group finds the cycle.
constexpr char kSharedFifoCycle[] =
    "0F0,0SEND_F0,0F1,0RECV_B0,0SEND_F1,0B0,0RECV_B1,0B1\n"
    "1RECV_F0,1F0,1B0,1RECV_F1,1SEND_B0,1F1,1B1,1SEND_B1\n";

TEST(CmdValidateTest, PerGroupFindsTheSharedFifoCycleRelaxedAndPerEdgePass) {
  const std::string path = CsvFile(kSharedFifoCycle);
  CliResult relaxed = RunCli({"validate", path});
  EXPECT_EQ(relaxed.exit_code, 0) << relaxed.err;
  CliResult edge = RunCli({"validate", path, "--comms", "per-edge"});
  EXPECT_EQ(edge.exit_code, 0) << edge.err;
  EXPECT_THAT(edge.out,
              HasSubstr("\n  communicators per-edge: deadlock-free when each communicator's "
                        "operations complete in FIFO order (one per directed pair of ranks)\n"
                        "  first use of each communicator, if created lazily: rank 0: 0->1 at "
                        "index 1 (0SEND_F0), 1->0 at index 3 (0RECV_B0); rank 1: 0->1 at index "
                        "0 (1RECV_F0), 1->0 at index 4 (1SEND_B0)\n  lazy creation: ok"));
  CliResult group = RunCli({"validate", path, "--comms", "per-group"});
  EXPECT_EQ(group.exit_code, 1);
  EXPECT_EQ(group.out, "");
  EXPECT_EQ(group.err,
            "jitpipe validate: " + path +
                ": deadlock under FIFO completion on one communicator for the pipeline group: "
                "wait cycle 0 -> 1 -> 0: 0RECV_B0 (rank 0, index 3) waits for its partner "
                "1SEND_B0 (rank 1, index 4), queued on the group communicator behind 1RECV_F1 "
                "(index 3); 1RECV_F1 (rank 1, index 3) waits for its partner 0SEND_F1 (rank 0, "
                "index 4), queued on the group communicator behind 0RECV_B0 (index 3); stuck: "
                "rank 0 at index 5 (0B0) waits for 0RECV_B0 (index 3) to complete; rank 1 at "
                "index 5 (1F1) waits for 1RECV_F1 (index 3) to complete\n");
}

// Lazily created communicators: the first-use order is printed, a hang
// reported, and an error with --lazy-comms.
TEST(CmdValidateTest, LazyCommunicatorsCreatedInOppositeOrdersHang) {
  const std::string path = CsvFile(
      "3RECV_F0,0F0,0SEND_F0,3F0,3B0,3SEND_B0,0RECV_B0,0B0\n"
      "1RECV_F0,1F0,2F0,2SEND_F0,2RECV_B0,2B0,1B0,1SEND_B0\n");
  CliResult r = RunCli({"validate", path, "--comms", "per-edge"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("first use of each communicator, if created lazily: rank 0: "
                               "1->0 at index 0 (3RECV_F0), 0->1 at index 2 (0SEND_F0); rank 1: "
                               "0->1 at index 0 (1RECV_F0), 1->0 at index 3 (2SEND_F0)\n"));
  EXPECT_THAT(r.out, HasSubstr("  lazy creation: would hang: deadlock under FIFO completion on "
                               "one communicator per directed pair of ranks (created lazily): "
                               "wait cycle 0 -> 1 -> 0: rank 0 at index 0 (3RECV_F0) creates "
                               "communicator 1->0"));
  CliResult lazy = RunCli({"validate", path, "--comms", "per-edge", "--lazy-comms"});
  EXPECT_EQ(lazy.exit_code, 1);
  EXPECT_THAT(lazy.err, HasSubstr("(created lazily): wait cycle 0 -> 1 -> 0"));
}

TEST(CmdValidateTest, CommsUsageErrors) {
  const std::string path = CsvFile(kSharedFifoCycle);
  CliResult bad = RunCli({"validate", path, "--comms", "per-pair"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--comms must be per-edge or per-group, not \"per-pair\""));
  CliResult lazy = RunCli({"validate", path, "--lazy-comms"});
  EXPECT_EQ(lazy.exit_code, 2);
  EXPECT_THAT(lazy.err, HasSubstr("--lazy-comms needs --comms per-edge or per-group"));
}

}  // namespace
}  // namespace jitpipe::cmd_validate_test
