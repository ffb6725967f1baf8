#include "base/atomic_file.h"

#include <sys/stat.h>

#include <filesystem>

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
// beyond read whole; a non-regular file (a pipe) grows it; a directory reads
// as empty, as the stream-based reader did.
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
  ASSERT_OK_AND_ASSIGN(std::string directory, ReadFile(dir));
  EXPECT_EQ(directory, "");
}

}  // namespace
}  // namespace jitpipe::atomic_file_test
