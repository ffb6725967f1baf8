// Temporary files removed when the process is interrupted.
//
// A writer that must create a named temporary file (AtomicFile where the file
// system has no O_TMPFILE, and during the instant between naming a finished
// temporary and renaming it over its destination) registers the name here.
// Once InstallTempFileCleanupOnSignals() has run, SIGINT, SIGTERM and SIGHUP
// unlink every registered name and then end the process as the signal would
// have (the default action, re-raised). SIGKILL cannot be caught: that is why
// AtomicFile prefers an anonymous temporary, which needs no cleanup.
//
// The registry is a fixed table of kMaxTempFiles names claimed with atomics,
// so the handler reads it without locks (async-signal-safe). A name that does
// not fit (longer than PATH_MAX, or the table full) is simply not registered:
// cleanup is best effort, the destination's integrity never depends on it.
//
// Thread safety: every function may be called from any thread.
#ifndef JITPIPE_BASE_TEMP_FILE_CLEANUP_H_
#define JITPIPE_BASE_TEMP_FILE_CLEANUP_H_

#include <string>

namespace jitpipe {

inline constexpr int kMaxTempFiles = 64;

// Registers `path` for removal on SIGINT/SIGTERM/SIGHUP. Returns a slot to
// pass to UnregisterTempFile, or -1 when it could not be registered.
int RegisterTempFile(const std::string& path);

// Forgets a slot from RegisterTempFile (after the file was renamed or
// removed). A slot of -1 is ignored.
void UnregisterTempFile(int slot);

// Installs the handlers, once per process (later calls do nothing). A
// program calls it from main(); a library never does, so that embedding
// jitpipe never takes over the host's signals. A signal whose disposition is
// SIG_IGN when this is called stays ignored.
void InstallTempFileCleanupOnSignals();

}  // namespace jitpipe

#endif  // JITPIPE_BASE_TEMP_FILE_CLEANUP_H_
