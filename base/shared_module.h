// Shared modules loaded at run time with dlopen(): the backend worlds
// (comm/world_plugin.h) and the CLI's device replay (runtime/gpu/module_loader.cc),
// whose libraries are heavy enough that a process loads them only when it
// uses them.
//
// Where a module is looked for, in order: the directory of the running
// executable (the build tree puts modules next to tools/jitpipe), then the
// installation's library directory relative to it (<exe dir>/../lib, as
// GNUInstallDirs lays out the prefix). A loaded module stays loaded until
// the process ends: code that came from it may still run.
//
// Thread safety: the functions may be called from any thread (dlopen and
// dlerror are thread-safe in glibc; dlerror's message is per thread).
#ifndef JITPIPE_BASE_SHARED_MODULE_H_
#define JITPIPE_BASE_SHARED_MODULE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace jitpipe {

// The directories searched, in order (see above); empty when the
// executable's path cannot be read.
std::vector<std::string> ModuleSearchPath();

struct SharedModule {
  std::string path;  // where it was found
  void* handle = nullptr;
  std::string what;  // how errors name it: "the mpi backend's module"

  // The address of exported symbol `name`. Errors: Unavailable
  //   "<what> <path> has no <name>: <dlerror>"
  absl::StatusOr<void*> Symbol(const char* name) const;
};

// Loads `file` from the first directory of `search_path` that holds it.
// `global`: RTLD_GLOBAL (the module's symbols serve the libraries it
// dlopen()s in turn, as Open MPI's components expect) instead of
// RTLD_LOCAL. Errors: Unavailable
//   "<what> <file> is in none of: <dir>, <dir>"   (no directory holds it)
//   "cannot load <what> <path>: <dlerror>"          (a library it needs is missing)
absl::StatusOr<SharedModule> LoadSharedModule(absl::string_view file, absl::string_view what,
                                              const std::vector<std::string>& search_path,
                                              bool global);

}  // namespace jitpipe

#endif  // JITPIPE_BASE_SHARED_MODULE_H_
