// A value per directed pair of ranks (sender, receiver), for the pairs a
// program actually uses: memory linear in those pairs, never pp² (a table of
// pp² counters was 3.6 GB at pp 30,000; issue 35). Each rank keeps a short
// list of its peers, searched linearly, which is what real placements give
// (a rank talks to at most two ranks per stage it holds); a rank with more
// than kLinearPeers peers moves them into a hash map.
//
// Thread-compatible.
#ifndef JITPIPE_SCHEDULER_ANALYSIS_RANK_PAIR_MAP_H_
#define JITPIPE_SCHEDULER_ANALYSIS_RANK_PAIR_MAP_H_

#include <cstddef>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace jitpipe {

template <typename T>
class RankPairMap {
 public:
  static constexpr size_t kLinearPeers = 16;

  // REQUIRES: pp >= 0.
  explicit RankPairMap(int pp) : rows_(static_cast<size_t>(pp)) {}

  // The value of (src, dst), value-initialised on first use.
  // REQUIRES: 0 <= src < pp.
  T& operator()(int src, int dst) {
    Row& row = rows_[static_cast<size_t>(src)];
    if (!row.many.empty()) return row.many[dst];
    for (auto& [peer, value] : row.few) {
      if (peer == dst) return value;
    }
    if (row.few.size() < kLinearPeers) return row.few.emplace_back(dst, T{}).second;
    for (auto& [peer, value] : row.few) row.many.emplace(peer, std::move(value));
    row.few.clear();
    return row.many[dst];
  }

  // The value of (src, dst), or nullptr when the pair was never used.
  const T* Find(int src, int dst) const {
    const Row& row = rows_[static_cast<size_t>(src)];
    if (!row.many.empty()) {
      auto it = row.many.find(dst);
      return it == row.many.end() ? nullptr : &it->second;
    }
    for (const auto& [peer, value] : row.few) {
      if (peer == dst) return &value;
    }
    return nullptr;
  }

 private:
  struct Row {
    std::vector<std::pair<int, T>> few;
    absl::flat_hash_map<int, T> many;
  };
  std::vector<Row> rows_;
};

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_ANALYSIS_RANK_PAIR_MAP_H_
