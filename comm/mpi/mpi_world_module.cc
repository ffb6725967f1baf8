// The MPI backend as a loadable module (libjitpipe_world_mpi.so): the one
// symbol comm/world_plugin.h's loader looks up. Built only with MPI; the CLI
// loads it on `replay --backend mpi`, so that no other command loads Open
// MPI's libraries.
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "comm/mpi/mpi_world.h"
#include "comm/world_plugin.h"

extern "C" __attribute__((visibility("default"))) void jitpipe_create_world(
    const jitpipe::WorldModuleArgs& args,
    absl::StatusOr<std::unique_ptr<jitpipe::World>>* out) {
  if (args.abi_version != jitpipe::kWorldModuleAbiVersion) {
    *out = absl::FailedPreconditionError(absl::StrCat(
        "the MPI backend's module was built for world module ABI version ",
        jitpipe::kWorldModuleAbiVersion, " but the program uses version ", args.abi_version,
        "; rebuild and install them together"));
    return;
  }
  absl::StatusOr<std::unique_ptr<jitpipe::MpiWorld>> world =
      jitpipe::CreateMpiWorld(args.argc, args.argv, {});
  if (!world.ok()) {
    *out = world.status();
    return;
  }
  *out = std::unique_ptr<jitpipe::World>(*std::move(world));
}
