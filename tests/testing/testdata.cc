#include "tests/testing/testdata.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "gtest/gtest.h"

namespace jitpipe::testing {

std::string TestdataPath(const std::string& relative) {
  return std::string(JITPIPE_TESTDATA) + "/" + relative;
}

std::string ReadTestdata(const std::string& relative) {
  std::ifstream in(TestdataPath(relative), std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read testdata " << relative;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

nlohmann::json ReadTestdataJson(const std::string& relative) {
  return nlohmann::json::parse(ReadTestdata(relative));
}

std::vector<std::string> ListTestdata(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(TestdataPath(dir))) {
    std::string name = entry.path().filename().string();
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string MakeTempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::filesystem::path root = base != nullptr ? base : std::filesystem::temp_directory_path();
  std::string pattern = (root / ("jitpipe_" + name + "_XXXXXX")).string();
  char* made = mkdtemp(pattern.data());
  EXPECT_NE(made, nullptr) << "mkdtemp " << pattern;
  return pattern;
}

void WriteTextFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary);
  out << contents;
  EXPECT_TRUE(out.good()) << "cannot write " << path;
}

namespace {

// Reads both pipes until the child closes them or the deadline passes.
bool Drain(int out_fd, int err_fd, std::string& out, std::string& err,
           std::chrono::steady_clock::time_point deadline) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  int open = 2;
  char buf[65536];
  while (open > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    if (poll(fds, 2, static_cast<int>(left.count())) <= 0) continue;
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      ssize_t n = read(fds[k].fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;  // polled again: the pipe is still open
      if (n <= 0) {
        fds[k].fd = -1;
        --open;
      } else {
        (k == 0 ? out : err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  return true;
}

}  // namespace

CliResult RunCli(const std::vector<std::string>& args, int timeout_seconds) {
  CliResult result;
  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0) {
    ADD_FAILURE() << "pipe failed: " << std::strerror(errno);
    return result;
  }
  if (pipe(err_pipe) != 0) {
    ADD_FAILURE() << "pipe failed: " << std::strerror(errno);
    close(out_pipe[0]);
    close(out_pipe[1]);
    return result;
  }
  // posix_spawn, not fork: glibc starts the child with vfork semantics, so
  // the parent's page tables are not copied for it. A sanitized test process
  // maps a lot (its shadow, the allocator's quarantine): after touching
  // 200 MB, an ASan process paid ~11 ms more system time a run with fork.
  // A failed start is a test failure here, not the child's exit status 127.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
  posix_spawn_file_actions_addclose(&actions, err_pipe[0]);
  std::string binary = JITPIPE_CLI;
  std::vector<std::string> copy = args;
  std::vector<char*> argv = {binary.data()};
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int spawned =
      posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    ADD_FAILURE() << "cannot start " << binary << ": " << std::strerror(spawned);
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
    return result;
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  bool finished = Drain(out_pipe[0], err_pipe[0], result.out, result.err, deadline);
  close(out_pipe[0]);
  close(err_pipe[0]);
  if (!finished) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!finished) {
    result.exit_code = -2;
  } else if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  return result;
}

}  // namespace jitpipe::testing
