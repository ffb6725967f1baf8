#include "base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace jitpipe {
namespace {

std::string ErrnoText() { return std::strerror(errno); }

}  // namespace

absl::StatusOr<AtomicFile> AtomicFile::Create(std::string path) {
  if (path.empty()) return absl::InvalidArgumentError("output path is empty");
  // mkstemp keeps concurrent writers of the same destination apart.
  std::string temp = path + ".tmp.XXXXXX";
  int fd = mkstemp(temp.data());
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", ErrnoText()));
  }
  // mkstemp creates 0600; give the file the mode an ordinary open() would.
  mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0666 & ~mask);
  std::FILE* file = fdopen(fd, "wb");
  if (file == nullptr) {
    close(fd);
    unlink(temp.c_str());
    return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", ErrnoText()));
  }
  return AtomicFile(std::move(path), std::move(temp), file);
}

AtomicFile::AtomicFile(std::string path, std::string temp_path, std::FILE* file)
    : path_(std::move(path)), temp_path_(std::move(temp_path)), file_(file) {}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : path_(std::move(other.path_)),
      temp_path_(std::move(other.temp_path_)),
      file_(std::exchange(other.file_, nullptr)),
      failed_(other.failed_) {}

AtomicFile& AtomicFile::operator=(AtomicFile&& other) noexcept {
  if (this != &other) {
    Discard();
    path_ = std::move(other.path_);
    temp_path_ = std::move(other.temp_path_);
    file_ = std::exchange(other.file_, nullptr);
    failed_ = other.failed_;
  }
  return *this;
}

AtomicFile::~AtomicFile() { Discard(); }

void AtomicFile::Discard() {
  if (file_ == nullptr) return;
  std::fclose(file_);
  file_ = nullptr;
  unlink(temp_path_.c_str());
}

void AtomicFile::Write(absl::string_view bytes) {
  if (file_ == nullptr || failed_ || bytes.empty()) return;
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) failed_ = true;
}

absl::Status AtomicFile::Commit() {
  if (file_ == nullptr) return absl::FailedPreconditionError("AtomicFile committed twice");
  bool ok = !failed_ && std::fflush(file_) == 0 && fsync(fileno(file_)) == 0;
  std::string error = ok ? "" : ErrnoText();
  ok = (std::fclose(file_) == 0) && ok;
  file_ = nullptr;
  if (ok && std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    ok = false;
    error = ErrnoText();
  }
  if (!ok) {
    unlink(temp_path_.c_str());
    return absl::UnavailableError(absl::StrCat("cannot write ", path_, ": ", error));
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  auto file = AtomicFile::Create(path);
  if (!file.ok()) return file.status();
  file->Write(contents);
  return file->Commit();
}

// One read() pass into a string sized from fstat (a stream copied through
// a growing ostringstream touched twice the pages, and page faults are what
// reading a 10 MB schedule costs here: issue 19). As the stream-based
// reader did, a read error ends the text: a directory reads as empty.
absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::UnavailableError(absl::StrCat(path, ": cannot read: ", ErrnoText()));
  }
  struct stat info;
  const bool regular = fstat(fd, &info) == 0 && S_ISREG(info.st_mode);
  // One byte more than the size, so that the end shows without growing.
  std::string text(regular ? static_cast<size_t>(info.st_size) + 1 : size_t{1} << 16, '\0');
  size_t size = 0;
  while (true) {
    if (size == text.size()) text.resize(text.size() * 2);
    const ssize_t n = read(fd, text.data() + size, text.size() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    size += static_cast<size_t>(n);
  }
  close(fd);
  text.resize(size);
  return text;
}

}  // namespace jitpipe
