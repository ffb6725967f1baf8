#include "memory/recv_pool.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "memory/arena.h"

namespace jitpipe {
namespace {

// The most of `intervals` ([alloc, free], both ends included) live at once,
// and the largest one's bytes.
PoolSize PoolOf(const std::vector<const Buffer*>& members) {
  std::vector<std::pair<int32_t, int>> events;  // (time, +1 at alloc / -1 after free)
  events.reserve(2 * members.size());
  int64_t largest = 0;
  for (const Buffer* b : members) {
    events.push_back({b->alloc_index, +1});
    events.push_back({b->free_index + 1, -1});
    largest = std::max(largest, b->bytes);
  }
  // At one time frees (-1) come before allocations: a slot given back after
  // action i is free for a receive posted at i + 1.
  std::sort(events.begin(), events.end());
  int live = 0, most = 0;
  for (const auto& [time, delta] : events) {
    live += delta;
    most = std::max(most, live);
  }
  return {most, most * largest};
}

RecvDirection DirectionOf(const Buffer& b) {
  return b.kind == BufferKind::kInput ? RecvDirection::kForward : RecvDirection::kBackward;
}

// The most bytes of `members` live at once: no layout needs fewer.
int64_t PeakBytes(const std::vector<const Buffer*>& members) {
  std::vector<std::pair<int32_t, int64_t>> events;
  events.reserve(2 * members.size());
  for (const Buffer* b : members) {
    events.push_back({b->alloc_index, b->bytes});
    events.push_back({b->free_index + 1, -b->bytes});
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0, most = 0;
  for (const auto& [time, delta] : events) {
    live += delta;
    most = std::max(most, live);
  }
  return most;
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
  for (const auto& [key, members] : by_stage) {
    const PoolSize size = PoolOf(members);
    pools.per_stage.push_back({key.first, key.second, size});
    pools.stage_direction.slots += size.slots;
    pools.stage_direction.bytes += size.bytes;
  }
  pools.forward = PoolOf(forward);
  pools.backward = PoolOf(backward);
  pools.direction = {pools.forward.slots + pools.backward.slots,
                     pools.forward.bytes + pools.backward.bytes};
  pools.rank_pool = PoolOf(all);
  pools.arena_bytes = ReceiveArenaBytes(all, buffers.num_actions, arena_slack);
  pools.receives = static_cast<int>(all.size());
  return pools;
}

}  // namespace jitpipe
