#include "base/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "base/temp_file_cleanup.h"

#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::atomic_file_test {
namespace {

TEST(AtomicFileTest, CommitReplacesTheFileWholeWithOrdinaryPermissions) {
  std::string dir = testing::MakeTempDir("atomic");
  ASSERT_OK(WriteFileAtomically(dir + "/f.txt", "old"));
  ASSERT_OK_AND_ASSIGN(AtomicFile file, AtomicFile::Create(dir + "/f.txt"));
  file.Write("new ");
  file.Write("contents");
  ASSERT_OK_AND_ASSIGN(std::string before, ReadFile(dir + "/f.txt"));
  EXPECT_EQ(before, "old");  // nothing visible until Commit
  ASSERT_OK(file.Commit());
  ASSERT_OK_AND_ASSIGN(std::string after, ReadFile(dir + "/f.txt"));
  EXPECT_EQ(after, "new contents");
  struct stat st;
  ASSERT_EQ(stat((dir + "/f.txt").c_str(), &st), 0);
  mode_t mask = umask(0);
  umask(mask);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);
}

TEST(AtomicFileTest, AbandonedWriterLeavesTheOldFileAndNoTemporary) {
  std::string dir = testing::MakeTempDir("atomic");
  ASSERT_OK(WriteFileAtomically(dir + "/f.txt", "old"));
  {
    ASSERT_OK_AND_ASSIGN(AtomicFile file, AtomicFile::Create(dir + "/f.txt"));
    file.Write("half");
  }
  ASSERT_OK_AND_ASSIGN(std::string text, ReadFile(dir + "/f.txt"));
  EXPECT_EQ(text, "old");
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST(AtomicFileTest, ErrorsNameThePath) {
  absl::StatusOr<AtomicFile> file = AtomicFile::Create("/nonexistent/dir/f.txt");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(testing::Message(file), "cannot write /nonexistent/dir/f.txt: No such file or directory");
  EXPECT_EQ(ReadFile("/nonexistent/f").status().code(), absl::StatusCode::kNotFound);
}

// ReadFile sizes its buffer from the file: sizes around its first guess and
// beyond read whole; a non-regular file (a pipe) grows it; a directory is an
// error that says so.
TEST(AtomicFileTest, ReadFileReadsWholeFilesOfAnySize) {
  std::string dir = testing::MakeTempDir("read_file");
  for (size_t size : {size_t{0}, size_t{1}, size_t{65535}, size_t{65536}, size_t{200000}}) {
    std::string contents(size, 'x');
    for (size_t i = 0; i < size; ++i) contents[i] = static_cast<char>('a' + i % 26);
    ASSERT_OK(WriteFileAtomically(dir + "/f.txt", contents));
    ASSERT_OK_AND_ASSIGN(std::string text, ReadFile(dir + "/f.txt"));
    EXPECT_EQ(text, contents) << size;
  }
  ASSERT_OK_AND_ASSIGN(std::string self, ReadFile("/proc/self/status"));
  EXPECT_NE(self.find("Name:"), std::string::npos);
  absl::StatusOr<std::string> directory = ReadFile(dir);
  EXPECT_EQ(directory.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(testing::Message(directory), dir + ": is a directory");
}

int CountEntries(const std::string& dir) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++n;
  }
  return n;
}

// Inputs are bounded: a file longer than the limit is refused without being
// read, and an endless stream is cut one byte past it.
TEST(AtomicFileTest, ReadFileRefusesInputsLongerThanTheLimit) {
  std::string dir = testing::MakeTempDir("read_limit");
  ASSERT_OK(WriteFileAtomically(dir + "/f.txt", std::string(100, 'x')));
  ASSERT_OK_AND_ASSIGN(std::string exact, ReadFile(dir + "/f.txt", 100));
  EXPECT_EQ(exact.size(), 100u);
  absl::StatusOr<std::string> longer = ReadFile(dir + "/f.txt", 99);
  EXPECT_EQ(longer.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(testing::Message(longer), dir + "/f.txt: larger than the input limit of 99 B "
                                             "(--max-input-bytes raises it)");
  absl::StatusOr<std::string> endless = ReadFile("/dev/zero", 1 << 20);
  EXPECT_EQ(endless.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(testing::Message(endless),
            "/dev/zero: larger than the input limit of 1.00 MiB (--max-input-bytes raises it)");
}

// A link is followed and its regular target replaced; the link stays.
TEST(AtomicFileTest, ALinkIsFollowedAndItsTargetReplaced) {
  std::string dir = testing::MakeTempDir("atomic_link");
  ASSERT_OK(WriteFileAtomically(dir + "/target.txt", "old"));
  ASSERT_EQ(symlink("target.txt", (dir + "/link.txt").c_str()), 0);
  ASSERT_EQ(symlink("link.txt", (dir + "/link2.txt").c_str()), 0);
  ASSERT_OK(WriteFileAtomically(dir + "/link2.txt", "new"));
  struct stat info;
  ASSERT_EQ(lstat((dir + "/link.txt").c_str(), &info), 0);
  EXPECT_TRUE(S_ISLNK(info.st_mode));
  ASSERT_EQ(lstat((dir + "/link2.txt").c_str(), &info), 0);
  EXPECT_TRUE(S_ISLNK(info.st_mode));
  ASSERT_OK_AND_ASSIGN(std::string text, ReadFile(dir + "/target.txt"));
  EXPECT_EQ(text, "new");
  // A dangling link creates its target.
  ASSERT_EQ(symlink("made.txt", (dir + "/dangling.txt").c_str()), 0);
  ASSERT_OK(WriteFileAtomically(dir + "/dangling.txt", "made"));
  ASSERT_OK_AND_ASSIGN(std::string made, ReadFile(dir + "/made.txt"));
  EXPECT_EQ(made, "made");
  ASSERT_EQ(lstat((dir + "/dangling.txt").c_str(), &info), 0);
  EXPECT_TRUE(S_ISLNK(info.st_mode));
  // A loop of links is an error, not a hang.
  ASSERT_EQ(symlink("loop_b", (dir + "/loop_a").c_str()), 0);
  ASSERT_EQ(symlink("loop_a", (dir + "/loop_b").c_str()), 0);
  absl::StatusOr<AtomicFile> loop = AtomicFile::Create(dir + "/loop_a");
  EXPECT_EQ(testing::Message(loop), "cannot write " + dir + "/loop_a: more than 40 symbolic links");
  EXPECT_EQ(CountEntries(dir), 7);  // nothing else was created
}

// A FIFO is written in place: the reader gets the bytes and the FIFO stays.
TEST(AtomicFileTest, AFifoIsWrittenInPlace) {
  std::string dir = testing::MakeTempDir("atomic_fifo");
  const std::string fifo = dir + "/out.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // The reader end is open before the writer starts (so the writer does not
  // wait) and is read after it is done: a writer that replaced the FIFO
  // leaves this end empty instead of hanging.
  const int reader = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  ASSERT_OK(WriteFileAtomically(fifo, "through the pipe"));
  std::string received;
  char buf[256];
  for (ssize_t n; (n = read(reader, buf, sizeof buf)) > 0;) received.append(buf, n);
  close(reader);
  EXPECT_EQ(received, "through the pipe");
  struct stat info;
  ASSERT_EQ(lstat(fifo.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode));
  EXPECT_EQ(CountEntries(dir), 1);
}

// A character device (one made here when the test may: /dev/null's numbers)
// is written in place and stays a device; so is /dev/null itself.
TEST(AtomicFileTest, ADeviceIsWrittenInPlace) {
  std::string dir = testing::MakeTempDir("atomic_device");
  ASSERT_OK(WriteFileAtomically("/dev/null", "discarded"));
  struct stat info;
  ASSERT_EQ(stat("/dev/null", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode));
  const std::string node = dir + "/null";
  if (mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    GTEST_SKIP() << "mknod needs CAP_MKNOD: " << std::strerror(errno);
  }
  ASSERT_OK(WriteFileAtomically(node, "discarded"));
  ASSERT_EQ(lstat(node.c_str(), &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode));
  EXPECT_EQ(info.st_rdev, makedev(1, 3));
  EXPECT_EQ(CountEntries(dir), 1);
}

// A destination name of NAME_MAX characters works: the temporary's own name
// is short whatever the destination's.
TEST(AtomicFileTest, ANameOfNameMaxCharactersWorks) {
  std::string dir = testing::MakeTempDir("atomic_long");
  const std::string name = std::string(250, 'n') + ".json";
  ASSERT_EQ(name.size(), 255u);
  ASSERT_OK(WriteFileAtomically(dir + "/" + name, "long"));
  ASSERT_OK_AND_ASSIGN(std::string text, ReadFile(dir + "/" + name));
  EXPECT_EQ(text, "long");
  EXPECT_EQ(CountEntries(dir), 1);
  absl::StatusOr<AtomicFile> directory = AtomicFile::Create(dir);
  EXPECT_EQ(testing::Message(directory), "cannot write " + dir + ": is a directory");
}

// The identity of a file follows links.
TEST(AtomicFileTest, IdentifyFileFollowsLinks) {
  std::string dir = testing::MakeTempDir("identity");
  ASSERT_OK(WriteFileAtomically(dir + "/a", "a"));
  ASSERT_OK(WriteFileAtomically(dir + "/b", "b"));
  ASSERT_EQ(symlink("a", (dir + "/link").c_str()), 0);
  ASSERT_OK_AND_ASSIGN(FileIdentity a, IdentifyFile(dir + "/a"));
  ASSERT_OK_AND_ASSIGN(FileIdentity b, IdentifyFile(dir + "/b"));
  ASSERT_OK_AND_ASSIGN(FileIdentity link, IdentifyFile(dir + "/link"));
  EXPECT_TRUE(a == link);
  EXPECT_FALSE(a == b);
  EXPECT_TRUE(a.regular);
  EXPECT_EQ(IdentifyFile(dir + "/none").status().code(), absl::StatusCode::kNotFound);
}

// A registered temporary is removed when the process gets SIGINT, SIGTERM
// or SIGHUP, and the process still ends by that signal.
TEST(TempFileCleanupTest, RegisteredFilesAreRemovedOnSignals) {
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) {
    std::string dir = testing::MakeTempDir("cleanup");
    const std::string kept = dir + "/kept";
    const std::string removed = dir + "/removed";
    ASSERT_OK(WriteFileAtomically(kept, "k"));
    ASSERT_OK(WriteFileAtomically(removed, "r"));
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      InstallTempFileCleanupOnSignals();
      const int forgotten = RegisterTempFile(kept);
      RegisterTempFile(removed);
      UnregisterTempFile(forgotten);
      raise(signal_number);
      _exit(0);  // not reached
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == signal_number) << signal_number;
    EXPECT_TRUE(std::filesystem::exists(kept)) << signal_number;
    EXPECT_FALSE(std::filesystem::exists(removed)) << signal_number;
  }
}

}  // namespace
}  // namespace jitpipe::atomic_file_test
