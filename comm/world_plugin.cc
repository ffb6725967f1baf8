#include "comm/world_plugin.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#ifndef JITPIPE_MODULE_DIR_FROM_BINDIR
#define JITPIPE_MODULE_DIR_FROM_BINDIR "../lib"
#endif

namespace jitpipe {
namespace {

// The directory of the running executable; "" when /proc/self/exe cannot
// be read.
std::string ExecutableDir() {
  std::string path(4096, '\0');
  const ssize_t n = readlink("/proc/self/exe", path.data(), path.size());
  if (n <= 0 || static_cast<size_t>(n) >= path.size()) return "";
  path.resize(static_cast<size_t>(n));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash == 0 ? 1 : slash);
}

bool IsFile(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

std::string DlError() {
  const char* error = dlerror();
  return error == nullptr ? "unknown error" : error;
}

}  // namespace

std::string WorldModuleFileName(absl::string_view backend) {
  return absl::StrCat("libjitpipe_world_", backend, ".so");
}

std::vector<std::string> WorldModuleSearchPath() {
  const std::string dir = ExecutableDir();
  if (dir.empty()) return {};
  return {dir, absl::StrCat(dir, "/", JITPIPE_MODULE_DIR_FROM_BINDIR)};
}

absl::StatusOr<std::unique_ptr<World>> LoadWorld(absl::string_view backend,
                                                 const WorldModuleArgs& args,
                                                 const std::vector<std::string>& search_path) {
  const std::string file = WorldModuleFileName(backend);
  std::string found;
  for (const std::string& dir : search_path) {
    if (IsFile(absl::StrCat(dir, "/", file))) {
      found = absl::StrCat(dir, "/", file);
      break;
    }
  }
  if (found.empty()) {
    return absl::UnavailableError(absl::StrCat(
        "the ", backend, " backend's module ", file, " is in none of: ",
        search_path.empty() ? "(no directory: the executable's path is unknown)"
                            : absl::StrJoin(search_path, ", ")));
  }
  // RTLD_GLOBAL: the module's own symbols are hidden but its factory, and
  // the backend's libraries it pulls in (Open MPI) may dlopen() components
  // that expect them to be global, as mpi4py loads libmpi.
  void* handle = dlopen(found.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot load the ", backend, " backend's module ", found, ": ", DlError()));
  }
  // The handle is never closed: the world's code lives in the module.
  dlerror();
  void* symbol = dlsym(handle, kWorldModuleFactorySymbol);
  if (symbol == nullptr) {
    return absl::UnavailableError(absl::StrCat("the ", backend, " backend's module ", found,
                                               " has no ", kWorldModuleFactorySymbol, ": ",
                                               DlError()));
  }
  const auto factory = reinterpret_cast<WorldModuleFactory>(symbol);
  absl::StatusOr<std::unique_ptr<World>> world =
      absl::InternalError(absl::StrCat(found, ": the factory returned nothing"));
  factory(args, &world);
  return world;
}

absl::StatusOr<std::unique_ptr<World>> LoadWorld(absl::string_view backend,
                                                 const WorldModuleArgs& args) {
  return LoadWorld(backend, args, WorldModuleSearchPath());
}

}  // namespace jitpipe
