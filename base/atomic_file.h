// Whole-or-absent file output.
//
// Every file the CLI writes (schedules, plans, traces, flight records) goes
// through AtomicFile: bytes go to a temporary file in the destination's
// directory, which is fsync'ed and renamed over the destination only on
// Commit(). A writer interrupted at any point leaves the old file (or none),
// never half a file. The temporary is removed if the AtomicFile is destroyed
// without a successful Commit().
//
// Thread safety: an AtomicFile is used by one thread at a time.
#ifndef JITPIPE_BASE_ATOMIC_FILE_H_
#define JITPIPE_BASE_ATOMIC_FILE_H_

#include <cstdio>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace jitpipe {

class AtomicFile {
 public:
  // Creates the temporary file next to `path`. Errors: InvalidArgument for an
  // empty path; Unavailable (with the OS message) if the directory is not
  // writable.
  static absl::StatusOr<AtomicFile> Create(std::string path);

  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  // Appends bytes. Errors are sticky and reported by Commit().
  void Write(absl::string_view bytes);

  // Flushes, fsyncs and renames the temporary over the destination. After a
  // failure the destination is untouched and the temporary is gone.
  // REQUIRES: Commit() has not been called before.
  absl::Status Commit();

  const std::string& path() const { return path_; }

 private:
  AtomicFile(std::string path, std::string temp_path, std::FILE* file);
  void Discard();

  std::string path_;
  std::string temp_path_;
  std::FILE* file_ = nullptr;
  bool failed_ = false;
};

// Writes `contents` to `path` atomically (AtomicFile::Create + Write + Commit).
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// Reads a whole file. NotFound / Unavailable name the path and the OS error.
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace jitpipe

#endif  // JITPIPE_BASE_ATOMIC_FILE_H_
