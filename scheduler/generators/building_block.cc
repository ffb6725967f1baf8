#include "scheduler/generators/building_block.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"

namespace jitpipe::building_block {
namespace {

constexpr int kFree = -1;
constexpr int kUnset = -1;

bool IsForward(int type) { return type == kF0 || type == kF1; }
bool IsInput(int type) { return type == kI1 || type == kI0; }

// One operation. Upstream's walks take them by (slot, rank, type, mb).
struct Op {
  int slot, rank, type, mb;
};

// A counting sort on the slot, stable over operations listed by rank, type
// and microbatch: (slot, rank, type, mb) order in linear time (a comparison
// sort dominated the run time at pp 128, m 1024).
std::vector<Op> OpsInSlotOrder(const Slots& slots) {
  std::vector<int> per_slot;  // [slot + 1]: operations in that slot
  size_t total = 0;
  for (const RankSlots& rank : slots) {
    for (const std::vector<int>& list : rank) {
      for (int slot : list) {
        if (slot + 2 > static_cast<int>(per_slot.size())) per_slot.resize(slot + 2, 0);
        ++per_slot[slot + 1];
        ++total;
      }
    }
  }
  for (size_t s = 1; s < per_slot.size(); ++s) per_slot[s] += per_slot[s - 1];
  std::vector<Op> ops(total);
  for (int r = 0; r < static_cast<int>(slots.size()); ++r) {
    for (int t = 0; t < static_cast<int>(slots[r].size()); ++t) {
      for (int mb = 0; mb < static_cast<int>(slots[r][t].size()); ++mb) {
        const int slot = slots[r][t][mb];
        ops[per_slot[slot]++] = {slot, r, t, mb};
      }
    }
  }
  return ops;
}

int LastSlot(const RankSlots& rank) {
  int last = 0;
  for (const std::vector<int>& list : rank) {
    if (!list.empty()) last = std::max(last, list.back());
  }
  return last;
}

// slot -> type over [0, LastSlot], kFree where idle.
absl::StatusOr<std::vector<int>> SlotTypes(const RankSlots& rank) {
  std::vector<int> at(LastSlot(rank) + 1, kFree);
  for (int t = 0; t < static_cast<int>(rank.size()); ++t) {
    for (int slot : rank[t]) {
      if (at[slot] != kFree) {
        return absl::InternalError(absl::StrCat("building block: slot ", slot, " used twice"));
      }
      at[slot] = t;
    }
  }
  return at;
}

// The k-th smallest (from 0) of the union of two ascending lists.
int KthOfTwo(const std::vector<int>& a, const std::vector<int>& b, int k) {
  // Take i from a and k+1-i from b; find the i where the two prefixes meet.
  int lo = std::max(0, k + 1 - static_cast<int>(b.size()));
  int hi = std::min(k + 1, static_cast<int>(a.size()));
  while (lo < hi) {
    const int i = (lo + hi) / 2;
    if (a[i] < b[k - i]) {
      lo = i + 1;
    } else {
      hi = i;
    }
  }
  const int i = lo;
  const int j = k + 1 - i;
  return std::max(i > 0 ? a[i - 1] : -1, j > 0 ? b[j - 1] : -1);
}

// The first slot `op` may take in the squeeze: after its dependencies'
// current slots.
int EarliestSlot(const Slots& slots, const Op& op) {
  const RankSlots& rank = slots[op.rank];
  int after = -1;
  if ((op.type == kF0 || op.type == kI1) && op.rank > 0) {
    after = std::max(after, slots[op.rank - 1][op.type][op.mb]);
  }
  if ((op.type == kF1 || op.type == kI0) && op.rank + 1 < static_cast<int>(slots.size())) {
    after = std::max(after, slots[op.rank + 1][op.type][op.mb]);
  }
  if (op.type > kF0 && op.type < kW) after = std::max(after, rank[op.type - 1][op.mb]);
  if (op.type == kW) after = std::max(after, KthOfTwo(rank[kI1], rank[kI0], op.mb));
  if (op.mb > 0) after = std::max(after, rank[op.type][op.mb - 1]);
  return after + 1;
}

// Memory of one rank with explicit W: profile_[s] = activations live after
// slot s. Moving an F earlier raises the profile between its new and old
// slot, a W lowers it, an I leaves it alone.
class ExplicitMemory {
 public:
  explicit ExplicitMemory(const std::vector<int>& at) : profile_(at.size()) {
    int live = 0;
    for (size_t s = 0; s < at.size(); ++s) {
      if (IsForward(at[s])) ++live;
      if (at[s] == kW) --live;
      profile_[s] = live;
    }
  }
  int Peak() const { return std::max(0, *std::max_element(profile_.begin(), profile_.end())); }
  bool Fits(int type, int to, int from, int limit) const {
    if (!IsForward(type)) return true;
    return *std::max_element(profile_.begin() + to, profile_.begin() + from) + 1 <= limit;
  }
  void Move(int type, int to, int from) {
    const int delta = IsForward(type) ? 1 : type == kW ? -1 : 0;
    for (int s = to; s < from; ++s) profile_[s] += delta;
  }

 private:
  std::vector<int> profile_;
};

// Memory of one rank with implicit W. A move changes which slots are free,
// so the count is replayed from the moved operation's new slot on, starting
// from the state cached before that slot (squeezing happens near the end
// of the schedule, so the replay is short).
class ImplicitMemory {
 public:
  explicit ImplicitMemory(std::vector<int> at) : at_(std::move(at)), before_(at_.size() + 1) {
    Replay(0, true);
  }
  int Peak() const { return before_.back().peak; }
  bool Fits(int type, int to, int from, int limit) {
    at_[from] = kFree;
    at_[to] = type;
    const int peak = Replay(to, false);
    at_[to] = kFree;
    at_[from] = type;
    return peak <= limit;
  }
  void Move(int type, int to, int from) {
    at_[from] = kFree;
    at_[to] = type;
    Replay(to, true);
  }

 private:
  struct State {
    int live = 0, pending_w = 0, peak = 0;
  };
  // Runs slots [from, end) from before_[from]; returns the final peak.
  int Replay(int from, bool store) {
    State s = before_[from];
    for (size_t slot = from; slot < at_.size(); ++slot) {
      if (at_[slot] != kFree) {
        if (IsForward(at_[slot])) ++s.live;
        if (IsInput(at_[slot])) ++s.pending_w;
      } else if (s.pending_w > 0) {
        --s.live;
        --s.pending_w;
      }
      s.peak = std::max(s.peak, s.live);
      if (store) before_[slot + 1] = s;
    }
    return s.peak;
  }

  std::vector<int> at_;
  std::vector<State> before_;  // [s]: the state before slot s
};

// Walks the operations in slot order through upstream's three phases
// (warmup, steady, cooldown) and moves each movable one to the earliest free
// slot after its dependencies where `Memory` (ExplicitMemory or
// ImplicitMemory) stays within the peak of the input. Kept in one piece
// because the phase switch and the move share the walk's state.
template <typename Memory>
absl::StatusOr<Slots> SqueezeWith(Slots slots, bool warmup_moves) {
  const int microbatches = static_cast<int>(slots[0][kF0].size());
  std::vector<Memory> memory;
  std::vector<std::vector<char>> taken;
  int limit = 0;
  for (const RankSlots& rank : slots) {
    absl::StatusOr<std::vector<int>> at = SlotTypes(rank);
    if (!at.ok()) return at.status();
    taken.emplace_back(at->size(), 0);
    memory.emplace_back(*std::move(at));
    limit = std::max(limit, memory.back().Peak());
  }
  enum { kWarmup, kSteady, kCooldown } phase = kWarmup;
  for (const Op& op : OpsInSlotOrder(slots)) {
    if (phase == kWarmup && op.type == kI0 && op.rank == 0) phase = kSteady;
    const bool fixed = phase == kSteady || (phase == kWarmup && !warmup_moves);
    if (phase == kSteady && op.type == kF0 && op.mb == microbatches - 1) phase = kCooldown;
    std::vector<char>& rank_taken = taken[op.rank];
    int to = op.slot;
    if (!fixed) {
      const int earliest = EarliestSlot(slots, op);
      if (earliest > op.slot) {
        return absl::InternalError(absl::StrCat("building block: rank ", op.rank, " type ",
                                                op.type, " microbatch ", op.mb,
                                                " precedes a dependency"));
      }
      for (int s = earliest; s < op.slot; ++s) {
        if (!rank_taken[s] && memory[op.rank].Fits(op.type, s, op.slot, limit)) {
          to = s;
          break;
        }
      }
      if (to != op.slot) {
        memory[op.rank].Move(op.type, to, op.slot);
        slots[op.rank][op.type][op.mb] = to;
      }
    }
    rank_taken[to] = 1;
  }
  return slots;
}

}  // namespace

absl::Status PutWeights(RankSlots& rank, WeightLists lists) {
  absl::StatusOr<std::vector<int>> at = SlotTypes(rank);
  if (!at.ok()) return at.status();
  const int num_lists = lists == WeightLists::kOne ? 1 : 2;
  rank.resize(kW + num_lists);
  std::array<int, 2> pending = {0, 0};  // by W list
  for (int slot = 0; slot < static_cast<int>(at->size()); ++slot) {
    const int type = (*at)[slot];
    if (IsInput(type)) {
      ++pending[lists == WeightLists::kOne ? 0 : type - kI1];
    } else if (type == kFree) {
      for (int w = 0; w < 2; ++w) {
        if (pending[w] == 0) continue;
        rank[kW + w].push_back(slot);
        --pending[w];
        break;
      }
    }
  }
  int slot = static_cast<int>(at->size()) - 1;
  for (int w = 0; w < 2; ++w) {
    for (; pending[w] > 0; --pending[w]) rank[kW + w].push_back(++slot);
  }
  return absl::OkStatus();
}

absl::StatusOr<Slots> Squeeze(Slots slots, WeightModel model) {
  if (model == WeightModel::kExplicit) {
    return SqueezeWith<ExplicitMemory>(std::move(slots), /*warmup_moves=*/true);
  }
  return SqueezeWith<ImplicitMemory>(std::move(slots), /*warmup_moves=*/false);
}

absl::StatusOr<Slots> EagerStartTimes(const Slots& slots) {
  const int ranks = static_cast<int>(slots.size());
  Slots end(ranks), start(ranks);
  for (int r = 0; r < ranks; ++r) {
    for (const std::vector<int>& list : slots[r]) {
      end[r].emplace_back(list.size(), kUnset);
      start[r].emplace_back(list.size(), kUnset);
    }
  }
  std::vector<int> rank_free(ranks, 0);
  for (const Op& op : OpsInSlotOrder(slots)) {
    int ready = rank_free[op.rank];
    bool known = true;
    auto after = [&](int r, int type, int mb) {
      known = known && end[r][type][mb] != kUnset;
      ready = std::max(ready, end[r][type][mb]);
    };
    if ((op.type == kF0 || op.type == kI1) && op.rank > 0) after(op.rank - 1, op.type, op.mb);
    if ((op.type == kF1 || op.type == kI0) && op.rank + 1 < ranks) {
      after(op.rank + 1, op.type, op.mb);
    }
    if (op.type > kF0 && op.type < kW) after(op.rank, op.type - 1, op.mb);
    if (op.mb > 0) after(op.rank, op.type, op.mb - 1);
    if (!known) {
      return absl::InternalError(absl::StrCat("building block: rank ", op.rank, " type ",
                                              op.type, " microbatch ", op.mb,
                                              " is ordered before a dependency"));
    }
    start[op.rank][op.type][op.mb] = ready;
    end[op.rank][op.type][op.mb] = ready + 1;
    rank_free[op.rank] = ready + 1;
  }
  return start;
}

std::vector<std::vector<std::pair<Type, int>>> RankOrder(const Slots& slots) {
  std::vector<std::vector<std::pair<Type, int>>> order(slots.size());
  for (const Op& op : OpsInSlotOrder(slots)) {
    order[op.rank].emplace_back(static_cast<Type>(op.type), op.mb);
  }
  return order;
}

}  // namespace jitpipe::building_block
