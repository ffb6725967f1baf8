// Every file the CLI writes goes through base/atomic_file.h: a writer killed
// or interrupted at any point leaves the old file, byte for byte, or the
// complete new one; never part of a file, and no temporary file behind.
// (Schedules, plan and simulation traces and SVGs are tested here; replay
// traces use the same ChromeTraceWriter::ToFile and flight records the same
// WriteFileAtomically, with outputs too small to kill reliably mid-way.)
// Each writer below is started over an existing output and sent a signal as
// soon as its temporary file is open, or first written to, as its
// /proc/PID/fd shows (the temporary is anonymous, O_TMPFILE, so no directory
// event announces it). Outputs that are not regular files (a FIFO, a device
// node) are written in place and stay what they were; an output that is an
// input is refused.
#include <signal.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "tests/testing/sanitizers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::atomic_output_test {
namespace {

using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::ReadTextFile;
using ::jitpipe::testing::RunCli;
using ::jitpipe::testing::WriteTextFile;

constexpr char kOldContents[] = "the previous output, which must survive\n";
// Kills per writer and moment. Each trial reruns the writer's whole
// computation before the kill, so trials cost minutes (five were 93 s of the
// ASan stage and the release suite's slowest binary); one under a sanitizer
// (a killed process reports nothing to it), two in release: every output
// here takes milliseconds to write, far longer than the kill takes to land,
// so a single trial already catches the writer mid-way.
constexpr int kTrials = testing::kSanitized ? 1 : 2;
constexpr int kMaxTrials = 6;

// Every entry of `dir` (names), to compare before and after a run.
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    found.push_back(entry.path().filename().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

// The writer starts with the signals this test sends at their default
// disposition: the CLI keeps a signal the shell ignored ignored (as nohup
// wants), so a test run from `nohup` or a background job would otherwise
// send signals nobody handles.
pid_t Spawn(const std::vector<std::string>& args) {
  pid_t pid = fork();
  if (pid == 0) {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) signal(sig, SIG_DFL);
    int null_fd = open("/dev/null", O_WRONLY);
    dup2(null_fd, 1);
    dup2(null_fd, 2);
    std::string binary = JITPIPE_CLI;
    std::vector<std::string> copy = args;
    std::vector<char*> argv = {binary.data()};
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

enum class KillAt { kCreate, kFirstWrite };

// The size of the temporary file `pid` holds open in `dir` (an anonymous
// O_TMPFILE shows as "DIR/#INODE (deleted)", a named one as
// "DIR/.jitpipe-..."), or -1 while it holds none.
long long TemporarySize(pid_t pid, const std::string& dir) {
  const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(fds, error)) {
    char target[4096];
    const ssize_t n = readlink(entry.path().c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    const std::string link(target, static_cast<size_t>(n));
    if (link.rfind(dir + "/#", 0) != 0 && link.rfind(dir + "/.jitpipe-", 0) != 0) continue;
    struct stat info;
    if (stat(entry.path().c_str(), &info) == 0) return static_cast<long long>(info.st_size);
  }
  return -1;
}

// Runs `args` and sends `signal_number` when its temporary file in `dir` is
// open (kCreate) or holds bytes (kFirstWrite). Returns true when the signal
// ended it (false when it exited first).
bool RunAndSignal(const std::vector<std::string>& args, const std::string& dir, KillAt when,
                  int signal_number) {
  const pid_t pid = Spawn(args);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  bool sent = false;
  while (!sent && std::chrono::steady_clock::now() < deadline) {
    const long long size = TemporarySize(pid, dir);
    if (size > (when == KillAt::kCreate ? -1 : 0)) {
      // Stopped first, so that the signal lands where the writer was seen,
      // not after it raced on to its rename; a stopped process takes SIGKILL
      // at once and any other signal when continued.
      kill(pid, SIGSTOP);
      sent = kill(pid, signal_number) == 0;
      kill(pid, SIGCONT);
      break;
    }
    if (waitpid(pid, nullptr, WNOHANG) == pid) return false;
    usleep(50);
  }
  if (!sent) kill(pid, SIGKILL);  // the deadline passed: fail below, don't leak
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(sent) << "no temporary file appeared in " << dir;
  return sent && WIFSIGNALED(status) && WTERMSIG(status) == signal_number;
}

struct Writer {
  std::string name;
  std::string out_name;            // the output file, in the test's directory
  std::vector<std::string> args;   // {dir}: the test's directory
  // The one signal of InterruptedOrTerminatedMidWrite under a sanitizer:
  // the three share one handler (base/temp_file_cleanup.cc), and the table
  // gives each to a fast writer and a slow one.
  int sanitized_signal = SIGINT;
};

void PrintTo(const Writer& w, std::ostream* os) { *os << w.name; }

class AtomicOutputTest : public ::testing::TestWithParam<Writer> {
 protected:
  // The inputs, made once for the suite and copied into each test's
  // directory (generating the schedule in every test's SetUp was 18 CLI
  // runs): a large compute-only schedule (large enough that writing its plan
  // or trace outlasts the kill; a sanitizer slows the writer enough for a
  // quarter of it) and a model with sizes.
  static void SetUpTestSuite() {
    const std::string pp = testing::kSanitized ? "32" : "64";
    const std::string microbatches = testing::kSanitized ? "128" : "256";
    ASSERT_EQ(RunCli({"generate", "--schedule", "interleaved-1f1b", "--pp", pp,
                      "--stages-per-rank", "4", "--microbatches", microbatches, "-o",
                      InputsDir() + "/in.json"})
                  .exit_code,
              0);
    WriteTextFile(InputsDir() + "/model.json",
                  R"({"format": "jitpipe.model", "version": 1, "defaults": {"forward_us": 1,
                      "backward_input_us": 1, "backward_weight_us": 1, "input_bytes": 1024,
                      "output_bytes": 1024, "stash_bytes": 4096, "param_bytes": 65536}})");
  }
  static const std::string& InputsDir() {
    static const std::string* dir = new std::string(MakeTempDir("atomic_inputs"));
    return *dir;
  }

  void SetUp() override {
    dir_ = MakeTempDir("atomic");
    for (const char* name : {"in.json", "model.json"}) {
      std::error_code error;
      ASSERT_TRUE(std::filesystem::copy_file(InputsDir() + "/" + name, dir_ + "/" + name, error))
          << InputsDir() << "/" << name << ": " << error.message();
    }
  }

  std::vector<std::string> Args() const {
    std::vector<std::string> args;
    for (const std::string& a : GetParam().args) {
      args.push_back(absl::StrReplaceAll(a, {{"{dir}", dir_}}));
    }
    return args;
  }
  std::string Out() const { return dir_ + "/" + GetParam().out_name; }

  // The complete output of an uninterrupted run.
  std::string CompleteOutput() {
    WriteTextFile(Out(), kOldContents);
    entries_ = Entries(dir_);
    EXPECT_EQ(RunCli(Args()).exit_code, 0);
    EXPECT_EQ(Entries(dir_), entries_);
    const std::string complete = ReadTextFile(Out());
    EXPECT_NE(complete, kOldContents);
    return complete;
  }

  // Signals the writer `trials` times at `when`; each time the output must
  // be the old file or `complete` (CompleteOutput(), run once per test), the
  // folder must hold what it held before (no temporary left, whatever the
  // signal), and at least one signal must have hit the writer while its
  // temporary was open.
  // A trial whose writer finished between two polls catches nothing; up to
  // kMaxTrials are run until `trials` have caught the writer mid-way.
  void SignalRepeatedly(const std::string& complete, KillAt when, int signal_number,
                        int trials) {
    int caught = 0;
    for (int trial = 0; trial < kMaxTrials && caught < trials; ++trial) {
      WriteTextFile(Out(), kOldContents);
      const bool ended = RunAndSignal(Args(), dir_, when, signal_number);
      const std::string now = ReadTextFile(Out());
      EXPECT_EQ(Entries(dir_), entries_) << "left behind, trial " << trial;
      if (now == kOldContents) {
        EXPECT_TRUE(ended) << "the writer exited without replacing " << Out();
        ++caught;
      } else {
        ASSERT_EQ(now.size(), complete.size()) << "a partial file, trial " << trial;
        ASSERT_TRUE(now == complete) << "a corrupt file, trial " << trial;
      }
    }
    EXPECT_GT(caught, 0) << "every writer finished before the signal";
    RecordProperty("caught", caught);
  }

  std::vector<std::string> entries_;
  std::string dir_;
};

TEST_P(AtomicOutputTest, KilledWhenTheTemporaryIsCreated) {
  SignalRepeatedly(CompleteOutput(), KillAt::kCreate, SIGKILL, kTrials);
}

TEST_P(AtomicOutputTest, KilledAtTheFirstWrite) {
  SignalRepeatedly(CompleteOutput(), KillAt::kFirstWrite, SIGKILL, kTrials);
}

TEST_P(AtomicOutputTest, InterruptedOrTerminatedMidWrite) {
  const std::string complete = CompleteOutput();
  const std::vector<int> signals = testing::kSanitized
                                       ? std::vector<int>{GetParam().sanitized_signal}
                                       : std::vector<int>{SIGINT, SIGTERM, SIGHUP};
  for (int signal_number : signals) {
    SCOPED_TRACE(strsignal(signal_number));
    SignalRepeatedly(complete, KillAt::kFirstWrite, signal_number, 1);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Writers, AtomicOutputTest,
    ::testing::Values(
        Writer{"GenerateJson", "out.json",
               {"generate", "--schedule", "interleaved-1f1b", "--pp", "128", "--stages-per-rank",
                "4", "--microbatches", "512", "-o", "{dir}/out.json"},
               SIGINT},
        Writer{"LowerCsv", "out.csv", {"lower", "{dir}/in.json", "-o", "{dir}/out.csv"}, SIGTERM},
        Writer{"ConvertCsv", "out.csv", {"convert", "{dir}/in.json", "-o", "{dir}/out.csv"},
               SIGHUP},
        Writer{"PlanTrace", "trace.json",
               {"plan", "{dir}/in.json", "--model", "{dir}/model.json", "--trace",
                "{dir}/trace.json"},
               SIGINT},
        Writer{"SimulateTrace", "trace.json",
               {"simulate", "{dir}/in.json", "--model", "{dir}/model.json", "--trace",
                "{dir}/trace.json"},
               SIGTERM},
        Writer{"RenderSvg", "out.svg",
               {"render", "{dir}/in.json", "--model", "{dir}/model.json", "-o",
                "{dir}/out.svg"},
               SIGHUP}),
    [](const ::testing::TestParamInfo<Writer>& test) { return test.param.name; });

// Outputs that are not regular files: a FIFO (read by a reader opened
// first, so a writer that replaced it leaves the reader with nothing rather
// than waiting) and a character device node made here (/dev/null's
// numbers; skipped without CAP_MKNOD). Both stay what they were.
TEST(AtomicOutputSpecialFileTest, FifoAndDeviceOutputsAreWrittenInPlace) {
  const std::string dir = MakeTempDir("special_out");
  ASSERT_EQ(RunCli({"generate", "--schedule", "1f1b", "--pp", "4", "--microbatches", "8", "-o",
                    dir + "/s.json"}).exit_code, 0);
  WriteTextFile(dir + "/model.json",
                R"({"format": "jitpipe.model", "version": 1, "defaults": {"forward_us": 1,
                    "backward_input_us": 1, "backward_weight_us": 1, "input_bytes": 1024,
                    "output_bytes": 1024, "stash_bytes": 4096, "param_bytes": 65536}})");
  const std::string fifo = dir + "/trace.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const int reader = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  // Big enough to fill the pipe: the reader drains it while the CLI runs.
  const pid_t writer = Spawn({"simulate", dir + "/s.json", "--model", dir + "/model.json",
                              "--trace", fifo});
  std::string received;
  char buf[65536];
  int status = 0;
  for (bool done = false; !done;) {
    done = waitpid(writer, &status, WNOHANG) == writer;
    for (ssize_t n; (n = read(reader, buf, sizeof buf)) > 0;) received.append(buf, n);
    if (!done) usleep(1000);
  }
  close(reader);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_NE(received.find("\"traceEvents\""), std::string::npos) << received.size();
  struct stat info;
  ASSERT_EQ(lstat(fifo.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode));

  const std::string node = dir + "/null";
  if (mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    GTEST_SKIP() << "mknod needs CAP_MKNOD: " << std::strerror(errno);
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"plan", dir + "/s.json", "--model", dir + "/model.json",
                                 "--trace", node},
        std::vector<std::string>{"replay", dir + "/s.json", "--stage", "mlp", "--trace", node}}) {
    EXPECT_EQ(RunCli(args).exit_code, 0) << args[0];
    ASSERT_EQ(lstat(node.c_str(), &info), 0);
    EXPECT_TRUE(S_ISCHR(info.st_mode)) << args[0];
    EXPECT_EQ(info.st_rdev, makedev(1, 3)) << args[0];
  }
}

// An output that is an input (by any path to the same file) is refused
// before anything is written.
TEST(AtomicOutputSpecialFileTest, AnOutputThatIsAnInputIsRefused) {
  const std::string dir = MakeTempDir("out_is_in");
  ASSERT_EQ(RunCli({"generate", "--schedule", "1f1b", "--pp", "2", "--microbatches", "4", "-o",
                    dir + "/s.json"}).exit_code, 0);
  const std::string before = ReadTextFile(dir + "/s.json");
  ASSERT_EQ(symlink("s.json", (dir + "/link.json").c_str()), 0);
  testing::CliResult same = RunCli({"simulate", dir + "/s.json", "--model", dir + "/s.json",
                                    "--trace", dir + "/link.json"});
  EXPECT_EQ(same.exit_code, 2);
  EXPECT_NE(same.err.find("--trace " + dir + "/link.json is the input " + dir + "/s.json"),
            std::string::npos) << same.err;
  testing::CliResult convert = RunCli({"convert", dir + "/link.json", "-o", dir + "/s.json"});
  EXPECT_EQ(convert.exit_code, 2);
  EXPECT_NE(convert.err.find("-o " + dir + "/s.json is the input"), std::string::npos)
      << convert.err;
  EXPECT_EQ(ReadTextFile(dir + "/s.json"), before);
}

}  // namespace
}  // namespace jitpipe::atomic_output_test
