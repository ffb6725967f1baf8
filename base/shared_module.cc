#include "base/shared_module.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
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

std::vector<std::string> ModuleSearchPath() {
  const std::string dir = ExecutableDir();
  if (dir.empty()) return {};
  return {dir, absl::StrCat(dir, "/", JITPIPE_MODULE_DIR_FROM_BINDIR)};
}

absl::StatusOr<void*> SharedModule::Symbol(const char* name) const {
  dlerror();
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    return absl::UnavailableError(absl::StrCat(what, " ", path, " has no ", name, ": ", DlError()));
  }
  return symbol;
}

absl::StatusOr<SharedModule> LoadSharedModule(absl::string_view file, absl::string_view what,
                                              const std::vector<std::string>& search_path,
                                              bool global) {
  SharedModule module;
  module.what = std::string(what);
  for (const std::string& dir : search_path) {
    if (IsFile(absl::StrCat(dir, "/", file))) {
      module.path = absl::StrCat(dir, "/", file);
      break;
    }
  }
  if (module.path.empty()) {
    return absl::UnavailableError(absl::StrCat(
        what, " ", file, " is in none of: ",
        search_path.empty() ? "(no directory: the executable's path is unknown)"
                            : absl::StrJoin(search_path, ", ")));
  }
  module.handle = dlopen(module.path.c_str(), RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
  if (module.handle == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot load ", what, " ", module.path, ": ", DlError()));
  }
  return module;  // never closed (see the header)
}

}  // namespace jitpipe
