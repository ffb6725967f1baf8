// main() of the suites run as MPI jobs: the world first (MPI_Init), then
// GoogleTest with only rank 0's progress printed, then MPI_Finalize (or
// MPI_Abort after an incomplete failure exchange) when the world ends.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "tests/mpi/mpi_test_main.h"
#include "tests/testing/rank_failure_printer.h"

namespace jitpipe::testing {
namespace {

MpiWorld* g_world = nullptr;

}  // namespace

MpiWorld& TheMpiWorld() { return *g_world; }

}  // namespace jitpipe::testing

int main(int argc, char** argv) {
  absl::StatusOr<std::unique_ptr<jitpipe::MpiWorld>> world =
      jitpipe::CreateMpiWorld(&argc, &argv, {});
  if (!world.ok()) {
    std::fprintf(stderr, "CreateMpiWorld: %s\n", std::string(world.status().message()).c_str());
    return 1;
  }
  jitpipe::testing::g_world = world->get();
  ::testing::InitGoogleTest(&argc, argv);
  jitpipe::testing::PrintOnlyFailuresOnRank((*world)->rank());
  const int result = RUN_ALL_TESTS();
  world->reset();
  return result;
}
