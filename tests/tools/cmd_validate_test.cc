// End-to-end runs of `jitpipe validate`: summary line, relaxed vs strict
// semantics, exit codes, messages and the grid printed after them.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/testdata.h"

namespace jitpipe {
namespace {

using ::jitpipe::testing::CliResult;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::RunCli;
using ::jitpipe::testing::TestdataPath;
using ::jitpipe::testing::WriteTextFile;
using ::testing::HasSubstr;

// Writes `csv` to a fresh directory and returns its path.
std::string CsvFile(const std::string& csv) {
  const std::string path = MakeTempDir("cmd_validate") + "/s.csv";
  WriteTextFile(path, csv);
  return path;
}

TEST(CmdValidateTest, LoweredProgramDeadlockFreeUnderBothSemantics) {
  const std::string path = CsvFile("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  CliResult r = RunCli({"validate", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, path +
                       ": ok: pp 2, 2 stages (loop placement), 1 microbatches, lowered, 8 actions; "
                       "deadlock-free under relaxed semantics (tag-matched transports, PyTorch's "
                       "runtime) and under strict rendezvous semantics\n");
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(RunCli({"validate", "--strict", path}).out, r.out);
}

constexpr char kTorchtitanStrictDeadlock[] =
    "deadlock under strict rendezvous semantics: wait cycle 0 -> 1 -> 0: rank 0 at index 5 "
    "(0SEND_F1) waits for rank 1 to post 1RECV_F1 (index 5); rank 1 at index 4 (1SEND_F0) "
    "waits for rank 0 to post 2RECV_F0 (index 6)";

TEST(CmdValidateTest, SaysWhichProgramsNeedTheRelaxedModel) {
  const std::string path = TestdataPath("conformance/real/torchtitan_example.csv");
  CliResult r = RunCli({"validate", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, path +
                       ": ok: pp 2, 4 stages (loop placement), 4 microbatches, lowered, 86 actions; "
                       "deadlock-free under relaxed semantics (tag-matched transports, PyTorch's "
                       "runtime) only\n"
                       "  it fails under strict semantics (ordered rendezvous transports, e.g. a "
                       "single NCCL stream): " +
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
  EXPECT_EQ(r.out, summary +
                       "lowered with --recv jit: 16 actions, deadlock-free under relaxed semantics "
                       "(tag-matched transports, PyTorch's runtime) only\n"
                       "  for ordered rendezvous transports (e.g. a single NCCL stream) lower with "
                       "--recv jit-rendezvous; --recv jit fails under strict semantics: deadlock "
                       "under strict rendezvous semantics: wait cycle 0 -> 1 -> 0: rank 0 at index "
                       "3 (0SEND_F1) waits for rank 1 to post 1RECV_F1 (index 4); rank 1 at index "
                       "3 (1SEND_B0) waits for rank 0 to post 0RECV_B0 (index 4)\n");
  CliResult strict = RunCli({"validate", "--strict", path});
  EXPECT_EQ(strict.exit_code, 0) << strict.err;
  EXPECT_EQ(strict.out, summary +
                            "lowered with --recv jit-rendezvous: 16 actions, deadlock-free under "
                            "relaxed semantics (tag-matched transports, PyTorch's runtime) and "
                            "under strict rendezvous semantics\n");
}

TEST(CmdValidateTest, RealComputeOnlyFilesAreLoweredThenChecked) {
  for (const char* file :
       {"torchtitan_4-rank.csv", "dualpipev_4rank_10mb.csv", "zb1p_2rank_2stagep_compute.csv"}) {
    const std::string path = TestdataPath(std::string("conformance/real/") + file);
    CliResult r = RunCli({"validate", "--legacy-names", path});
    EXPECT_EQ(r.exit_code, 0) << file << ": " << r.err;
    EXPECT_THAT(r.out, HasSubstr(", compute-only, ")) << file;
    EXPECT_THAT(r.out, HasSubstr("; lowered with --recv jit: ")) << file;
    EXPECT_THAT(r.out, HasSubstr(" actions, deadlock-free under relaxed semantics (tag-matched "
                                 "transports, PyTorch's runtime) only\n  for ordered rendezvous "
                                 "transports (e.g. a single NCCL stream) lower with --recv "
                                 "jit-rendezvous; --recv jit fails under strict semantics: "))
        << file;
    CliResult strict = RunCli({"validate", "--strict", "--legacy-names", path});
    EXPECT_EQ(strict.exit_code, 0) << file << ": " << strict.err;
    EXPECT_THAT(strict.out, HasSubstr("; lowered with --recv jit-rendezvous: ")) << file;
    EXPECT_THAT(strict.out, HasSubstr(" actions, deadlock-free under relaxed semantics "
                                      "(tag-matched transports, PyTorch's runtime) and under "
                                      "strict rendezvous semantics\n"))
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
  EXPECT_THAT(r.out, HasSubstr("(tag-matched transports, PyTorch's runtime) only\n  it fails "
                               "under strict semantics (ordered rendezvous transports, e.g. a "
                               "single NCCL stream): " +
                               order_error + "\n"));
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

}  // namespace
}  // namespace jitpipe
