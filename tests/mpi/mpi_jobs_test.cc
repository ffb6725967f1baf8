// MPI jobs end to end, started the way a user starts them: `mpirun ... jitpipe
// replay FILE --backend mpi` as 4 processes (pp 4) and 8 (pp 4 x dp 2),
// compared with the in-process replay of the same file; a stage stuck in a
// call; the killed-rank job of mpi_runtime_test.cc, with what it leaves
// behind. (A stalled replay's flight records over MPI:
// replay_conformance_mpi_stall.)
//
// Every mpirun is wrapped in `timeout -v -k 5 <limit>`: a job that hangs is
// killed and the test fails on timeout's "sending signal" diagnostic; none
// may need it.
#include <sys/wait.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/sanitizers.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"
#include "traces/trace_checker.h"

namespace jitpipe {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::CliResult;
using testing::MakeTempDir;
using testing::ReadTextFile;
using testing::RunCli;

constexpr int kJobLimitSeconds = 60;

struct JobResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string Quote(const std::string& s) { return "'" + s + "'"; }


// Runs `args` as `np` MPI processes, stdout and stderr apart; `mpirun_flags`
// go to mpirun.
JobResult RunJob(int np, const std::vector<std::string>& args,
                 const std::string& mpirun_flags = "") {
  const std::string dir = MakeTempDir("mpi_job");
  std::vector<std::string> quoted;
  for (const std::string& a : args) quoted.push_back(Quote(a));
  const std::string command = absl::StrCat(
      "timeout -v -k 5 ", kJobLimitSeconds, " ", JITPIPE_MPIEXEC,
      " --allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none"
      " --bind-to none ",
      mpirun_flags, " -np ", np, " ", absl::StrJoin(quoted, " "), " > ", dir, "/out 2> ", dir, "/err");
  const int status = std::system(command.c_str());
  JobResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadTextFile(dir + "/out");
  r.err = ReadTextFile(dir + "/err");
  EXPECT_THAT(r.err, Not(HasSubstr("timeout: sending signal"))) << "the job hung: " << command;
  return r;
}

std::string Generate(const std::string& schedule, int pp, int m) {
  const std::string path = absl::StrCat(MakeTempDir("mpi_schedule"), "/", schedule, ".json");
  CliResult r = RunCli({"generate", "--schedule", schedule, "--pp", std::to_string(pp),
                        "--microbatches", std::to_string(m), "-o", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return path;
}

struct CliCase {
  std::string schedule;  // a generator's name, or a file under tests/testdata
  int dp = 1;
};

void PrintTo(const CliCase& c, std::ostream* os) { *os << c.schedule << " dp " << c.dp; }

std::string CaseName(const ::testing::TestParamInfo<CliCase>& info) {
  std::string name = info.param.schedule.substr(info.param.schedule.rfind('/') + 1);
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return absl::StrCat(name, "_dp", info.param.dp);
}

class MpiReplayCliTest : public ::testing::TestWithParam<CliCase> {};

// The same file replayed over MPI and in process: the same loss, the same
// distance from the reference (so the same gradients), every rank reported;
// the merged trace passes the checker and has a process per world rank.
TEST_P(MpiReplayCliTest, EqualsTheInProcessReplay) {
  const CliCase& c = GetParam();
  const bool is_file = c.schedule.find('/') != std::string::npos;
  const std::string file = is_file ? testing::TestdataPath(c.schedule) : Generate(c.schedule, 4, 8);
  const std::string trace = MakeTempDir("mpi_trace") + "/trace.json";
  const std::vector<std::string> common = {"replay", file, "--stage", "mlp", "--dp",
                                           std::to_string(c.dp), "--steps", "2", "--json"};
  std::vector<std::string> mpi_args = {JITPIPE_CLI};
  mpi_args.insert(mpi_args.end(), common.begin(), common.end());
  for (const char* a : {"--backend", "mpi", "--trace"}) mpi_args.push_back(a);
  mpi_args.push_back(trace);
  JobResult mpi = RunJob(4 * c.dp, mpi_args);
  ASSERT_EQ(mpi.exit_code, 0) << mpi.err;
  std::vector<std::string> inproc_args = common;
  for (const char* a : {"--backend", "inproc"}) inproc_args.push_back(a);
  CliResult inproc = RunCli(inproc_args);
  ASSERT_EQ(inproc.exit_code, 0) << inproc.err;

  const nlohmann::json a = nlohmann::json::parse(mpi.out);  // world rank 0 alone prints
  const nlohmann::json b = nlohmann::json::parse(inproc.out);
  EXPECT_EQ(a["backend"], "mpi");
  EXPECT_EQ(a["step_loss"], b["step_loss"]);
  EXPECT_EQ(a["check"]["ok"], true);
  EXPECT_EQ(a["check"]["loss_error"], b["check"]["loss_error"]);
  EXPECT_EQ(a["check"]["worst_grad_error"], b["check"]["worst_grad_error"]);
  ASSERT_EQ(a["ranks"].size(), static_cast<size_t>(4 * c.dp));
  for (size_t w = 0; w < a["ranks"].size(); ++w) {
    EXPECT_EQ(a["ranks"][w]["rank"], w);
    // MPI's plan holds a sent buffer until the first action after its
    // receive (--send-completion receive): its post figure is the in-process
    // plan, and the measured peak never exceeds its bound.
    EXPECT_EQ(a["ranks"][w]["planned_post_peak_bytes"], b["ranks"][w]["planned_peak_bytes"]);
    EXPECT_LE(a["ranks"][w]["measured_peak_bytes"], a["ranks"][w]["planned_peak_bytes"])
        << "world rank " << w;
    EXPECT_EQ(b["ranks"][w]["planned_post_peak_bytes"], b["ranks"][w]["planned_peak_bytes"]);
  }
  ASSERT_OK_AND_ASSIGN(ChromeTraceSummary summary, ReadAndCheckChromeTrace(trace));
  EXPECT_GT(summary.slices, 0);
  const std::string text = ReadTextFile(trace);
  for (int w = 0; w < 4 * c.dp; ++w) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat("\"name\":\"process_name\",\"cat\":\"__metadata\","
                                             "\"ph\":\"M\",\"ts\":0,\"pid\":",
                                             w, ",")))
        << "world rank " << w;
  }
}

// Every pattern in the release build; under a sanitizer one four-process
// job (interleaved: two stages a rank), since each case is a whole mpirun
// of instrumented processes and the others add no code path to the CLI.
// The data-parallel reduction over MPI runs instrumented in
// replay_conformance_mpi (tests/runtime/replay_conformance_test.cc).
std::vector<CliCase> CliCases() {
  if (testing::kSanitized) return {CliCase{"interleaved-1f1b"}};
  return {CliCase{"1f1b"},
          CliCase{"interleaved-1f1b"},
          CliCase{"zbv"},
          CliCase{"conformance/real/torchtitan_4-rank.csv"},
          CliCase{"interleaved-1f1b", 2},
          CliCase{"dualpipev", 2}};
}

INSTANTIATE_TEST_SUITE_P(FourAndEightProcesses, MpiReplayCliTest, ::testing::ValuesIn(CliCases()),
                         CaseName);

TEST(MpiReplayCliTest, RefusesAWorldThatIsNotPpTimesDp) {
  // Two jobs that end in argument checks: nothing for a sanitizer to see.
  if (testing::kSanitized) GTEST_SKIP() << "the release build runs it";
  const std::string file = Generate("1f1b", 4, 8);
  JobResult r = RunJob(3, {JITPIPE_CLI, "replay", file, "--backend", "mpi", "--stage", "mlp"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("jitpipe replay: ", file,
                                            ": the MPI world has 3 processes but pp 4 x dp 1 "
                                            "needs 4 (mpirun -np 4)\n")));
  JobResult dp = RunJob(3, {JITPIPE_CLI, "replay", file, "--backend", "mpi", "--stage", "mlp",
                            "--dp", "2"});
  EXPECT_NE(dp.exit_code, 0);
  // The MPI world no longer knows dp (it used to refuse "3 processes, which
  // is not a multiple of dp 2" when it started): the replay's size check
  // says what the job needs.
  EXPECT_THAT(dp.err, HasSubstr(absl::StrCat("jitpipe replay: ", file,
                                             ": the MPI world has 3 processes but pp 4 x dp 2 "
                                             "needs 8 (mpirun -np 8)\n")));
}

// Arena buffers over MPI: the executor completes a send before reusing its
// bytes, and a 256 KiB MPI_Isend (past Open MPI's eager limit) completes only
// once its receive is posted. The default just-in-time receives would
// deadlock; replay lowers for rendezvous instead, and refuses a lowered file
// that is not deadlock-free under rendezvous semantics.
TEST(MpiReplayCliTest, ArenaBuffersWithRendezvousMessages) {
  const std::string dir = MakeTempDir("mpi_arena");
  const std::string model = dir + "/model.json";
  testing::WriteTextFile(
      model,
      R"({"format": "jitpipe.model", "version": 1,
          "defaults": {"forward_us": 10, "backward_input_us": 10, "backward_weight_us": 10,
                       "input_bytes": 262144, "output_bytes": 262144, "stash_bytes": 4096,
                       "param_bytes": 4096}})");
  const std::string file = Generate("1f1b", 4, 8);
  JobResult r = RunJob(4, {JITPIPE_CLI, "replay", file, "--backend", "mpi", "--stage", "cost",
                           "--model", model, "--buffers", "arena", "--steps", "2", "--timeout",
                           "20"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("with cost stages, mpi backend"));

  const std::string lowered = dir + "/lowered.json";
  CliResult lower = RunCli({"lower", file, "--reduce-grad", "-o", lowered});
  ASSERT_EQ(lower.exit_code, 0) << lower.err;
  JobResult refused = RunJob(4, {JITPIPE_CLI, "replay", lowered, "--backend", "mpi", "--stage",
                                 "cost", "--model", model, "--buffers", "arena"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err,
              HasSubstr(absl::StrCat("jitpipe replay: ", lowered,
                                     ": arena buffers over MPI need a program that is "
                                     "deadlock-free under rendezvous semantics (lower it with "
                                     "--recv jit-rendezvous): deadlock under strict")));
}

// Stage 1's forward takes ten minutes (a kernel that never returns, as far
// as the job can tell). Ranks 2 and 3 time out after 1 s; rank 1's watchdog
// finds the job aborted while rank 1 is still in its stage, writes rank 1's
// flight record and reports it stuck, so the analysis names rank 1 at 1F0;
// rank 1's process then finalises MPI beside the stuck thread and exits,
// so every process ends in order. The whole job ends long before the ten
// minutes (RunJob's limit is 60 s); with MPI_Abort ending it instead,
// mpirun hung or crashed at its own exit in 3 of 12 runs.
TEST(MpiStuckStageJobTest, TheJobEndsAndTheAnalysisNamesTheStuckRank) {
  const std::string dir = MakeTempDir("mpi_stuck");
  const std::string model = dir + "/model.json";
  testing::WriteTextFile(
      model,
      R"({"format": "jitpipe.model", "version": 1,
          "defaults": {"forward_us": 10, "backward_input_us": 10, "backward_weight_us": 10,
                       "input_bytes": 64, "output_bytes": 64},
          "stages": [{"index": 1, "forward_us": 600000000}]})");
  const std::string file = Generate("1f1b", 4, 4);
  const std::string flight = dir + "/flight";
  JobResult r = RunJob(4, {JITPIPE_CLI, "replay", file, "--backend", "mpi", "--stage", "cost",
                           "--model", model, "--timeout", "1", "--flight-dir", flight});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("stuck in a stage call (1)"));
  EXPECT_THAT(r.err, HasSubstr("rank 1's last op was index 0 (1RECV_F0), and it is at index 1 "
                               "(1F0)"));
  for (int w = 0; w < 4; ++w) {
    EXPECT_FALSE(ReadTextFile(absl::StrCat(flight, "/rank_", w, ".json")).empty()) << w;
  }
}

// mpi_runtime_test.cc's MpiKillTest: world rank 2 dies of SIGKILL mid-run.
// mpirun says so and terminates the others (SIGTERM); each of them fails
// at once with a clear error (no hang: timeout never fires), and rank 0's
// report names the rank that did not answer.
//
// mpirun sends SIGKILL odls_base_sigkill_timeout after its SIGTERM (1 s by
// default), and a process killed before it has printed its report leaves
// nothing to check: under ASan with another 4-process job beside it on two
// cores, the reports took longer and the job failed 4 runs of 4
// (tools/stress-test.sh mpi 3 asan); with 5 s, 3 of 3 passed. The
// processes' own bound after a SIGTERM (0.5 s, comm/mpi/mpi_world.h) is
// what the test is about, not mpirun's.
TEST(MpiKillJobTest, TheOthersFailWithAClearErrorAndNothingHangs) {
  JobResult r = RunJob(4, {JITPIPE_MPI_RUNTIME_TEST, "--gtest_filter=MpiKillTest.*"},
                       "--mca odls_base_sigkill_timeout 5");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("noticed that process rank 2 with PID"));
  EXPECT_THAT(r.err, HasSubstr("exited on signal 9 (Killed)"));
  for (int w : {0, 1, 3}) {
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat("rank ", w, " stopped: rank ")));
  }
  EXPECT_THAT(r.err, HasSubstr("was terminated by the launcher (SIGTERM): mpirun sends it once "
                               "another process of the job has died or exited with an error"));
  EXPECT_THAT(r.err, HasSubstr("no report, died or did not answer (2)"));
  EXPECT_THAT(r.err, Not(HasSubstr("rank 2 stopped")));
}

}  // namespace
}  // namespace jitpipe
