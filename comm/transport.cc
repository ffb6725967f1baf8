#include "comm/transport.h"

namespace jitpipe {

int Group::IndexOf(int rank) const {
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] == rank) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace jitpipe
