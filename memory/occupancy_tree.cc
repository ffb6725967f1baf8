#include "memory/occupancy_tree.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

namespace jitpipe {
namespace {

constexpr int64_t kNoEnd = std::numeric_limits<int64_t>::max();

// The ancestor of heap node `node` at the level of heap node `level_of`
// (node itself when they are on one level). REQUIRES: level_of is not below node.
unsigned AncestorAtLevelOf(unsigned node, unsigned level_of) {
  return node >> (std::bit_width(node) - std::bit_width(level_of));
}

}  // namespace

OccupancyTree::OccupancyTree(int num_times, int64_t alignment)
    : num_times_(num_times), leaves_(static_cast<int>(std::bit_ceil(
                                 static_cast<unsigned>(std::max(num_times, 1))))),
      alignment_(alignment), nodes_(2 * static_cast<size_t>(leaves_)) {
  candidates_.resize(64);
  pieces_.resize(64);
}

void OccupancyTree::Clear() {
  for (Node& node : nodes_) {
    node.cover.size = 0;
    node.within.size = 0;
  }
  walk_start_ = walk_end_ = -1;
}

// The nodes straddling the window's left edge are the common ancestors of
// leaves start - 1 and start; those straddling its right edge the common
// ancestors of leaves end and end + 1; the two chains share their top. The
// tiling nodes come from the usual bottom-up walk.
void OccupancyTree::Walk(int start, int end) {
  walk_.clear();
  walk_start_ = start;
  walk_end_ = end;
  const unsigned first = static_cast<unsigned>(start + leaves_);
  const unsigned last = static_cast<unsigned>(end + leaves_);
  unsigned left = 0;  // the lowest node straddling the left edge; 0: none
  if (start > 0) {
    left = first >> std::bit_width((first - 1) ^ first);
    for (unsigned node = left; node >= 1; node >>= 1) walk_.push_back(static_cast<int>(2 * node));
  }
  left_chain_ = static_cast<int>(walk_.size());
  if (end + 1 < leaves_) {
    for (unsigned node = last >> std::bit_width(last ^ (last + 1)); node >= 1; node >>= 1) {
      if (left != 0 && std::bit_width(node) <= std::bit_width(left) &&
          AncestorAtLevelOf(left, node) == node) {
        break;  // from here up the left chain has it
      }
      walk_.push_back(static_cast<int>(2 * node));
    }
  }
  right_chain_ = static_cast<int>(walk_.size()) - left_chain_;
  for (unsigned lo = first, hi = last + 1; lo < hi; lo >>= 1, hi >>= 1) {
    if (lo & 1) walk_.push_back(static_cast<int>(2 * lo++ + 1));
    if (hi & 1) walk_.push_back(static_cast<int>(2 * --hi + 1));
  }
}

int64_t OccupancyTree::BestFit(int start, int end, int64_t bytes) {
  units_ = (bytes + alignment_ - 1) / alignment_;
  if (start != walk_start_ || end != walk_end_) Walk(start, end);
  candidates_[0] = Range{0, kNoEnd};
  num_candidates_ = 1;
  // The sets are scattered over nodes_ and pool_: start every load at once.
  for (const int entry : walk_) __builtin_prefetch(&SetOf(entry));
  for (const int entry : walk_) {
    RangeSet& set = SetOf(entry);
    if (set.size > 0) Subtract(Data(set), static_cast<int>(set.size));
  }
  // Every candidate but the last fits; take the smallest, the lowest on a tie.
  const Range* candidates = candidates_.data();
  Unit best = candidates[num_candidates_ - 1].lo;
  Unit best_size = kNoEnd;
  for (int k = 0; k + 1 < num_candidates_; ++k) {
    const Unit size = candidates[k].hi - candidates[k].lo;
    if (size < best_size) {
      best = candidates[k].lo;
      best_size = size;
    }
  }
  return best * alignment_;
}

// Replaces the candidates that `ranges` overlap by what is left of them, the
// pieces too small for units_ dropped. Candidates below the first range or
// above the last are left alone.
void OccupancyTree::Subtract(const Range* ranges, int count) {
  // At most one piece more per range.
  if (static_cast<size_t>(num_candidates_ + count + 1) > candidates_.size()) {
    candidates_.resize(2 * (num_candidates_ + count + 1));
    pieces_.resize(candidates_.size());
  }
  const Range* in = candidates_.data();
  const int num_candidates = num_candidates_;
  const Unit first_lo = ranges[0].lo;
  const Unit last_hi = ranges[count - 1].hi;
  int begin = 0;
  while (in[begin].hi <= first_lo) ++begin;  // the last one never ends
  if (in[begin].lo >= last_hi) return;
  Range* out = pieces_.data();
  int n = 0;
  for (; n < begin; ++n) out[n] = in[n];
  int k = 0;  // the first range that may still overlap a candidate
  int c = begin;
  for (; c < num_candidates && in[c].lo < last_hi; ++c) {
    const Range gap = in[c];
    Unit lo = gap.lo;
    while (k < count && ranges[k].hi <= lo) ++k;
    int j = k;
    for (; j < count && ranges[j].lo < gap.hi; ++j) {
      if (ranges[j].lo - lo >= units_) out[n++] = Range{lo, ranges[j].lo};
      lo = std::max(lo, ranges[j].hi);
    }
    if (lo < gap.hi && (gap.hi == kNoEnd || gap.hi - lo >= units_)) out[n++] = Range{lo, gap.hi};
    if (j > k) k = j - 1;  // the last range may reach into the next candidate
  }
  for (; c < num_candidates; ++c) out[n++] = in[c];
  num_candidates_ = n;
  candidates_.swap(pieces_);
}

void OccupancyTree::Occupy(int start, int end, int64_t offset, int64_t bytes) {
  if (start != walk_start_ || end != walk_end_) Walk(start, end);
  const Range range{offset / alignment_, (offset + bytes + alignment_ - 1) / alignment_};
  const int chains = left_chain_ + right_chain_;
  for (size_t k = chains; k < walk_.size(); ++k) {
    Node& node = nodes_[walk_[k] >> 1];
    Insert(node.cover, range);
    Insert(node.within, range);
  }
  // Up each chain, `within` only grows: once a node's holds the range, so
  // do the ones above it.
  for (int k = 0; k < left_chain_; ++k) {
    if (!Insert(nodes_[walk_[k] >> 1].within, range)) break;
  }
  for (int k = left_chain_; k < chains; ++k) {
    if (!Insert(nodes_[walk_[k] >> 1].within, range)) break;
  }
}

bool OccupancyTree::Insert(RangeSet& set, Range range) {
  Range* ranges = Data(set);
  const int size = static_cast<int>(set.size);
  // The first range that touches or follows `range`, then every one it touches.
  int first = 0;
  while (first < size && ranges[first].hi < range.lo) ++first;
  if (first < size && ranges[first].lo <= range.lo && range.hi <= ranges[first].hi) return false;
  int last = first;
  for (; last < size && ranges[last].lo <= range.hi; ++last) {
    range.lo = std::min(range.lo, ranges[last].lo);
    range.hi = std::max(range.hi, ranges[last].hi);
  }
  if (first == last) {
    if (static_cast<size_t>(size) == Capacity(set)) {
      Grow(set);
      ranges = Data(set);
    }
    for (int i = size; i > first; --i) ranges[i] = ranges[i - 1];
    ranges[first] = range;
    ++set.size;
    return true;
  } else {
    ranges[first] = range;
    const int removed = last - first - 1;
    for (int i = last; i < size; ++i) ranges[i - removed] = ranges[i];
    set.size = static_cast<uint32_t>(size - removed);
  }
  return true;
}

// Doubles the capacity, moving the ranges to a block of pool_ and the old
// block, if any, to the free list.
void OccupancyTree::Grow(RangeSet& set) {
  const size_t capacity = Capacity(set);
  const uint32_t block = Allocate(2 * capacity);
  const Range* from = Data(set);  // after Allocate, which may move pool_
  std::copy(from, from + set.size, &pool_[block + 1]);
  if (set.spill != kNoSpill) free_[std::countr_zero(capacity)].push_back(set.spill);
  set.spill = block;
}

uint32_t OccupancyTree::Allocate(size_t capacity) {
  std::vector<uint32_t>& free = free_[std::countr_zero(capacity)];
  if (!free.empty()) {
    const uint32_t block = free.back();
    free.pop_back();
    return block;
  }
  const uint32_t block = static_cast<uint32_t>(pool_.size());
  pool_.resize(pool_.size() + 1 + capacity);
  pool_[block].lo = static_cast<Unit>(capacity);
  return block;
}

}  // namespace jitpipe
