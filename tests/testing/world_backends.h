// The conformance suites' view of a backend (tests/comm/
// transport_conformance_test.cc, tests/runtime/replay_conformance_test.cc),
// after gloo's test/base_test.h: each suite is TEST_P over a list of
// WorldBackend, one line per backend, and every test body is written once
// against World and Transport.
//
// A backend this build or machine lacks skips (its factory says
// Unavailable), and so does a launched backend in a process its launcher
// did not start: ctest runs the suites once as they are (in-process
// backends) and once more under each launcher (tests/mpi/CMakeLists.txt:
// `mpirun -np 4 SUITE --gtest_filter=*/mpi*`).
#ifndef JITPIPE_TESTS_TESTING_WORLD_BACKENDS_H_
#define JITPIPE_TESTS_TESTING_WORLD_BACKENDS_H_

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/world.h"
#include "gtest/gtest.h"

namespace jitpipe::testing {

// How a backend's ranks are started.
enum class Launcher {
  kNone,    // every rank a thread of the test: a fresh world per test
  kMpirun,  // one rank per process of `mpirun -np N SUITE`: one world per process
};

using WorldOr = absl::StatusOr<std::unique_ptr<World>>;

struct WorldBackend {
  std::string name;  // in test names: "inproc", "mpi"
  Launcher launcher = Launcher::kNone;
  // The backend's factory: a world of `size` ranks (Launcher::kNone), or
  // this process's share of the launched job (its size is the launcher's).
  std::function<WorldOr(int size)> create;
  // What the device backends do differently, which a test that relies on it
  // skips for them (naming the test that covers the backend instead):
  // collectives of device memory only (comm/cuda, comm/nccl); transfers of
  // device memory only, matched in posting order, not by tag (comm/nccl).
  bool host_collectives = true;
  bool host_transfers = true;
  bool matches_by_tag = true;
};

void PrintTo(const WorldBackend& backend, std::ostream* os);

// The ranks of an in-process test world: pp 2 x dp 2, or pp 4.
inline constexpr int kTestWorldSize = 4;

// What a test does to its world.
enum class WorldUse {
  kKeeps,  // leaves it usable: a launched world goes on to the next test
  kEnds,   // aborts it: a launched backend runs the test only in a job of
           // its own (--gtest_filter naming the test's suite)
};

// A test's world: in process, a new one of `size` ranks; launched, this
// process's, made by the first test that asks (on the main thread, before
// the tests start threads of their own) and ended by main() after the last.
class TestWorld {
 public:
  // OK, or the reason to skip the test (GTEST_SKIP() << status.message()).
  absl::Status Open(const WorldBackend& backend, WorldUse use, int size = kTestWorldSize);

  World& operator*() const { return *world_; }
  World* operator->() const { return world_; }

  // Runs body(w) on one thread per local rank w, and joins them.
  void OnEveryLocalRank(absl::FunctionRef<void(int world_rank)> body) const;

 private:
  std::unique_ptr<World> owned_;
  World* world_ = nullptr;
};

// Destroys the launched worlds (MPI_Finalize). main() calls it after the
// tests.
void EndLaunchedWorlds();

// The main() of the conformance suites: in a launched process other than
// the first, only failures are printed, each line naming the process; a
// launched process none of whose tests ran (all skipped) fails.
int RunConformanceSuites(int argc, char** argv);

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_TESTING_WORLD_BACKENDS_H_
