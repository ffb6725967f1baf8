#include "base/cpython_int_set.h"

#include <cstddef>
#include <utility>

namespace jitpipe {
namespace {

constexpr size_t kMinSize = 8;      // PySet_MINSIZE
constexpr size_t kLinearProbes = 9;  // LINEAR_PROBES
constexpr int kPerturbShift = 5;     // PERTURB_SHIFT

// Visits the slots CPython probes for `hash` in a table of mask + 1 slots, in
// order, until `visit(slot)` returns true. Each step checks slot i and, when
// they fit in the table, the 9 slots after it; then i = 5i + 1 + perturb.
template <typename Visit>
void Probe(size_t mask, size_t hash, Visit&& visit) {
  size_t i = hash & mask;
  size_t perturb = hash;
  while (true) {
    const size_t extra = i + kLinearProbes <= mask ? kLinearProbes : 0;
    for (size_t j = i; j <= i + extra; ++j) {
      if (visit(j)) return;
    }
    perturb >>= kPerturbShift;
    i = (i * 5 + 1 + perturb) & mask;
  }
}

}  // namespace

CPythonIntSet::CPythonIntSet() : table_(kMinSize, kUnused) {}

int64_t CPythonIntSet::Find(int32_t key) const {
  int64_t found = -1;
  Probe(table_.size() - 1, static_cast<size_t>(key), [&](size_t slot) {
    if (table_[slot] == kUnused) return true;
    if (table_[slot] == key) {
      found = static_cast<int64_t>(slot);
      return true;
    }
    return false;
  });
  return found;
}

bool CPythonIntSet::Contains(int32_t key) const { return Find(key) >= 0; }

void CPythonIntSet::InsertClean(std::vector<int32_t>& table, int32_t key) {
  Probe(table.size() - 1, static_cast<size_t>(key), [&](size_t slot) {
    if (table[slot] != kUnused) return false;
    table[slot] = key;
    return true;
  });
}

void CPythonIntSet::Resize(int min_used) {
  size_t new_size = kMinSize;
  while (new_size <= static_cast<size_t>(min_used)) new_size <<= 1;
  if (new_size == kMinSize && table_.size() == kMinSize && fill_ == used_) return;
  std::vector<int32_t> rebuilt(new_size, kUnused);
  for (int32_t key : table_) {
    if (key >= 0) InsertClean(rebuilt, key);
  }
  table_ = std::move(rebuilt);
  fill_ = used_;
}

void CPythonIntSet::Add(int32_t key) {
  const size_t mask = table_.size() - 1;
  int64_t last_dummy = -1;
  int64_t unused = -1;
  bool present = false;
  Probe(mask, static_cast<size_t>(key), [&](size_t slot) {
    if (table_[slot] == kUnused) {
      unused = static_cast<int64_t>(slot);
      return true;
    }
    if (table_[slot] == key) {
      present = true;
      return true;
    }
    if (table_[slot] == kDummy) last_dummy = static_cast<int64_t>(slot);
    return false;
  });
  if (present) return;
  ++used_;
  if (last_dummy >= 0) {  // a reused dummy changes neither fill nor size
    table_[last_dummy] = key;
    return;
  }
  table_[unused] = key;
  ++fill_;
  if (static_cast<size_t>(fill_) * 5 >= mask * 3) Resize(used_ * 4);
}

void CPythonIntSet::Remove(int32_t key) {
  const int64_t slot = Find(key);
  if (slot < 0) return;
  table_[slot] = kDummy;
  --used_;
}

std::vector<int32_t> CPythonIntSet::Elements() const {
  std::vector<int32_t> out;
  out.reserve(used_);
  for (int32_t key : table_) {
    if (key >= 0) out.push_back(key);
  }
  return out;
}

}  // namespace jitpipe
