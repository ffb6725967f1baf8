// The world module loader (comm/world_plugin.h): which file it looks for,
// where, and what it says when the module is missing, is not a shared
// object, lacks the factory or was built for another ABI version.
#include "comm/world_plugin.h"

#include <unistd.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/testdata.h"

namespace jitpipe::world_plugin_test {
namespace {

using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::WriteTextFile;
using ::testing::HasSubstr;

TEST(WorldPluginTest, NamesTheModuleAfterTheBackend) {
  EXPECT_EQ(WorldModuleFileName("mpi"), "libjitpipe_world_mpi.so");
}

TEST(WorldPluginTest, SearchesTheExecutablesDirectoryThenTheLibraryDirectory) {
  const std::vector<std::string> path = WorldModuleSearchPath();
  ASSERT_EQ(path.size(), 2u);
  EXPECT_THAT(path[0], HasSubstr("tests/comm"));
  EXPECT_EQ(path[1].rfind(path[0] + "/", 0), 0u) << path[1];
}

TEST(WorldPluginTest, AMissingModuleNamesTheFileAndEveryDirectory) {
  const std::string a = MakeTempDir("world_plugin_a");
  const std::string b = MakeTempDir("world_plugin_b");
  absl::StatusOr<std::unique_ptr<World>> world = LoadWorld("absent", {}, {a, b});
  ASSERT_EQ(world.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(world.status().message(),
            "the absent backend's module libjitpipe_world_absent.so is in none of: " + a + ", " + b);
}

TEST(WorldPluginTest, AFileThatIsNoSharedObjectNamesTheFileAndTheLoadersError) {
  const std::string dir = MakeTempDir("world_plugin_bad");
  WriteTextFile(dir + "/libjitpipe_world_bad.so", "not an ELF file\n");
  absl::StatusOr<std::unique_ptr<World>> world = LoadWorld("bad", {}, {dir});
  ASSERT_EQ(world.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(world.status().message(),
              HasSubstr("cannot load the bad backend's module " + dir +
                        "/libjitpipe_world_bad.so: " + dir + "/libjitpipe_world_bad.so: "));
}

TEST(WorldPluginTest, ASharedObjectWithoutTheFactoryNamesTheSymbol) {
  const std::string dir = MakeTempDir("world_plugin_nosym");
  const std::string libm = "/lib/x86_64-linux-gnu/libm.so.6";
  if (symlink(libm.c_str(), (dir + "/libjitpipe_world_nosym.so").c_str()) != 0) {
    GTEST_SKIP() << "cannot link " << libm;
  }
  absl::StatusOr<std::unique_ptr<World>> world = LoadWorld("nosym", {}, {dir});
  ASSERT_EQ(world.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(world.status().message(), HasSubstr("has no jitpipe_create_world: "));
}

#ifdef JITPIPE_WORLD_MODULE_DIR
// The MPI module refuses a caller of another ABI version before it starts
// MPI.
TEST(WorldPluginTest, TheMpiModuleRefusesAnotherAbiVersion) {
  WorldModuleArgs args;
  args.abi_version = kWorldModuleAbiVersion + 1;
  absl::StatusOr<std::unique_ptr<World>> world =
      LoadWorld("mpi", args, {JITPIPE_WORLD_MODULE_DIR});
  ASSERT_EQ(world.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(world.status().message(), HasSubstr("rebuild and install them together"));
}
#endif

}  // namespace
}  // namespace jitpipe::world_plugin_test
