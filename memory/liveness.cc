#include "memory/liveness.h"

namespace jitpipe {
namespace {

// Prefix-sums bytes over [from(b), until(b)] for every buffer selected by `keep`.
template <typename From, typename Until, typename Keep>
std::vector<int64_t> Sweep(const RankBuffers& buffers, From from, Until until, Keep keep) {
  const int n = buffers.num_actions;
  std::vector<int64_t> series(n + 1, 0);
  for (const Buffer& b : buffers.buffers) {
    if (b.bytes == 0 || !keep(b)) continue;
    series[from(b)] += b.bytes;
    series[until(b) + 1] -= b.bytes;
  }
  for (int i = 1; i < n; ++i) series[i] += series[i - 1];
  series.resize(n);
  return series;
}

int AllocOf(const Buffer& b) { return b.alloc_index; }
int FreeOf(const Buffer& b) { return b.free_index; }
bool Always(const Buffer&) { return true; }

}  // namespace

std::vector<MemoryEvent> MemoryEvents(const RankBuffers& buffers) {
  const int n = buffers.num_actions;
  // Bucket 2i holds the allocations before action i, 2i+1 the frees after it.
  std::vector<int> start(2 * n + 1, 0);
  for (const Buffer& b : buffers.buffers) {
    ++start[2 * b.alloc_index + 1];
    ++start[2 * b.free_index + 2];
  }
  for (int k = 0; k < 2 * n; ++k) start[k + 1] += start[k];
  std::vector<MemoryEvent> events(2 * buffers.buffers.size());
  for (int id = 0; id < static_cast<int>(buffers.buffers.size()); ++id) {
    const Buffer& b = buffers.buffers[id];
    events[start[2 * b.alloc_index]++] = {b.alloc_index, true, id};
    events[start[2 * b.free_index + 1]++] = {b.free_index, false, id};
  }
  return events;
}

std::vector<int64_t> LiveBytes(const RankBuffers& buffers) {
  return Sweep(buffers, AllocOf, FreeOf, Always);
}

std::vector<int64_t> EagerLiveBytes(const RankBuffers& buffers) {
  const int last = buffers.num_actions - 1;
  return Sweep(
      buffers, [](const Buffer& b) { return b.received ? 0 : b.alloc_index; },
      [last](const Buffer& b) {
        return b.received || b.free_timing != FreeTiming::kAfterAction ? last : b.free_index;
      },
      Always);
}

std::vector<int64_t> NeededBytes(const RankBuffers& buffers) {
  return Sweep(
      buffers, [](const Buffer& b) { return b.needed_from; },
      [](const Buffer& b) { return b.needed_until; }, Always);
}

Peak PeakOf(const std::vector<int64_t>& series) {
  Peak peak;
  for (int i = 0; i < static_cast<int>(series.size()); ++i) {
    if (series[i] > peak.bytes) peak = {series[i], i};
  }
  return peak;
}

std::vector<int> BuffersLiveAt(const RankBuffers& buffers, int index) {
  std::vector<int> ids;
  for (int id = 0; id < static_cast<int>(buffers.buffers.size()); ++id) {
    const Buffer& b = buffers.buffers[id];
    if (b.alloc_index <= index && index <= b.free_index) ids.push_back(id);
  }
  return ids;
}

std::array<std::vector<int64_t>, kNumMemoryCategories> LiveBytesByCategory(
    const RankBuffers& buffers) {
  std::array<std::vector<int64_t>, kNumMemoryCategories> out;
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    out[c] = Sweep(buffers, AllocOf, FreeOf, [c](const Buffer& b) {
      return static_cast<int>(b.category()) == c;
    });
  }
  return out;
}

}  // namespace jitpipe
