#include "comm/world.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace jitpipe {

bool World::is_local(int world_rank) const {
  const std::vector<int>& local = local_ranks();
  return std::binary_search(local.begin(), local.end(), world_rank);
}

absl::Status World::CheckSize(int needed, absl::string_view needed_by) const {
  if (size() == needed) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("the world has ", size(),
                                                 size() == 1 ? " rank" : " ranks", " but ",
                                                 needed_by, " needs ", needed));
}

absl::Status CheckGroups(absl::Span<const Group> groups, int size) {
  for (const Group& group : groups) {
    if (group.ranks.empty()) return absl::InvalidArgumentError("a requested group is empty");
    absl::flat_hash_set<int> seen;
    for (int rank : group.ranks) {
      if (rank < 0 || rank >= size) {
        return absl::InvalidArgumentError(absl::StrCat("group ", group.ToString(), " holds rank ",
                                                       rank, ", outside the world of ", size,
                                                       size == 1 ? " rank" : " ranks"));
      }
      if (!seen.insert(rank).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("group ", group.ToString(), " holds rank ", rank, " twice"));
      }
    }
  }
  return absl::OkStatus();
}

bool IsImplicitGroup(const Group& group, int size) {
  if (group.ranks.size() == 1) return group.ranks[0] >= 0 && group.ranks[0] < size;
  if (static_cast<int>(group.ranks.size()) != size) return false;
  for (int r = 0; r < size; ++r) {
    if (group.ranks[r] != r) return false;
  }
  return true;
}

absl::Status NotAMemberError(int rank, const Group& group) {
  return absl::InvalidArgumentError(
      absl::StrCat("rank ", rank, " posted a collective over group ", group.ToString(),
                   ", of which it is not a member"));
}

absl::Status NotRequestedError(int rank, const Group& group) {
  return absl::InvalidArgumentError(absl::StrCat(
      "rank ", rank, ": group ", group.ToString(),
      " was not requested from the world (World::CreateGroups); a collective runs over a "
      "requested group, the whole world or the rank alone"));
}

}  // namespace jitpipe
