// The iteration order of a CPython set of small non-negative ints.
//
// PyTorch's _add_unshard_reshard keeps its active stages in a Python set and
// RESHARDs them in the set's iteration order, which is neither insertion nor
// ascending order once stage numbers collide in the hash table (stage 9 and
// stage 1 in an 8-slot table, e.g. on pp 8 with 4 stages per rank). To lower
// exactly as PyTorch does, this class replays CPython's set table (open
// addressing, as in Objects/setobject.c of CPython 3.7 and later): an int
// hashes to itself, a table starts with 8 slots, a probe checks up to 9
// following slots before jumping with i = 5i + 1 + perturb, a removal leaves a
// dummy, an insertion of a new key takes the last dummy on its probe path (or
// else the empty slot that ends it), and the table is rebuilt to the smallest
// power of two above 4 * used when fill reaches 3/5 of it. Checked against
// CPython 3.11 on thousands of random add/remove sequences.
//
//   CPythonIntSet s;  s.Add(1);  s.Add(9);  s.Remove(1);  s.Add(17);
//   s.Elements() == {17, 9}      // what list({..}) gives in Python
//
// A plain value type; not thread-safe.
#ifndef JITPIPE_BASE_CPYTHON_INT_SET_H_
#define JITPIPE_BASE_CPYTHON_INT_SET_H_

#include <cstdint>
#include <vector>

namespace jitpipe {

class CPythonIntSet {
 public:
  CPythonIntSet();

  bool Contains(int32_t key) const;
  // Adds `key` (nothing happens when present). REQUIRES: key >= 0.
  void Add(int32_t key);
  // Removes `key` (nothing happens when absent).
  void Remove(int32_t key);
  // The elements in CPython's iteration order (table slot order).
  std::vector<int32_t> Elements() const;
  int size() const { return used_; }

 private:
  static constexpr int32_t kUnused = -1;
  static constexpr int32_t kDummy = -2;

  // The slot holding `key`, or -1.
  int64_t Find(int32_t key) const;
  // Places `key` into a table known to hold no dummies and not `key`.
  static void InsertClean(std::vector<int32_t>& table, int32_t key);
  void Resize(int min_used);

  std::vector<int32_t> table_;  // a key, kUnused or kDummy per slot
  int fill_ = 0;                // slots holding a key or a dummy
  int used_ = 0;                // slots holding a key
};

}  // namespace jitpipe

#endif  // JITPIPE_BASE_CPYTHON_INT_SET_H_
