#include "scheduler/passes/add_unshard_reshard.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "base/cpython_int_set.h"
#include "scheduler/analysis/pass_utils.h"

namespace jitpipe {
namespace {

// Where a stage occurs: the action's index in the program and, inside a
// compound, the sub-action's index. Ordered as PyTorch's lookahead meets them.
struct Occurrence {
  size_t index;
  size_t sub;
  int32_t stage;
  bool operator<(const Occurrence& o) const {
    return std::tie(index, sub) < std::tie(o.index, o.sub);
  }
};

// PyTorch's next_stage_indices(count, program[index:]) for increasing
// `index`, for the residency window (`count` = max_active_stages) and the
// issue window (`issue` <= count) at once. It keeps every stage's next
// occurrence in lookahead order and moves only the stages whose occurrence
// `index` passed: O(stages on the rank) per move, where a scan to the end
// of the program would be quadratic when a rank holds fewer than `count`
// stages. An action with several new stages (a compound) adds them all
// before a count is checked, so a window may hold more than its count.
class Lookahead {
 public:
  Lookahead(const RankProgram& program, int num_stages, int count, int issue)
      : slot_of_(num_stages, -1), count_(count), issue_(issue) {
    for (size_t i = 0; i < program.size(); ++i) {
      const Action& a = program[i];
      if (!a.is_compound()) {
        if (!a.is_bubble()) Note(a.stage, i, 0);
        continue;
      }
      for (size_t k = 0; k < a.sub_actions.size(); ++k) Note(a.sub_actions[k].stage, i, k);
    }
    exact_masks_ = occurrences_.size() <= 64;
    cursor_.assign(occurrences_.size(), 0);
    for (const std::vector<Occurrence>& occ : occurrences_) next_.push_back(occ.front());
    std::sort(next_.begin(), next_.end());
    Measure();
  }

  // Moves both windows to start at `index`.
  // REQUIRES: `index` does not decrease between calls.
  void MoveTo(size_t index) {
    if (next_.empty() || next_.front().index >= index) return;
    // The earliest occurrence passed, replaced by its stage's next one at or
    // after `index`, which slides back to its place (or leaves, when the
    // stage does not occur again); until no occurrence before `index` is left.
    do {
      const int slot = slot_of_[next_.front().stage];
      const std::vector<Occurrence>& occ = occurrences_[slot];
      size_t& c = cursor_[slot];
      while (c < occ.size() && occ[c].index < index) ++c;
      if (c == occ.size()) {
        next_.erase(next_.begin());
        continue;
      }
      size_t k = 0;
      for (; k + 1 < next_.size() && next_[k + 1] < occ[c]; ++k) next_[k] = next_[k + 1];
      next_[k] = occ[c];
    } while (!next_.empty() && next_.front().index < index);
    Measure();
  }

  // The residency window's stages are stage(0..window_size()), in lookahead
  // order; the issue window's are its first issued() of them.
  size_t window_size() const { return window_size_; }
  size_t issued() const { return issued_; }
  int32_t stage(size_t k) const { return next_[k].stage; }
  bool InWindow(int32_t stage) const {
    for (size_t k = 0; k < window_size_; ++k) {
      if (next_[k].stage == stage) return true;
    }
    return false;
  }

  // The windows as bit masks over the rank's stages, exact when the rank
  // holds at most 64 stages (else SlotBit is 0 and the masks say nothing).
  bool exact_masks() const { return exact_masks_; }
  uint64_t SlotBit(int32_t stage) const {
    const int slot = slot_of_[stage];
    return exact_masks_ ? uint64_t{1} << slot : 0;
  }
  uint64_t window_slots() const { return window_slots_; }
  uint64_t issue_slots() const { return issue_slots_; }

 private:
  // Records an occurrence unless the stage already occurs in the same action.
  void Note(int32_t stage, size_t index, size_t sub) {
    int& slot = slot_of_[stage];
    if (slot < 0) {
      slot = static_cast<int>(occurrences_.size());
      occurrences_.emplace_back();
    }
    std::vector<Occurrence>& occ = occurrences_[slot];
    if (occ.empty() || occ.back().index != index) occ.push_back({index, sub, stage});
  }

  // The windows' sizes (whole actions until a count is reached) and masks.
  void Measure() {
    window_slots_ = issue_slots_ = 0;
    issued_ = 0;
    size_t k = 0;
    while (k < next_.size()) {
      const size_t action = next_[k].index;
      for (; k < next_.size() && next_[k].index == action; ++k) window_slots_ |= SlotBit(next_[k].stage);
      if (issued_ == 0 && static_cast<int>(k) >= issue_) {
        issued_ = k;
        issue_slots_ = window_slots_;
      }
      if (static_cast<int>(k) >= count_) break;
    }
    window_size_ = k;
    if (issued_ == 0) {
      issued_ = k;
      issue_slots_ = window_slots_;
    }
  }

  std::vector<int> slot_of_;                         // stage -> slot, -1 if absent
  std::vector<std::vector<Occurrence>> occurrences_;  // per slot, ascending
  std::vector<size_t> cursor_;                       // per slot: its occurrence in next_
  std::vector<Occurrence> next_;  // each stage's next occurrence, in lookahead order
  int count_;
  int issue_;
  bool exact_masks_ = true;
  size_t window_size_ = 0;
  size_t issued_ = 0;
  uint64_t window_slots_ = 0;
  uint64_t issue_slots_ = 0;
};

// The active (unsharded) stages: PyTorch's Python set, whose iteration order
// the RESHARDs follow, with a flag per stage for membership and the
// elements listed once per change rather than once per action.
class ActiveStages {
 public:
  explicit ActiveStages(int num_stages) : member_(num_stages, 0) {}

  bool Contains(int32_t stage) const { return member_[stage] != 0; }
  void Add(int32_t stage) {
    set_.Add(stage);
    member_[stage] = 1;
    listed_ = false;
  }
  void Remove(int32_t stage) {
    set_.Remove(stage);
    member_[stage] = 0;
    listed_ = false;
  }
  // A copy in the set's iteration order: callers remove while they walk it.
  const std::vector<int32_t>& Elements() {
    if (!listed_) {
      elements_ = set_.Elements();
      listed_ = true;
    }
    walk_ = elements_;
    return walk_;
  }

 private:
  CPythonIntSet set_;
  std::vector<char> member_;
  std::vector<int32_t> elements_;
  std::vector<int32_t> walk_;
  bool listed_ = true;
};

// `issue`: the unshard lookahead on this rank, <= max_active_stages.
RankProgram AddToRank(const RankProgram& program, int num_stages, int max_active_stages,
                      int issue) {
  RankProgram out;
  out.reserve(program.size() + 8);
  Lookahead lookahead(program, num_stages, max_active_stages, issue);
  ActiveStages active(num_stages);
  uint64_t active_slots = 0;  // `active` as a mask, when the masks are exact
  for (size_t i = 0; i < program.size(); ++i) {
    const Action& a = program[i];
    if (a.is_bubble()) continue;
    lookahead.MoveTo(i);
    // Most actions: every active stage stays in the window and every issued
    // stage is active already, so no RESHARD or UNSHARD goes before them.
    const bool settled = lookahead.exact_masks() &&
                         (active_slots & ~lookahead.window_slots()) == 0 &&
                         (lookahead.issue_slots() & ~active_slots) == 0;
    if (!settled) {
      for (int32_t s : active.Elements()) {
        if (lookahead.InWindow(s)) continue;
        active.Remove(s);
        active_slots &= ~lookahead.SlotBit(s);
        out.push_back(Action::StageWide(ActionKind::kReshard, s));
      }
      for (size_t k = 0; k < lookahead.issued(); ++k) {
        const int32_t s = lookahead.stage(k);
        if (active.Contains(s)) continue;
        active.Add(s);
        active_slots |= lookahead.SlotBit(s);
        out.push_back(Action::StageWide(ActionKind::kUnshard, s));
      }
    }
    out.push_back(a);
  }
  for (int32_t s : active.Elements()) out.push_back(Action::StageWide(ActionKind::kReshard, s));
  return out;
}

}  // namespace

int UnshardLookahead::ForRank(int rank, int max_active_stages) const {
  switch (kind) {
    case Kind::kFull:
      return max_active_stages;
    case Kind::kAuto:
      return std::min(rank + 2, max_active_stages);
    case Kind::kFixed:
      return distances[0];
    case Kind::kPerRank:
      return distances[rank];
  }
  return max_active_stages;
}

std::string UnshardLookahead::ToString() const {
  switch (kind) {
    case Kind::kFull:
      return "full";
    case Kind::kAuto:
      return "auto";
    default:
      return absl::StrJoin(distances, ",");
  }
}

absl::StatusOr<UnshardLookahead> ParseUnshardLookahead(absl::string_view text) {
  UnshardLookahead lookahead;
  if (text == "full") return lookahead;
  if (text == "auto") {
    lookahead.kind = UnshardLookahead::Kind::kAuto;
    return lookahead;
  }
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int value = 0;
    if (!absl::SimpleAtoi(part, &value) || value < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unshard lookahead \"", text,
          "\": expected full, auto, a number >= 1 or one number per rank (comma-separated)"));
    }
    lookahead.distances.push_back(value);
  }
  lookahead.kind = lookahead.distances.size() == 1 ? UnshardLookahead::Kind::kFixed
                                                   : UnshardLookahead::Kind::kPerRank;
  return lookahead;
}

absl::Status CheckUnshardReshardOptions(const UnshardReshardOptions& options, int pp) {
  if (options.max_active_stages < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_active_stages must be at least 1, not ", options.max_active_stages));
  }
  const UnshardLookahead& l = options.unshard_lookahead;
  if (l.kind == UnshardLookahead::Kind::kPerRank && static_cast<int>(l.distances.size()) != pp) {
    return absl::InvalidArgumentError(
        absl::StrCat("unshard lookahead ", l.ToString(), " gives ", l.distances.size(),
                     " distances; the schedule has ", pp, " ranks"));
  }
  for (int d : l.distances) {
    if (d < 1 || d > options.max_active_stages) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unshard lookahead ", d, " is outside 1..max_active_stages (", options.max_active_stages,
          "): a stage unsharded beyond the residency window would be resharded before its use"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Schedule> AddUnshardReshard(const Schedule& in, int max_active_stages) {
  return AddUnshardReshard(in, UnshardReshardOptions{.max_active_stages = max_active_stages});
}

absl::StatusOr<Schedule> AddUnshardReshard(const Schedule& in,
                                           const UnshardReshardOptions& options) {
  RETURN_IF_ERROR(CheckUnshardReshardOptions(options, in.pp));
  const int max_active_stages = options.max_active_stages;
  RETURN_IF_ERROR(CheckProgram(
      in, "a compute-only program (F, B, I, W, OVERLAP_F_B and bubbles)", [](const Action& a) {
        return !a.is_bubble() && !IsCompute(a.kind);
      }));
  std::vector<RankProgram> ranks;
  ranks.reserve(in.pp);
  for (int r = 0; r < in.pp; ++r) {
    ranks.push_back(AddToRank(in.ranks[r], in.num_stages(), max_active_stages,
                              options.unshard_lookahead.ForRank(r, max_active_stages)));
  }
  return WithPrograms(in, std::move(ranks), /*lowered=*/true);
}

}  // namespace jitpipe
