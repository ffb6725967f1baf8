#include "scheduler/ir/program_facts.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace jitpipe {
namespace {

// The stages an action names: its own, or its sub-actions' for a compound.
template <typename Fn>
void ForEachNamedStage(const Action& a, Fn fn) {
  if (a.is_compound()) {
    for (const Action& sub : a.sub_actions) fn(sub);
  } else {
    fn(a);
  }
}

size_t CountLeaves(const std::vector<RankProgram>& ranks) {
  size_t leaves = 0;
  for (const RankProgram& program : ranks) {
    for (const Action& a : program) leaves += a.is_compound() ? a.sub_actions.size() : 1;
  }
  return leaves;
}

}  // namespace

absl::StatusOr<ProgramFacts> ScanPrograms(const std::vector<RankProgram>& ranks,
                                          const ScanOptions& options, DescribeAction describe) {
  const bool known = options.num_stages >= 0;
  // First sightings by stage: `near` is indexed by stage and never needs more
  // entries than num_stages, or, when that is unknown, than the programs
  // have (leaf) actions, since stages are numbered 0.. without gaps; a larger
  // stage number is a gap, and its sighting goes to `far` instead of growing
  // the vector to that number.
  const size_t near_limit = known ? static_cast<size_t>(options.num_stages) : CountLeaves(ranks) + 1;
  std::vector<ActionPosition> near;
  absl::flat_hash_map<int, ActionPosition> far;
  ProgramFacts facts;
  int max_stage = -1;
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    for (size_t i = 0; i < ranks[r].size(); ++i) {
      const Action& a = ranks[r][i];
      if (a.is_bubble()) continue;
      if (!IsCompute(a.kind) && !facts.first_comm) facts.first_comm = ActionPosition{r, i};
      absl::Status status;
      ForEachNamedStage(a, [&](const Action& part) {
        facts.max_microbatch = std::max(facts.max_microbatch, part.microbatch);
        const int stage = part.stage;
        if (!status.ok() || stage < 0 || (known && stage >= options.num_stages)) return;
        max_stage = std::max(max_stage, stage);
        ActionPosition* seen;
        if (static_cast<size_t>(stage) < near_limit) {
          if (static_cast<size_t>(stage) >= near.size()) near.resize(stage + 1);
          seen = &near[stage];
        } else {
          seen = &far[stage];
        }
        if (seen->rank == kNoRank) {
          *seen = {r, i};
        } else if (seen->rank != r) {
          status = absl::InvalidArgumentError(absl::StrCat(
              describe({r, i}), ": stage ", stage, " is also on rank ", seen->rank, " (index ",
              seen->index, "); a stage lives on exactly one rank"));
        }
      });
      if (!status.ok()) return status;
    }
  }
  if (!known) {
    // Every stage up to the largest must be named; the first one that is not
    // lies within `near` (or just past it), so this stops early.
    for (size_t stage = 0; static_cast<int64_t>(stage) <= max_stage; ++stage) {
      if (stage >= near.size() || near[stage].rank == kNoRank) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", stage, " appears on no rank, but stage ", max_stage,
            " does; stages must be numbered 0.. without gaps"));
      }
    }
  }
  const size_t size = known ? static_cast<size_t>(options.num_stages) : max_stage + 1;
  facts.stage_to_rank.assign(size, kNoRank);
  for (size_t stage = 0; stage < std::min(size, near.size()); ++stage) {
    facts.stage_to_rank[stage] = near[stage].rank;
  }
  return facts;
}

}  // namespace jitpipe
