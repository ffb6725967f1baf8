#include "comm/world.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace jitpipe {

bool World::is_local(int world_rank) const {
  const std::vector<int>& local = local_ranks();
  return std::binary_search(local.begin(), local.end(), world_rank);
}

absl::Status World::CheckLayout(int pp, int dp) const {
  if (size() == pp * dp) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("the world has ", size(),
                                                 size() == 1 ? " rank" : " ranks", " but pp ", pp,
                                                 " x dp ", dp, " needs ", pp * dp));
}

}  // namespace jitpipe
