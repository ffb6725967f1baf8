#include "comm/world_plugin.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/shared_module.h"
#include "base/status_macros.h"

namespace jitpipe {

std::string WorldModuleFileName(absl::string_view backend) {
  return absl::StrCat("libjitpipe_world_", backend, ".so");
}

std::vector<std::string> WorldModuleSearchPath() { return ModuleSearchPath(); }

absl::StatusOr<std::unique_ptr<World>> LoadWorld(absl::string_view backend,
                                                 const WorldModuleArgs& args,
                                                 const std::vector<std::string>& search_path) {
  // RTLD_GLOBAL: the module's own symbols are hidden but its factory, and
  // the backend's libraries it pulls in (Open MPI) may dlopen() components
  // that expect them to be global, as mpi4py loads libmpi.
  ASSIGN_OR_RETURN(const SharedModule module,
                   LoadSharedModule(WorldModuleFileName(backend),
                                    absl::StrCat("the ", backend, " backend's module"),
                                    search_path, /*global=*/true));
  ASSIGN_OR_RETURN(void* symbol, module.Symbol(kWorldModuleFactorySymbol));
  const auto factory = reinterpret_cast<WorldModuleFactory>(symbol);
  absl::StatusOr<std::unique_ptr<World>> world =
      absl::InternalError(absl::StrCat(module.path, ": the factory returned nothing"));
  factory(args, &world);
  return world;
}

absl::StatusOr<std::unique_ptr<World>> LoadWorld(absl::string_view backend,
                                                 const WorldModuleArgs& args) {
  return LoadWorld(backend, args, WorldModuleSearchPath());
}

}  // namespace jitpipe
