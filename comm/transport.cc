#include "comm/transport.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace jitpipe {

int Group::IndexOf(int rank) const {
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] == rank) return static_cast<int>(i);
  }
  return -1;
}

std::string Group::ToString() const { return absl::StrCat("{", absl::StrJoin(ranks, ", "), "}"); }

}  // namespace jitpipe
