#include "base/atomic_file.h"

#include <sys/stat.h>

#include <filesystem>

#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe {
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

}  // namespace
}  // namespace jitpipe
