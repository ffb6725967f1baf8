#include "comm/launched_process.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace jitpipe {

std::string LaunchedProcess::ToString() const {
  return absl::StrCat("rank ", world_rank, " on ", host);
}

std::optional<int> LauncherRank(absl::FunctionRef<const char*(const char*)> getenv) {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    const char* value = getenv(name);
    if (value == nullptr) continue;
    int rank = 0;
    if (!absl::SimpleAtoi(value, &rank) || rank < 0) return std::nullopt;
    return rank;
  }
  return std::nullopt;
}

std::optional<LaunchedProcess> ThisLaunchedProcess() {
  const std::optional<int> rank = LauncherRank([](const char* name) { return std::getenv(name); });
  if (!rank.has_value()) return std::nullopt;
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return LaunchedProcess{*rank, host[0] != '\0' ? host : "an unnamed host"};
}

absl::Duration GraceAfterLauncherSigterm(absl::FunctionRef<const char*(const char*)> getenv) {
  constexpr absl::Duration kLeast = absl::Milliseconds(500);
  int seconds = 1;  // Open MPI's default
  if (const char* value = getenv("OMPI_MCA_odls_base_sigkill_timeout"); value != nullptr) {
    // An unreadable or out-of-range value keeps the default: the grace only
    // bounds a wait, and mpirun itself refuses what it cannot read.
    if (int given = 0; absl::SimpleAtoi(value, &given) && given >= 0 && given <= 3600) {
      seconds = given;
    }
  }
  return std::max(kLeast, absl::Seconds(seconds) - kLeast);
}

}  // namespace jitpipe
