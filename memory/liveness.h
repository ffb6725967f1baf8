// Live bytes over one rank's program, from its buffer lifetimes: the
// alloc/free event list, the peak (XLA's NoFragmentationStatsHeap: the
// smallest arena any placement could reach for these lifetimes), the
// liveness lower bound and per-category series for traces.
//
// All functions are pure, O(num_actions + buffers), and thread-compatible.
#ifndef JITPIPE_MEMORY_LIVENESS_H_
#define JITPIPE_MEMORY_LIVENESS_H_

#include <array>
#include <cstdint>
#include <vector>

#include "memory/buffer_lifetimes.h"

namespace jitpipe {

struct MemoryEvent {
  int32_t index = 0;   // program index
  bool alloc = false;  // true: before action `index`; false: after it
  int32_t buffer = 0;  // id in RankBuffers::buffers
};

// Every allocation and free in program order: per index, the allocations
// (by buffer id), then the frees (by buffer id).
std::vector<MemoryEvent> MemoryEvents(const RankBuffers& buffers);

// Bytes live during each action (num_actions entries) under the buffers'
// [alloc_index, free_index] intervals.
std::vector<int64_t> LiveBytes(const RankBuffers& buffers);

// LiveBytes as the eager policy would hold these buffers: a received one
// from step start, a sent one (freed after its send) to step end, the rest
// as they are. The same series whatever policy and prefetch `buffers` were
// computed under, so a jit plan gives its eager peak without a second pass
// over the program.
std::vector<int64_t> EagerLiveBytes(const RankBuffers& buffers);

// The lower-bound series: bytes that must be live during each action under
// any placement of the receives and sends, from [needed_from, needed_until].
std::vector<int64_t> NeededBytes(const RankBuffers& buffers);

struct Peak {
  int64_t bytes = 0;
  int index = -1;  // the first index where `bytes` is live; -1 when bytes is 0
};
Peak PeakOf(const std::vector<int64_t>& series);

// Ids of the buffers live during action `index`, ascending.
std::vector<int> BuffersLiveAt(const RankBuffers& buffers, int index);

// LiveBytes split by Buffer::category(), indexed by MemoryCategory.
std::array<std::vector<int64_t>, kNumMemoryCategories> LiveBytesByCategory(
    const RankBuffers& buffers);

}  // namespace jitpipe

#endif  // JITPIPE_MEMORY_LIVENESS_H_
