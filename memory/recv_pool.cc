#include "memory/recv_pool.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "memory/arena.h"

namespace jitpipe {
namespace {

// The most of `members` live at once, each weighing weight(buffer), over
// the rank's action indices, as differences: delta[i] is what changes at
// index i (+ at an allocation, - after a free, so a slot given back after
// action i is free for a receive posted at i + 1), and the prefix sums are
// the live values. Sorting the events (frees first at one index) gives the
// same maximum in O(n log n); this is O(n + last index).
// REQUIRES: 0 <= alloc_index and 0 <= free_index for every member.
template <typename T, typename Weight>
T MostLive(const std::vector<const Buffer*>& members, Weight weight, std::vector<T>& delta) {
  int32_t last = 0;
  for (const Buffer* b : members) last = std::max({last, b->alloc_index, b->free_index + 1});
  delta.assign(static_cast<size_t>(last) + 1, 0);
  for (const Buffer* b : members) {
    delta[b->alloc_index] += weight(*b);
    delta[b->free_index + 1] -= weight(*b);
  }
  T live = 0, most = 0;
  for (const T d : delta) {
    live += d;
    most = std::max(most, live);
  }
  return most;
}

// The most of `members` live at once, and the largest one's bytes.
PoolSize PoolOf(const std::vector<const Buffer*>& members, std::vector<int>& scratch) {
  int64_t largest = 0;
  for (const Buffer* b : members) largest = std::max(largest, b->bytes);
  const int most = MostLive(members, [](const Buffer&) { return 1; }, scratch);
  return {most, most * largest};
}

RecvDirection DirectionOf(const Buffer& b) {
  return b.kind == BufferKind::kInput ? RecvDirection::kForward : RecvDirection::kBackward;
}

// The most bytes of `members` live at once: no layout needs fewer.
int64_t PeakBytes(const std::vector<const Buffer*>& members) {
  std::vector<int64_t> delta;
  return MostLive(members, [](const Buffer& b) { return b.bytes; }, delta);
}

// Byte-exact (alignment 1), as the pools are counted; the search stops at a
// layout within `slack` of the peak.
int64_t ReceiveArenaBytes(const std::vector<const Buffer*>& received, int num_actions,
                          double slack) {
  if (received.empty()) return 0;
  std::vector<LiveInterval> intervals;
  intervals.reserve(received.size());
  for (const Buffer* b : received) intervals.push_back({b->bytes, b->alloc_index, b->free_index});
  return ChooseBestGreedyArena(intervals, std::max(num_actions, 1), /*alignment=*/1,
                               ArenaGoodEnough(PeakBytes(received), slack))
      .arena_bytes;
}

std::string SizeText(const PoolSize& size) {
  return absl::StrCat(size.slots, " slots ", size.bytes, " B");
}

}  // namespace

const char* RecvDirectionName(RecvDirection direction) {
  return direction == RecvDirection::kForward ? "forward" : "backward";
}

int64_t RecvPools::best_pool_bytes() const {
  return std::min({stage_direction.bytes, direction.bytes, rank_pool.bytes});
}

std::string RecvPools::ToString() const {
  return absl::StrCat("rank ", rank, ": A ", SizeText(stage_direction), ", B ",
                      SizeText(direction), " (forward ", SizeText(forward), ", backward ",
                      SizeText(backward), "), C ", SizeText(rank_pool), "; arena ", arena_bytes,
                      " B for ", receives, " receives");
}

RecvPools ComputeRecvPools(const RankBuffers& buffers, double arena_slack) {
  RecvPools pools;
  pools.rank = buffers.rank;
  // Index spaces: (stage, direction) groups in stage order; direction.
  std::map<std::pair<int32_t, RecvDirection>, std::vector<const Buffer*>> by_stage;
  std::vector<const Buffer*> forward, backward, all;
  for (const Buffer& b : buffers.buffers) {
    if (!b.received) continue;
    const RecvDirection d = DirectionOf(b);
    by_stage[{b.stage, d}].push_back(&b);
    (d == RecvDirection::kForward ? forward : backward).push_back(&b);
    all.push_back(&b);
  }
  std::vector<int> scratch;
  for (const auto& [key, members] : by_stage) {
    const PoolSize size = PoolOf(members, scratch);
    pools.per_stage.push_back({key.first, key.second, size});
    pools.stage_direction.slots += size.slots;
    pools.stage_direction.bytes += size.bytes;
  }
  pools.forward = PoolOf(forward, scratch);
  pools.backward = PoolOf(backward, scratch);
  pools.direction = {pools.forward.slots + pools.backward.slots,
                     pools.forward.bytes + pools.backward.bytes};
  pools.rank_pool = PoolOf(all, scratch);
  pools.arena_bytes = ReceiveArenaBytes(all, buffers.num_actions, arena_slack);
  pools.receives = static_cast<int>(all.size());
  return pools;
}

}  // namespace jitpipe
