#include "scheduler/passes/add_unshard_reshard.h"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "scheduler/passes/cpython_int_set.h"
#include "scheduler/passes/pass_utils.h"

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
// `index`, in O(stages on the rank) per call instead of a scan to the end of
// the program (which is quadratic when a rank holds fewer than `count`
// stages).
class Lookahead {
 public:
  Lookahead(const RankProgram& program, int num_stages) : slot_of_(num_stages, -1) {
    for (size_t i = 0; i < program.size(); ++i) {
      const Action& a = program[i];
      if (!a.is_compound()) {
        if (!a.is_bubble()) Note(a.stage, i, 0);
        continue;
      }
      for (size_t k = 0; k < a.sub_actions.size(); ++k) Note(a.sub_actions[k].stage, i, k);
    }
    cursor_.assign(occurrences_.size(), 0);
  }

  // The first `count` distinct stages from `index` on; an action with
  // several new stages (a compound) adds them all before the count is checked.
  // REQUIRES: `index` does not decrease between calls.
  std::vector<int32_t> NextStages(size_t index, int count) {
    std::vector<Occurrence> next;
    for (size_t slot = 0; slot < occurrences_.size(); ++slot) {
      const std::vector<Occurrence>& occ = occurrences_[slot];
      size_t& c = cursor_[slot];
      while (c < occ.size() && occ[c].index < index) ++c;
      if (c < occ.size()) next.push_back(occ[c]);
    }
    std::sort(next.begin(), next.end());
    std::vector<int32_t> stages;
    for (size_t i = 0; i < next.size();) {
      const size_t action = next[i].index;
      for (; i < next.size() && next[i].index == action; ++i) stages.push_back(next[i].stage);
      if (static_cast<int>(stages.size()) >= count) break;
    }
    return stages;
  }

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

  std::vector<int> slot_of_;                         // stage -> slot, -1 if absent
  std::vector<std::vector<Occurrence>> occurrences_;  // per slot, ascending
  std::vector<size_t> cursor_;                       // per slot: first occurrence >= index
};

RankProgram AddToRank(const RankProgram& program, int num_stages, int max_active_stages) {
  RankProgram out;
  out.reserve(program.size() + 8);
  Lookahead lookahead(program, num_stages);
  CPythonIntSet active;
  for (size_t i = 0; i < program.size(); ++i) {
    const Action& a = program[i];
    if (a.is_bubble()) continue;
    const std::vector<int32_t> next = lookahead.NextStages(i, max_active_stages);
    auto upcoming = [&](int32_t s) { return std::find(next.begin(), next.end(), s) != next.end(); };
    for (int32_t s : active.Elements()) {
      if (upcoming(s)) continue;
      active.Remove(s);
      out.push_back(Action::StageWide(ActionKind::kReshard, s));
    }
    for (int32_t s : next) {
      if (active.Contains(s)) continue;
      active.Add(s);
      out.push_back(Action::StageWide(ActionKind::kUnshard, s));
    }
    out.push_back(a);
  }
  for (int32_t s : active.Elements()) out.push_back(Action::StageWide(ActionKind::kReshard, s));
  return out;
}

}  // namespace

absl::StatusOr<Schedule> AddUnshardReshard(const Schedule& in, int max_active_stages) {
  if (max_active_stages < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_active_stages must be at least 1, not ", max_active_stages));
  }
  RETURN_IF_ERROR(CheckProgram(
      in, "a compute-only program (F, B, I, W, OVERLAP_F_B and bubbles)", [](const Action& a) {
        return !a.is_bubble() && !IsCompute(a.kind);
      }));
  std::vector<RankProgram> ranks;
  ranks.reserve(in.pp);
  for (const RankProgram& program : in.ranks) {
    ranks.push_back(AddToRank(program, in.num_stages(), max_active_stages));
  }
  return WithPrograms(in, std::move(ranks), /*lowered=*/true);
}

}  // namespace jitpipe
