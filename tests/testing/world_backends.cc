#include "tests/testing/world_backends.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/testing/rank_failure_printer.h"

namespace jitpipe::testing {
namespace {

// The launched worlds of this process, by backend name, or why there is none.
struct Launched {
  absl::Status status;
  std::unique_ptr<World> world;
};
std::map<std::string, Launched>& LaunchedWorlds() {
  static auto* worlds = new std::map<std::string, Launched>();
  return *worlds;
}

// This process's rank in the job its launcher started; -1 when no launcher
// started it (Open MPI sets OMPI_COMM_WORLD_RANK, Hydra and PMIx their own).
int LaunchedRank(Launcher launcher) {
  if (launcher == Launcher::kNone) return -1;
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    const char* value = std::getenv(name);
    int rank = 0;
    if (value != nullptr && absl::SimpleAtoi(value, &rank)) return rank;
  }
  return -1;
}

// Whether the test running now is the only suite the filter selects.
bool InAJobOfItsOwn() {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string suite = test->test_suite_name();
  suite = suite.substr(suite.find('/') + 1);  // "Backends/TransportAbortTest"
  return absl::StrContains(::testing::GTEST_FLAG(filter), suite);
}

}  // namespace

void PrintTo(const WorldBackend& backend, std::ostream* os) { *os << backend.name; }

absl::Status TestWorld::Open(const WorldBackend& backend, WorldUse use, int size) {
  if (backend.launcher == Launcher::kNone) {
    WorldOr made = backend.create(size);
    if (!made.ok()) return made.status();
    owned_ = *std::move(made);
    world_ = owned_.get();
    return absl::OkStatus();
  }
  if (LaunchedRank(backend.launcher) < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the ", backend.name, " backend runs under its launcher (ctest: mpirun -np ",
                     kTestWorldSize, " ... --gtest_filter=*/", backend.name, "*)"));
  }
  if (use == WorldUse::kEnds && !InAJobOfItsOwn()) {
    return absl::FailedPreconditionError(
        "this test aborts the job: it runs in a job of its own (--gtest_filter=<its suite>)");
  }
  Launched& launched = LaunchedWorlds()[backend.name];
  if (launched.world == nullptr && launched.status.ok()) {
    WorldOr made = backend.create(0);
    launched.status = made.status();
    if (made.ok()) launched.world = *std::move(made);
  }
  if (!launched.status.ok()) return launched.status;
  if (launched.world->aborted()) {
    return absl::FailedPreconditionError("an earlier test of this job aborted it");
  }
  world_ = launched.world.get();
  return absl::OkStatus();
}

void TestWorld::OnEveryLocalRank(absl::FunctionRef<void(int world_rank)> body) const {
  std::vector<std::thread> threads;
  for (int w : world_->local_ranks()) threads.emplace_back([&body, w] { body(w); });
  for (std::thread& t : threads) t.join();
}

void EndLaunchedWorlds() { LaunchedWorlds().clear(); }

int RunConformanceSuites(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  PrintOnlyFailuresOnRank(LaunchedRank(Launcher::kMpirun));
  int result = RUN_ALL_TESTS();
  EndLaunchedWorlds();  // MPI_Finalize (MPI_Abort after an incomplete failure exchange)
  // A job its launcher started that ran none of its tests (all skipped: a
  // filter or a size that fits none) checked nothing: that is a failure.
  if (LaunchedRank(Launcher::kMpirun) >= 0 &&
      ::testing::UnitTest::GetInstance()->successful_test_count() == 0) {
    std::fprintf(stderr, "no test ran in this launched job (all were skipped or filtered out)\n");
    result = 1;
  }
  return result;
}

}  // namespace jitpipe::testing
