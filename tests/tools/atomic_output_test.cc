// Every file the CLI writes goes through base/atomic_file.h: a writer killed
// at any point leaves the old file, byte for byte, or the complete new one;
// never part of a file. (Schedules, plan and simulation traces and SVGs are
// tested here; replay traces use the same ChromeTraceWriter::ToFile and
// flight records the same WriteFileAtomically, with outputs too small to
// kill reliably mid-way.) Each writer below is started over an existing
// output and SIGKILLed as soon as its temporary file ("OUT.tmp.XXXXXX", next
// to OUT) is created or first written to, watched with inotify.
//
// What a SIGKILL leaves behind: the temporary file, which no destructor
// could remove. The destination is intact and the next run writes a fresh
// temporary of its own, so the leftover is only litter.
#include <signal.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "tests/testing/sanitizers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::atomic_output_test {
namespace {

using ::jitpipe::testing::MakeTempDir;
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

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Temporary files of `out` left in its directory.
std::vector<std::string> Temporaries(const std::string& dir, const std::string& out_name) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(out_name + ".tmp.", 0) == 0) found.push_back(entry.path().string());
  }
  return found;
}

pid_t Spawn(const std::vector<std::string>& args) {
  pid_t pid = fork();
  if (pid == 0) {
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

// Runs `args` and SIGKILLs it at the first inotify event `when` on a
// temporary of `out_name` in `dir`. Returns true when it was killed (false
// when it exited first).
bool RunAndKill(const std::vector<std::string>& args, const std::string& dir,
                const std::string& out_name, KillAt when) {
  const int inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  EXPECT_GE(inotify, 0) << "inotify_init1";
  const uint32_t mask = when == KillAt::kCreate ? IN_CREATE : IN_MODIFY;
  EXPECT_GE(inotify_add_watch(inotify, dir.c_str(), mask), 0);
  const pid_t pid = Spawn(args);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  bool killed = false;
  alignas(inotify_event) char buf[4096];
  while (!killed && std::chrono::steady_clock::now() < deadline) {
    pollfd fd = {inotify, POLLIN, 0};
    if (poll(&fd, 1, 50) > 0) {
      ssize_t n = read(inotify, buf, sizeof buf);
      for (char* p = buf; n > 0 && p < buf + n;) {
        const auto* event = reinterpret_cast<const inotify_event*>(p);
        if (event->len > 0 &&
            std::string(event->name).rfind(out_name + ".tmp.", 0) == 0) {
          killed = kill(pid, SIGKILL) == 0;
          break;
        }
        p += sizeof(inotify_event) + event->len;
      }
    }
    if (!killed && waitpid(pid, nullptr, WNOHANG) == pid) {
      close(inotify);
      return false;
    }
  }
  if (!killed) kill(pid, SIGKILL);  // the deadline passed: fail below, don't leak
  int status = 0;
  waitpid(pid, &status, 0);
  close(inotify);
  EXPECT_TRUE(killed) << "no temporary file of " << out_name << " appeared";
  return killed && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

struct Writer {
  std::string name;
  std::string out_name;            // the output file, in the test's directory
  std::vector<std::string> args;   // {dir}: the test's directory
};

void PrintTo(const Writer& w, std::ostream* os) { *os << w.name; }

class AtomicOutputTest : public ::testing::TestWithParam<Writer> {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("atomic");
    // The inputs: a large compute-only schedule (large enough that writing
    // its plan or trace outlasts the kill; a sanitizer slows the writer
    // enough for a quarter of it) and a model with sizes.
    const std::string pp = testing::kSanitized ? "32" : "64";
    const std::string microbatches = testing::kSanitized ? "128" : "256";
    ASSERT_EQ(RunCli({"generate", "--schedule", "interleaved-1f1b", "--pp", pp,
                      "--stages-per-rank", "4", "--microbatches", microbatches, "-o",
                      dir_ + "/in.json"})
                  .exit_code,
              0);
    WriteTextFile(dir_ + "/model.json",
                  R"({"format": "jitpipe.model", "version": 1, "defaults": {"forward_us": 1,
                      "backward_input_us": 1, "backward_weight_us": 1, "input_bytes": 1024,
                      "output_bytes": 1024, "stash_bytes": 4096, "param_bytes": 65536}})");
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
    EXPECT_EQ(RunCli(Args()).exit_code, 0);
    EXPECT_TRUE(Temporaries(dir_, GetParam().out_name).empty());
    const std::string complete = ReadBytes(Out());
    EXPECT_NE(complete, kOldContents);
    return complete;
  }

  // Kills the writer kTrials times at `when`; each time the output must be
  // the old file or the complete new one, and at least one kill must have
  // hit the writer while its temporary existed (the old file survived).
  void KillRepeatedly(KillAt when) {
    const std::string complete = CompleteOutput();
    int caught = 0;   // killed while the temporary existed
    int partial = 0;  // ... and held part of the output
    for (int trial = 0; trial < kTrials; ++trial) {
      for (const std::string& t : Temporaries(dir_, GetParam().out_name)) {
        std::filesystem::remove(t);
      }
      WriteTextFile(Out(), kOldContents);
      const bool killed = RunAndKill(Args(), dir_, GetParam().out_name, when);
      const std::string now = ReadBytes(Out());
      if (now == kOldContents) {
        EXPECT_TRUE(killed) << "the writer exited without replacing " << Out();
        // The temporary is what a SIGKILL leaves behind.
        const std::vector<std::string> left = Temporaries(dir_, GetParam().out_name);
        ASSERT_EQ(left.size(), 1u);
        if (std::filesystem::file_size(left[0]) < complete.size()) ++partial;
        ++caught;
      } else {
        ASSERT_EQ(now.size(), complete.size()) << "a partial file, trial " << trial;
        ASSERT_TRUE(now == complete) << "a corrupt file, trial " << trial;
      }
    }
    EXPECT_GT(caught, 0) << "every writer finished before the kill";
    RecordProperty("caught", caught);
    RecordProperty("partial", partial);
  }

  std::string dir_;
};

TEST_P(AtomicOutputTest, KilledWhenTheTemporaryIsCreated) { KillRepeatedly(KillAt::kCreate); }

TEST_P(AtomicOutputTest, KilledAtTheFirstWrite) { KillRepeatedly(KillAt::kFirstWrite); }

INSTANTIATE_TEST_SUITE_P(
    Writers, AtomicOutputTest,
    ::testing::Values(
        Writer{"GenerateJson", "out.json",
               {"generate", "--schedule", "interleaved-1f1b", "--pp", "128", "--stages-per-rank",
                "4", "--microbatches", "512", "-o", "{dir}/out.json"}},
        Writer{"LowerCsv", "out.csv", {"lower", "{dir}/in.json", "-o", "{dir}/out.csv"}},
        Writer{"ConvertCsv", "out.csv", {"convert", "{dir}/in.json", "-o", "{dir}/out.csv"}},
        Writer{"PlanTrace", "trace.json",
               {"plan", "{dir}/in.json", "--model", "{dir}/model.json", "--trace",
                "{dir}/trace.json"}},
        Writer{"SimulateTrace", "trace.json",
               {"simulate", "{dir}/in.json", "--model", "{dir}/model.json", "--trace",
                "{dir}/trace.json"}},
        Writer{"RenderSvg", "out.svg",
               {"render", "{dir}/in.json", "--model", "{dir}/model.json", "-o",
                "{dir}/out.svg"}}),
    [](const ::testing::TestParamInfo<Writer>& test) { return test.param.name; });

}  // namespace
}  // namespace jitpipe::atomic_output_test
