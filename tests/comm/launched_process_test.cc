#include "comm/launched_process.h"

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "gtest/gtest.h"

namespace jitpipe {
namespace {

struct LauncherEnvCase {
  std::string name;
  std::map<std::string, std::string> env;
  std::optional<int> rank;
};

class LauncherRankTest : public ::testing::TestWithParam<LauncherEnvCase> {};

TEST_P(LauncherRankTest, ReadsTheFirstLauncherVariableSet) {
  const LauncherEnvCase& c = GetParam();
  auto lookup = [&c](const char* name) -> const char* {
    auto it = c.env.find(name);
    return it == c.env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(LauncherRank(lookup), c.rank);
}

INSTANTIATE_TEST_SUITE_P(
    Launchers, LauncherRankTest,
    ::testing::Values(
        LauncherEnvCase{"none", {}, std::nullopt},
        LauncherEnvCase{"open_mpi", {{"OMPI_COMM_WORLD_RANK", "5"}}, 5},
        // Open MPI sets PMIX_RANK too; its own variable comes first.
        LauncherEnvCase{"open_mpi_first", {{"OMPI_COMM_WORLD_RANK", "5"}, {"PMIX_RANK", "7"}}, 5},
        LauncherEnvCase{"pmix", {{"PMIX_RANK", "3"}}, 3},
        LauncherEnvCase{"hydra", {{"PMI_RANK", "0"}}, 0},
        LauncherEnvCase{"slurm", {{"SLURM_PROCID", "12"}}, 12},
        LauncherEnvCase{"not_a_number", {{"OMPI_COMM_WORLD_RANK", "five"}}, std::nullopt},
        LauncherEnvCase{"negative", {{"PMI_RANK", "-1"}}, std::nullopt}),
    [](const ::testing::TestParamInfo<LauncherEnvCase>& param) { return param.param.name; });

TEST(LaunchedProcessTest, NamesTheRankAndTheHost) {
  EXPECT_EQ((LaunchedProcess{5, "node-b"}).ToString(), "rank 5 on node-b");
}

struct GraceCase {
  const char* name;
  const char* sigkill_timeout;  // OMPI_MCA_odls_base_sigkill_timeout; null: unset
  absl::Duration grace;
};

class GraceAfterSigtermTest : public ::testing::TestWithParam<GraceCase> {};

TEST_P(GraceAfterSigtermTest, IsTheLaunchersKillTimeoutLessHalfASecond) {
  const GraceCase& c = GetParam();
  auto lookup = [&c](const char* name) -> const char* {
    return std::string_view(name) == "OMPI_MCA_odls_base_sigkill_timeout" ? c.sigkill_timeout
                                                                          : nullptr;
  };
  EXPECT_EQ(GraceAfterLauncherSigterm(lookup), c.grace);
}

INSTANTIATE_TEST_SUITE_P(
    KillTimeouts, GraceAfterSigtermTest,
    ::testing::Values(GraceCase{"unset_is_open_mpis_default", nullptr, absl::Milliseconds(500)},
                      GraceCase{"one_second", "1", absl::Milliseconds(500)},
                      GraceCase{"five_seconds", "5", absl::Milliseconds(4500)},
                      GraceCase{"zero_keeps_the_least", "0", absl::Milliseconds(500)},
                      GraceCase{"unreadable_keeps_the_default", "soon", absl::Milliseconds(500)},
                      GraceCase{"negative_keeps_the_default", "-3", absl::Milliseconds(500)}),
    [](const ::testing::TestParamInfo<GraceCase>& param) { return param.param.name; });

}  // namespace
}  // namespace jitpipe
