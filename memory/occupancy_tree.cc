#include "memory/occupancy_tree.h"

#include <algorithm>
#include <limits>

namespace jitpipe {
OccupancyTree::OccupancyTree(int num_times)
    : num_times_(num_times), cover_(4 * static_cast<size_t>(num_times)),
      within_(4 * static_cast<size_t>(num_times)) {}

void OccupancyTree::Insert(RangeSet& set, Range range) {
  // The first range that touches or follows `range`, then every one it touches.
  auto first = std::lower_bound(set.begin(), set.end(), range.lo,
                                [](const Range& r, int64_t lo) { return r.hi < lo; });
  auto last = first;
  while (last != set.end() && last->lo <= range.hi) {
    range.lo = std::min(range.lo, last->lo);
    range.hi = std::max(range.hi, last->hi);
    ++last;
  }
  if (first == last) {
    set.insert(first, range);
  } else {
    *first = range;
    set.erase(first + 1, last);
  }
}

void OccupancyTree::PushRun(const RangeSet& set) {
  if (!set.empty()) runs_.push_back({set.data(), set.data() + set.size()});
}

// Node `node` spans time points [lo, hi]; the query is [start, end].
void OccupancyTree::Collect(int node, int lo, int hi, int start, int end) {
  if (start <= lo && hi <= end) {
    PushRun(within_[node]);
    return;
  }
  PushRun(cover_[node]);
  const int mid = lo + (hi - lo) / 2;
  if (start <= mid && !within_[2 * node].empty()) Collect(2 * node, lo, mid, start, end);
  if (end > mid && !within_[2 * node + 1].empty()) Collect(2 * node + 1, mid + 1, hi, start, end);
}

void OccupancyTree::Add(int node, int lo, int hi, int start, int end, Range range) {
  Insert(within_[node], range);
  if (start <= lo && hi <= end) {
    Insert(cover_[node], range);
    return;
  }
  const int mid = lo + (hi - lo) / 2;
  if (start <= mid) Add(2 * node, lo, mid, start, end, range);
  if (end > mid) Add(2 * node + 1, mid + 1, hi, start, end, range);
}

int64_t OccupancyTree::BestFit(int start, int end, int64_t bytes, int64_t alignment) {
  runs_.clear();
  if (!within_[1].empty()) Collect(1, 0, num_times_ - 1, start, end);
  // Walk the occupied ranges upwards, merging the sorted runs (a handful,
  // O(log T)) through a min-heap on `lo` instead of sorting their
  // concatenation; `top` is the end of the occupied bytes so far, so
  // [AlignUp(top), next.lo) is a gap.
  auto later = [](const Run& a, const Run& b) { return a.next->lo > b.next->lo; };
  std::make_heap(runs_.begin(), runs_.end(), later);
  int64_t top = 0;
  int64_t best = -1;
  int64_t best_size = std::numeric_limits<int64_t>::max();
  while (!runs_.empty()) {
    std::pop_heap(runs_.begin(), runs_.end(), later);
    const Range r = *runs_.back().next++;
    if (runs_.back().next == runs_.back().end) {
      runs_.pop_back();
    } else {
      std::push_heap(runs_.begin(), runs_.end(), later);
    }
    const int64_t gap_start = AlignUp(top, alignment);
    const int64_t gap_size = r.lo - gap_start;
    if (gap_size >= bytes && gap_size < best_size) {
      best = gap_start;
      best_size = gap_size;
      if (gap_size == bytes) break;  // an exact fit cannot be beaten
    }
    top = std::max(top, r.hi);
  }
  return best >= 0 ? best : AlignUp(top, alignment);
}

void OccupancyTree::Occupy(int start, int end, int64_t offset, int64_t bytes) {
  Add(1, 0, num_times_ - 1, start, end, Range{offset, offset + bytes});
}

}  // namespace jitpipe
