// Two hosts on one machine: each a network namespace with an address, a host
// name and, where a test asks, directories of its own (netns_hosts.sh), with
// Open MPI launching the second host's processes through a plm_rsh_agent
// that enters its namespaces, pinned to the namespaces' interface
// (btl_tcp_if_include, oob_tcp_if_include; btl tcp,self). A pp 4 x dp 2
// replay runs `--map-by slot` over them, as docs/execution.md tells users to.
//
// Skips, saying why, where the machine does not allow it: not root, no ip or
// unshare, `ip netns add` refused (CI may run unprivileged). Each test makes
// namespaces of its own and deletes them in TearDown, failed or not.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/testdata.h"

namespace jitpipe {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::CliResult;
using testing::MakeTempDir;
using testing::ReadTextFile;
using testing::RunCli;

std::string ShellQuote(const std::string& s) {
  return "'" + absl::StrReplaceAll(s, {{"'", "'\\''"}}) + "'";
}


struct Job {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `command` through sh, stdout and stderr apart, under `timeout -v`.
Job RunShell(const std::string& dir, const std::string& command) {
  const std::string full = absl::StrCat("timeout -v -k 5 60 sh -c ", ShellQuote(command), " > ",
                                        dir, "/out 2> ", dir, "/err");
  const int status = std::system(full.c_str());
  Job job;
  job.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  job.out = ReadTextFile(dir + "/out");
  job.err = ReadTextFile(dir + "/err");
  EXPECT_THAT(job.err, Not(HasSubstr("timeout: sending signal"))) << "the job hung: " << command;
  return job;
}

class TwoHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
    dir_ = MakeTempDir("netns");
    static std::atomic<int> count{0};
    const std::string name = absl::StrCat("jp", getpid(), "x", count++);
    const std::string up = absl::StrCat(kScript, " up ", dir_, " ", name, " 2> ", dir_, "/up.err");
    if (std::system(up.c_str()) != 0) {
      GTEST_SKIP() << "this machine does not allow two hosts in network namespaces: "
                   << ReadTextFile(dir_ + "/up.err");
    }
    made_ = true;
  }
  void TearDown() override {
    if (made_) std::system(absl::StrCat(kScript, " down ", dir_).c_str());
  }

  // Binds `src` over `dst` on host `host` (a or b) for the next jobs.
  void Mount(char host, const std::string& src, const std::string& dst) {
    std::ofstream(absl::StrCat(dir_, "/mounts.", std::string(1, host)), std::ios::app)
        << src << " " << dst << "\n";
  }

  // mpirun -np `np` `args` started on host a over both hosts (hostfile:
  // 4 slots each, or `slots` each), filled in rank order.
  Job RunOnTwoHosts(int np, const std::string& args, const std::string& mpirun_flags = "",
                    int slots = 4) {
    std::ofstream(dir_ + "/hostfile") << "10.77.0.1 slots=" << slots << "\n10.77.0.2 slots="
                                      << slots << "\n";
    const std::string mpirun = absl::StrCat(
        JITPIPE_MPIEXEC, " --allow-run-as-root --bind-to none --hostfile ", dir_,
        "/hostfile --map-by slot --display-map --mca plm_rsh_agent \"", kScript, " agent ", dir_,
        "\" --mca btl tcp,self --mca btl_tcp_if_include jp0 --mca oob_tcp_if_include jp0 ",
        mpirun_flags, " -np ", np, " ", args);
    return RunShell(dir_, absl::StrCat(kScript, " on ", dir_, " a ", ShellQuote(mpirun)));
  }

  static constexpr const char* kScript = JITPIPE_NETNS_HOSTS;
  std::string dir_;
  bool made_ = false;
};

std::string Generate(const std::string& dir) {
  const std::string path = dir + "/s.json";
  CliResult r = RunCli({"generate", "--schedule", "1f1b", "--pp", "4", "--microbatches", "8",
                        "-o", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return path;
}

// pp 4 x dp 2 over two hosts, ranks 0-3 on netns-a and 4-7 on netns-b: the
// same report as the same job on one host (loss, the check against the
// reference, every rank's plans), and each rank's measured peak within its
// plans.
TEST_F(TwoHostTest, ReplaysAsOnOneHost) {
  const std::string schedule = Generate(MakeTempDir("netns_schedule"));
  const std::string replay = absl::StrCat(JITPIPE_CLI, " replay ", schedule,
                                          " --backend mpi --stage mlp --dp 2 --steps 2 --json");
  Job two = RunOnTwoHosts(8, replay);
  ASSERT_EQ(two.exit_code, 0) << two.err;
  // --display-map: the second host, by its hostfile name, runs 4 processes
  // (ranks 4-7: --map-by slot fills the hosts in rank order).
  EXPECT_THAT(two.out, HasSubstr("Data for node: 10.77.0.2\tNum slots: 4\tMax slots: 0\tNum procs: 4\n"
                                 " \tProcess OMPI jobid: "));
  const std::string one_dir = MakeTempDir("netns_one_host");
  Job one = RunShell(one_dir, absl::StrCat(JITPIPE_MPIEXEC,
                                           " --allow-run-as-root --oversubscribe --bind-to none"
                                           " --mca btl_vader_single_copy_mechanism none -np 8 ",
                                           replay));
  ASSERT_EQ(one.exit_code, 0) << one.err;

  const nlohmann::json a = nlohmann::json::parse(two.out.substr(two.out.find("\n{") + 1));
  const nlohmann::json b = nlohmann::json::parse(one.out);
  EXPECT_EQ(a["step_loss"], b["step_loss"]);
  EXPECT_EQ(a["check"], b["check"]);
  ASSERT_EQ(a["ranks"].size(), 8u);
  ASSERT_EQ(b["ranks"].size(), 8u);
  // The plans are equal. The measured peaks are not compared with each
  // other: over MPI a send completes when its receive is matched, which
  // varies from run to run by a message or two on one host as on two
  // (memory/send_completion.h). Both lie between the plan that frees a sent
  // buffer at its post and the plan's bound.
  for (size_t w = 0; w < 8; ++w) {
    for (const char* key : {"planned_peak_bytes", "planned_post_peak_bytes"}) {
      EXPECT_EQ(a["ranks"][w][key], b["ranks"][w][key]) << key << " " << w;
    }
    for (const nlohmann::json* run : {&a, &b}) {
      const nlohmann::json& rank = (*run)["ranks"][w];
      EXPECT_GE(rank["measured_peak_bytes"].get<int64_t>(),
                rank["planned_post_peak_bytes"].get<int64_t>()) << w;
      EXPECT_LE(rank["measured_peak_bytes"].get<int64_t>(),
                rank["planned_peak_bytes"].get<int64_t>()) << w;
    }
  }
}

// The schedule's folder is empty on host b: ranks 4-7 fail before MPI
// starts, each naming its rank and host; ranks 0-3 read it.
TEST_F(TwoHostTest, AFileMissingOnOneHostNamesTheRankAndTheHost) {
  const std::string shared = MakeTempDir("netns_schedule");
  const std::string schedule = Generate(shared);
  Mount('b', MakeTempDir("netns_empty"), shared);
  Job job = RunOnTwoHosts(8, absl::StrCat(JITPIPE_CLI, " replay ", schedule,
                                          " --backend mpi --stage mlp --dp 2"));
  EXPECT_NE(job.exit_code, 0);
  for (int w = 4; w < 8; ++w) {
    EXPECT_THAT(job.err, HasSubstr(absl::StrCat("jitpipe replay: rank ", w, " on netns-b: ",
                                                schedule, ": no such file\n")));
  }
  for (int w = 0; w < 4; ++w) {
    EXPECT_THAT(job.err, Not(HasSubstr(absl::StrCat("rank ", w, " on netns-a: "))));
  }
}

// mpi_runtime_test's kill job over two hosts (ranks 0, 1 on netns-a; 2, 3
// on netns-b), each host with a flight directory of its own at the same
// path. Rank 2 dies of SIGKILL; rank 0's folder holds the records of the
// survivors, and fr-analyze names rank 2 among those that wrote none. Rank
// 3 waits on rank 2 and mpirun signals host b only after host a's processes
// are gone, so its record reaches rank 0 only because rank 0's failure
// notice over the record channel (comm/record_channel.h) tells it the job
// failed.
//
// One survivor may be ended by Open MPI itself: when the killed rank hangs
// up in the middle of a transfer with a neighbour, that neighbour's TCP
// transport prints "An MPI communication peer process has unexpectedly
// disconnected" and aborts its process, which then reports nothing (seen
// in 2 of 15 runs, each time with that notice, never without it). Only
// then may one record be missing, and never rank 0's, which collects them.
TEST_F(TwoHostTest, SurvivorsRecordsReachRankZero) {
  const std::string flight = MakeTempDir("netns_flight");
  const std::string on_a = MakeTempDir("netns_flight_a");
  const std::string on_b = MakeTempDir("netns_flight_b");
  Mount('a', on_a, flight);
  Mount('b', on_b, flight);
  Job job = RunOnTwoHosts(4, absl::StrCat(JITPIPE_MPI_RUNTIME_TEST,
                                          " --gtest_filter=MpiKillTest.*"),
                          absl::StrCat("--mca odls_base_sigkill_timeout 5 -x "
                                       "JITPIPE_TEST_FLIGHT_DIR=", flight),
                          /*slots=*/2);
  EXPECT_NE(job.exit_code, 0);
  const bool mpi_ended_a_neighbour =
      absl::StrContains(job.out + job.err, "peer process has unexpectedly disconnected");
  std::vector<int> missing;
  for (int w : {0, 1, 3}) {
    if (ReadTextFile(absl::StrCat(on_a, "/rank_", w, ".json")).empty()) missing.push_back(w);
  }
  EXPECT_FALSE(ReadTextFile(absl::StrCat(on_a, "/rank_0.json")).empty())
      << job.out << job.err;
  EXPECT_LE(missing.size(), mpi_ended_a_neighbour ? 1u : 0u)
      << "records missing: " << missing.size() << "\n" << job.out << job.err;
  CliResult analysis = RunCli({"fr-analyze", on_a});
  EXPECT_THAT(analysis.out, HasSubstr("rank 2 wrote no flight record"));
  if (missing.empty()) {
    EXPECT_THAT(analysis.out, HasSubstr("first unmatched: rank 2 wrote no flight record"));
  }
  for (int w : {1, 3}) {
    if (std::find(missing.begin(), missing.end(), w) != missing.end()) continue;
    EXPECT_THAT(analysis.out, Not(HasSubstr(absl::StrCat("rank ", w, " wrote no flight record"))));
  }
}

}  // namespace
}  // namespace jitpipe
