// Whole-or-absent file output.
//
// Every file the CLI writes (schedules, plans, traces, SVGs, models, flight
// records) goes through AtomicFile. What happens depends on what the path is:
//
//  - a regular file, or nothing yet: bytes go to a temporary file in the
//    destination's directory, which is fsync'ed and renamed over the
//    destination only on Commit(). A writer interrupted at any point leaves
//    the old file (or none), never half a file. The temporary is anonymous
//    (O_TMPFILE) where the file system allows it, so even SIGKILL leaves
//    nothing behind; otherwise it is a short hidden name (".jitpipe-XXXXXX",
//    so a destination name of up to NAME_MAX characters works) registered
//    for removal on SIGINT/SIGTERM/SIGHUP (base/temp_file_cleanup.h).
//  - a symbolic link: it is followed (up to 40 links) and its final target
//    is replaced as above; the link itself stays a link. A dangling link
//    creates its target.
//  - anything else that exists and is not a directory (a character device
//    such as /dev/null, a FIFO, /dev/stdout, which links into /proc): it is
//    opened and written in place, never renamed over. Such an output is a
//    stream: what was written before a failure stays written.
//
// Thread safety: an AtomicFile is used by one thread at a time; distinct
// AtomicFiles may be used from different threads.
#ifndef JITPIPE_BASE_ATOMIC_FILE_H_
#define JITPIPE_BASE_ATOMIC_FILE_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace jitpipe {

class AtomicFile {
 public:
  // Opens the output for `path` as described above. Errors: InvalidArgument
  // for an empty path, a directory, or a loop of links; Unavailable (with
  // the OS message, naming `path`) when it cannot be created or opened.
  // Opening a FIFO waits for its reader, as any writer of a FIFO does.
  static absl::StatusOr<AtomicFile> Create(std::string path);

  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  // Appends bytes. Errors are sticky and reported by Commit().
  void Write(absl::string_view bytes);

  // Flushes; for a replaced file also fsyncs and renames the temporary over
  // the destination. After a failure a replaced destination is untouched and
  // the temporary is gone.
  // REQUIRES: Commit() has not been called before.
  absl::Status Commit();

  // The path as given to Create.
  const std::string& path() const { return path_; }
  // True when the output is written in place (not a regular file).
  bool in_place() const { return in_place_; }

 private:
  AtomicFile(std::string path, std::string target, std::FILE* file, bool in_place,
             std::string temp_path, int temp_slot);
  absl::Status LinkAnonymousTemporary();
  void Discard();

  std::string path_;       // as given
  std::string target_;     // the file replaced (links followed)
  std::FILE* file_ = nullptr;
  bool in_place_ = false;
  bool failed_ = false;
  std::string temp_path_;  // empty while the temporary is anonymous
  int temp_slot_ = -1;     // base/temp_file_cleanup.h
};

// Writes `contents` to `path` atomically (AtomicFile::Create + Write + Commit).
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// Identity of the file a path names after following links: two paths with
// equal identities are the same file. Absent for a path that does not exist.
struct FileIdentity {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  bool regular = false;
  bool operator==(const FileIdentity& other) const {
    return device == other.device && inode == other.inode;
  }
};
absl::StatusOr<FileIdentity> IdentifyFile(const std::string& path);

// The default bound of ReadFile: inputs larger than this are refused.
inline constexpr std::uint64_t kDefaultMaxInputBytes = std::uint64_t{1} << 30;  // 1 GiB

// Reads a whole file of at most `max_bytes`. NotFound / Unavailable name the
// path and the OS error; a directory is InvalidArgument ("is a directory");
// a file or stream (a pipe, /dev/zero) longer than `max_bytes` is
// ResourceExhausted naming the path and the limit, found after reading at
// most max_bytes + 1 bytes.
absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     std::uint64_t max_bytes = kDefaultMaxInputBytes);

}  // namespace jitpipe

#endif  // JITPIPE_BASE_ATOMIC_FILE_H_
