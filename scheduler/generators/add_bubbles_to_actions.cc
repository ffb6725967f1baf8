#include "scheduler/generators/add_bubbles_to_actions.h"

#include <cstddef>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

// Which forwards and full backwards have run, by stage * microbatches + mb.
class SeenSet {
 public:
  SeenSet(int num_stages, int microbatches)
      : num_stages_(num_stages),
        microbatches_(microbatches),
        forward_(static_cast<size_t>(num_stages) * microbatches, false),
        backward_(forward_.size(), false) {}

  // Whether `action` must wait: its dependency has not been marked yet.
  bool MustWait(const Action& action) const {
    const int s = action.stage;
    const size_t mb = static_cast<size_t>(action.microbatch);
    if (action.kind == ActionKind::kForward) return s != 0 && !forward_[Index(s - 1) + mb];
    if (action.kind != ActionKind::kBackward) return false;
    if (s == num_stages_ - 1) return !forward_[Index(s) + mb];
    return !backward_[Index(s + 1) + mb];
  }

  // Records a forward or full backward; other kinds are never waited for.
  void Mark(const Action& action) {
    const size_t at = Index(action.stage) + static_cast<size_t>(action.microbatch);
    if (action.kind == ActionKind::kForward) forward_[at] = true;
    if (action.kind == ActionKind::kBackward) backward_[at] = true;
  }

 private:
  size_t Index(int stage) const { return static_cast<size_t>(stage) * microbatches_; }

  int num_stages_;
  int microbatches_;
  std::vector<bool> forward_;
  std::vector<bool> backward_;
};

absl::Status StuckError(const std::vector<RankProgram>& programs,
                        const std::vector<size_t>& next) {
  std::vector<std::string> stuck;
  for (size_t r = 0; r < programs.size(); ++r) {
    if (next[r] < programs[r].size()) {
      stuck.push_back(WhereInProgram(static_cast<int64_t>(r), static_cast<int64_t>(next[r]),
                                     programs[r][next[r]].ToString()));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "no rank can make progress; waiting: ", absl::StrJoin(stuck, "; ")));
}

// The lock-step replay. Returns, per rank, the input indices in front of
// which a bubble goes (an index repeats once per bubble), ascending.
absl::StatusOr<std::vector<std::vector<size_t>>> BubblePositions(
    const std::vector<RankProgram>& programs, int num_stages, int microbatches) {
  const size_t num_ranks = programs.size();
  std::vector<std::vector<size_t>> positions(num_ranks);
  std::vector<size_t> next(num_ranks, 0);
  SeenSet seen(num_stages, microbatches);
  std::vector<const Action*> ran_this_step;
  // One iteration per global step; within it, one action slot per rank.
  while (true) {
    bool any_left = false;
    bool progress = false;
    ran_this_step.clear();
    for (size_t r = 0; r < num_ranks; ++r) {
      if (next[r] >= programs[r].size()) continue;
      any_left = true;
      const Action& action = programs[r][next[r]];
      if (!action.is_bubble() && seen.MustWait(action)) {
        positions[r].push_back(next[r]);
        continue;
      }
      ran_this_step.push_back(&action);
      ++next[r];
      progress = true;
    }
    if (!any_left) return positions;
    if (!progress) return StuckError(programs, next);
    for (const Action* action : ran_this_step) seen.Mark(*action);
  }
}

RankProgram InsertBubbles(RankProgram program, const std::vector<size_t>& positions) {
  RankProgram out;
  out.reserve(program.size() + positions.size());
  size_t p = 0;
  for (size_t i = 0; i < program.size(); ++i) {
    for (; p < positions.size() && positions[p] == i; ++p) out.push_back(Action::Bubble());
    out.push_back(std::move(program[i]));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<RankProgram>> AddBubblesToActions(std::vector<RankProgram> programs,
                                                             int num_stages, int microbatches) {
  ASSIGN_OR_RETURN(std::vector<std::vector<size_t>> positions,
                   BubblePositions(programs, num_stages, microbatches));
  for (size_t r = 0; r < programs.size(); ++r) {
    if (!positions[r].empty()) programs[r] = InsertBubbles(std::move(programs[r]), positions[r]);
  }
  return programs;
}

}  // namespace jitpipe
