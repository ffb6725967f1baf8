#include "base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <limits.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/byte_units.h"
#include "base/temp_file_cleanup.h"

namespace jitpipe {
namespace {

constexpr int kMaxLinks = 40;  // as the kernel's own limit (ELOOP)

std::string ErrnoText() { return std::strerror(errno); }

absl::Status CannotWrite(const std::string& path, const std::string& why) {
  return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", why));
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// What an output path turns out to be, links followed.
struct Destination {
  std::string target;  // the file to replace, or the path to open in place
  bool in_place = false;
};

absl::StatusOr<Destination> Resolve(const std::string& path) {
  std::string current = path;
  for (int links = 0; links <= kMaxLinks; ++links) {
    struct stat info;
    if (lstat(current.c_str(), &info) != 0) {
      if (errno == ENOENT) return Destination{current, false};  // a new file
      return CannotWrite(path, ErrnoText());
    }
    if (S_ISREG(info.st_mode)) return Destination{current, false};
    if (S_ISDIR(info.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat("cannot write ", path, ": is a directory"));
    }
    if (!S_ISLNK(info.st_mode)) return Destination{path, true};  // device, FIFO, socket
    std::string link(PATH_MAX, '\0');
    const ssize_t n = readlink(current.c_str(), link.data(), link.size());
    if (n < 0) return CannotWrite(path, ErrnoText());
    link.resize(static_cast<size_t>(n));
    // /dev/stdout, /dev/fd/N: links into /proc name open files (a pipe, a
    // terminal), not paths that could be replaced. Open them as given.
    if (absl::StartsWith(link, "/proc/") || absl::StartsWith(current, "/proc/")) {
      return Destination{path, true};
    }
    current = link[0] == '/' ? link : absl::StrCat(DirectoryOf(current), "/", link);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("cannot write ", path, ": more than ", kMaxLinks, " symbolic links"));
}

// A name for the temporary that is short whatever the destination's name.
std::string TemporaryName(const std::string& directory) {
  static std::atomic<uint64_t> counter{0};
  const uint64_t salt = static_cast<uint64_t>(
      std::chrono::steady_clock::now().time_since_epoch().count());
  return absl::StrCat(directory, "/.jitpipe-", getpid(), "-",
                      (salt ^ counter.fetch_add(1)) % 1000000007);
}

bool ProcFdWorks() { return access("/proc/self/fd", X_OK) == 0; }

}  // namespace

absl::StatusOr<AtomicFile> AtomicFile::Create(std::string path) {
  if (path.empty()) return absl::InvalidArgumentError("output path is empty");
  absl::StatusOr<Destination> destination = Resolve(path);
  if (!destination.ok()) return destination.status();
  if (destination->in_place) {
    const int fd = open(destination->target.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return CannotWrite(path, ErrnoText());
    std::FILE* file = fdopen(fd, "wb");
    if (file == nullptr) {
      close(fd);
      return CannotWrite(path, ErrnoText());
    }
    return AtomicFile(std::move(path), destination->target, file, true, "", -1);
  }
  const std::string directory = DirectoryOf(destination->target);
  // An anonymous temporary first: nothing to clean up whatever kills us.
  int fd = ProcFdWorks() ? open(directory.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666) : -1;
  std::string temp_path;
  int slot = -1;
  if (fd < 0) {
    if (errno == ENOENT || errno == EACCES || errno == EROFS || errno == ENOTDIR) {
      return CannotWrite(path, ErrnoText());
    }
    temp_path = absl::StrCat(directory, "/.jitpipe-XXXXXX");
    fd = mkstemp(temp_path.data());
    if (fd < 0) return CannotWrite(path, ErrnoText());
    slot = RegisterTempFile(temp_path);
    // mkstemp creates 0600; give the file the mode an ordinary open() would.
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
  }
  std::FILE* file = fdopen(fd, "wb");
  if (file == nullptr) {
    const std::string error = ErrnoText();
    close(fd);
    if (!temp_path.empty()) unlink(temp_path.c_str());
    UnregisterTempFile(slot);
    return CannotWrite(path, error);
  }
  return AtomicFile(std::move(path), destination->target, file, false, std::move(temp_path),
                    slot);
}

AtomicFile::AtomicFile(std::string path, std::string target, std::FILE* file, bool in_place,
                       std::string temp_path, int temp_slot)
    : path_(std::move(path)),
      target_(std::move(target)),
      file_(file),
      in_place_(in_place),
      temp_path_(std::move(temp_path)),
      temp_slot_(temp_slot) {}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : path_(std::move(other.path_)),
      target_(std::move(other.target_)),
      file_(std::exchange(other.file_, nullptr)),
      in_place_(other.in_place_),
      failed_(other.failed_),
      temp_path_(std::move(other.temp_path_)),
      temp_slot_(std::exchange(other.temp_slot_, -1)) {}

AtomicFile& AtomicFile::operator=(AtomicFile&& other) noexcept {
  if (this != &other) {
    Discard();
    path_ = std::move(other.path_);
    target_ = std::move(other.target_);
    file_ = std::exchange(other.file_, nullptr);
    in_place_ = other.in_place_;
    failed_ = other.failed_;
    temp_path_ = std::move(other.temp_path_);
    temp_slot_ = std::exchange(other.temp_slot_, -1);
  }
  return *this;
}

AtomicFile::~AtomicFile() { Discard(); }

void AtomicFile::Discard() {
  if (file_ == nullptr) return;
  std::fclose(file_);  // an anonymous temporary vanishes with its descriptor
  file_ = nullptr;
  if (!temp_path_.empty()) unlink(temp_path_.c_str());
  UnregisterTempFile(std::exchange(temp_slot_, -1));
}

void AtomicFile::Write(absl::string_view bytes) {
  if (file_ == nullptr || failed_ || bytes.empty()) return;
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) failed_ = true;
}

// Gives the anonymous temporary a short name beside the destination, so it
// can be renamed over it (linkat cannot replace). The name is registered
// for removal on signals for the instant until the rename.
absl::Status AtomicFile::LinkAnonymousTemporary() {
  const std::string proc_path = absl::StrCat("/proc/self/fd/", fileno(file_));
  const std::string directory = DirectoryOf(target_);
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = TemporaryName(directory);
    const int slot = RegisterTempFile(name);
    if (linkat(AT_FDCWD, proc_path.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) {
      temp_path_ = std::move(name);
      temp_slot_ = slot;
      return absl::OkStatus();
    }
    const int error = errno;
    UnregisterTempFile(slot);
    if (error != EEXIST) return CannotWrite(path_, std::strerror(error));
  }
  return CannotWrite(path_, "no free temporary name");
}

absl::Status AtomicFile::Commit() {
  if (file_ == nullptr) return absl::FailedPreconditionError("AtomicFile committed twice");
  bool ok = !failed_ && std::fflush(file_) == 0;
  if (ok && !in_place_) ok = fsync(fileno(file_)) == 0;
  std::string error = ok ? "" : ErrnoText();
  if (ok && !in_place_ && temp_path_.empty()) {
    const absl::Status linked = LinkAnonymousTemporary();
    if (!linked.ok()) {
      Discard();
      return linked;
    }
  }
  ok = (std::fclose(file_) == 0) && ok;
  if (!ok && error.empty()) error = ErrnoText();
  file_ = nullptr;
  if (ok && !in_place_ && std::rename(temp_path_.c_str(), target_.c_str()) != 0) {
    ok = false;
    error = ErrnoText();
  }
  if (!ok && !temp_path_.empty()) unlink(temp_path_.c_str());
  UnregisterTempFile(std::exchange(temp_slot_, -1));
  if (!ok) return CannotWrite(path_, error);
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  auto file = AtomicFile::Create(path);
  if (!file.ok()) return file.status();
  file->Write(contents);
  return file->Commit();
}

absl::StatusOr<FileIdentity> IdentifyFile(const std::string& path) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::UnavailableError(absl::StrCat(path, ": ", ErrnoText()));
  }
  return FileIdentity{static_cast<std::uint64_t>(info.st_dev),
                      static_cast<std::uint64_t>(info.st_ino), S_ISREG(info.st_mode)};
}

// One read() pass into a string sized from fstat (a stream copied through
// a growing ostringstream touched twice the pages, and page faults are what
// reading a 10 MB schedule costs: issue 19). A stream (a pipe, /dev/zero)
// grows the buffer and is cut off one byte past the limit.
absl::StatusOr<std::string> ReadFile(const std::string& path, std::uint64_t max_bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    if (errno == EISDIR) return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory"));
    return absl::UnavailableError(absl::StrCat(path, ": cannot read: ", ErrnoText()));
  }
  struct stat info;
  if (fstat(fd, &info) != 0) info.st_mode = 0;
  if (S_ISDIR(info.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory"));
  }
  const bool regular = S_ISREG(info.st_mode);
  auto too_large = [&] {
    return absl::ResourceExhaustedError(absl::StrCat(
        path, ": larger than the input limit of ", FormatBytes(static_cast<int64_t>(max_bytes)),
        " (--max-input-bytes raises it)"));
  };
  if (regular && static_cast<std::uint64_t>(info.st_size) > max_bytes) {
    close(fd);
    return too_large();
  }
  const std::uint64_t cap = max_bytes + 1;  // one byte more shows a stream is longer
  // One byte more than the size, so that the end shows without growing.
  size_t capacity = regular ? static_cast<size_t>(info.st_size) + 1 : size_t{1} << 16;
  if (capacity > cap) capacity = static_cast<size_t>(cap);
  std::string text(capacity, '\0');
  size_t size = 0;
  while (true) {
    if (size == text.size()) {
      if (text.size() >= cap) break;
      text.resize(static_cast<size_t>(std::min<std::uint64_t>(cap, text.size() * 2)));
    }
    const ssize_t n = read(fd, text.data() + size, text.size() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string error = ErrnoText();
      close(fd);
      return absl::UnavailableError(absl::StrCat(path, ": cannot read: ", error));
    }
    if (n == 0) break;
    size += static_cast<size_t>(n);
  }
  close(fd);
  if (size > max_bytes) return too_large();
  text.resize(size);
  return text;
}

}  // namespace jitpipe
