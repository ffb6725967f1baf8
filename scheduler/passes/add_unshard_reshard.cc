#include "scheduler/passes/add_unshard_reshard.h"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
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

  // The first `count` distinct stages from `index` on, into `stages`; an
  // action with several new stages (a compound) adds them all before the
  // count is checked. `group_ends[g]` is the size `stages` had after the
  // g-th action's stages, so the first `fewer` stages (fewer <= count) are
  // stages[0, the first group end >= fewer): one call serves both counts.
  // REQUIRES: `index` does not decrease between calls.
  void NextStages(size_t index, int count, std::vector<int32_t>& stages,
                  std::vector<size_t>& group_ends) {
    next_.clear();
    for (size_t slot = 0; slot < occurrences_.size(); ++slot) {
      const std::vector<Occurrence>& occ = occurrences_[slot];
      size_t& c = cursor_[slot];
      while (c < occ.size() && occ[c].index < index) ++c;
      if (c < occ.size()) next_.push_back(occ[c]);
    }
    std::sort(next_.begin(), next_.end());
    stages.clear();
    group_ends.clear();
    for (size_t i = 0; i < next_.size();) {
      const size_t action = next_[i].index;
      for (; i < next_.size() && next_[i].index == action; ++i) stages.push_back(next_[i].stage);
      group_ends.push_back(stages.size());
      if (static_cast<int>(stages.size()) >= count) break;
    }
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
  std::vector<Occurrence> next_;                     // NextStages' scratch
};

// `issue`: the unshard lookahead on this rank, <= max_active_stages.
RankProgram AddToRank(const RankProgram& program, int num_stages, int max_active_stages,
                      int issue) {
  RankProgram out;
  out.reserve(program.size() + 8);
  Lookahead lookahead(program, num_stages);
  CPythonIntSet active;
  std::vector<int32_t> next;  // reused: no allocation per action
  std::vector<size_t> group_ends;
  for (size_t i = 0; i < program.size(); ++i) {
    const Action& a = program[i];
    if (a.is_bubble()) continue;
    lookahead.NextStages(i, max_active_stages, next, group_ends);
    auto upcoming = [&](int32_t s) { return std::find(next.begin(), next.end(), s) != next.end(); };
    for (int32_t s : active.Elements()) {
      if (upcoming(s)) continue;
      active.Remove(s);
      out.push_back(Action::StageWide(ActionKind::kReshard, s));
    }
    // The first `issue` stages: NextStages(i, issue) is a prefix of `next`.
    size_t issued = next.size();
    if (issue < max_active_stages) {
      const auto end = std::find_if(group_ends.begin(), group_ends.end(),
                                    [&](size_t e) { return static_cast<int>(e) >= issue; });
      if (end != group_ends.end()) issued = *end;
    }
    for (size_t k = 0; k < issued; ++k) {
      const int32_t s = next[k];
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
