// Worlds loaded at run time: a backend whose libraries are heavy (MPI today;
// CUDA and NCCL next) is built as a shared module that the CLI dlopen()s
// only when that backend is asked for, so that every other command starts
// without loading them (issue 19: `jitpipe --version` loaded 53 shared
// libraries, Open MPI's among them).
//
//   backend name  ->  module file               ->  factory symbol
//   "mpi"             libjitpipe_world_mpi.so       jitpipe_create_world
//
// A module is self-contained: it links its backend's libraries, its own
// copy of jitpipe's static libraries with every symbol hidden but the
// factory (-Wl,--exclude-libs,ALL; comm/CMakeLists.txt), and Abseil's shared
// libraries, while the CLI links Abseil's archives (JitpipeStaticAbsl.cmake):
// the process holds two copies of each. Only the World and Transport
// interfaces (virtual calls) and plain values (Status, strings, spans,
// durations) cross the boundary; nothing that crosses it may hold a hashed
// Abseil container, whose hash seed differs per copy.
//
// Modules are found and loaded as base/shared_module.h says (next to the
// executable, then the installation's library directory); a module stays
// loaded until the process ends: the world's code lives in it.
//
// Thread safety: LoadWorld may be called from any thread, once per backend
// per process (a backend's factory may allow only one world per process,
// as MPI does).
#ifndef JITPIPE_COMM_WORLD_PLUGIN_H_
#define JITPIPE_COMM_WORLD_PLUGIN_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "comm/world.h"

namespace jitpipe {

// Bumped whenever WorldModuleArgs, the factory's signature or the World or
// Transport interfaces change; a module built for another version refuses
// to create a world (FailedPrecondition).
inline constexpr int kWorldModuleAbiVersion = 1;

// What the loader hands a module's factory.
struct WorldModuleArgs {
  int abi_version = kWorldModuleAbiVersion;
  // The process's arguments, for backends that take their own from them
  // (MPI_Init); both may be null.
  int* argc = nullptr;
  char*** argv = nullptr;
};

// The one symbol a module exports (extern "C", so its name is plain), of
// type WorldModuleFactory: creates the world into *out (never null).
inline constexpr char kWorldModuleFactorySymbol[] = "jitpipe_create_world";
using WorldModuleFactory = void (*)(const WorldModuleArgs& args,
                                    absl::StatusOr<std::unique_ptr<World>>* out);

// "libjitpipe_world_<backend>.so".
std::string WorldModuleFileName(absl::string_view backend);

// The directories searched, in order: ModuleSearchPath().
std::vector<std::string> WorldModuleSearchPath();

// Loads `backend`'s module from the first directory of `search_path` that
// holds its file and creates the world with its factory.
// Errors: Unavailable naming the module file and every directory searched
// when no directory holds it, or naming the file and dlerror() when it
// cannot be loaded (a library it needs is missing) or lacks the factory
// symbol; otherwise the factory's own status (CreateMpiWorld's errors for
// "mpi"; FailedPrecondition for a module of another ABI version).
absl::StatusOr<std::unique_ptr<World>> LoadWorld(absl::string_view backend,
                                                 const WorldModuleArgs& args,
                                                 const std::vector<std::string>& search_path);
// The same over WorldModuleSearchPath().
absl::StatusOr<std::unique_ptr<World>> LoadWorld(absl::string_view backend,
                                                 const WorldModuleArgs& args = {});

}  // namespace jitpipe

#endif  // JITPIPE_COMM_WORLD_PLUGIN_H_
