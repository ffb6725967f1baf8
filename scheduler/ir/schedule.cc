#include "scheduler/ir/schedule.h"

#include "absl/strings/str_cat.h"

namespace jitpipe {

absl::string_view PlacementName(Placement placement) {
  switch (placement) {
    case Placement::kLoop:
      return "loop";
    case Placement::kV:
      return "v";
    case Placement::kCustom:
      return "custom";
  }
  return "?";
}

absl::StatusOr<Placement> ParsePlacement(absl::string_view name) {
  if (name == "loop") return Placement::kLoop;
  if (name == "v") return Placement::kV;
  if (name == "custom") return Placement::kCustom;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown placement \"", name, "\"; expected loop, v or custom"));
}

std::vector<int> StageToRank(Placement placement, int pp, int stages_per_rank) {
  const int num_stages = pp * stages_per_rank;
  std::vector<int> map(num_stages);
  if (placement == Placement::kLoop) {
    for (int s = 0; s < num_stages; ++s) map[s] = s % pp;
    return map;
  }
  int rank = 0;
  for (int s = 0; s < num_stages; ++s) {
    map[s] = rank;
    if ((s + 1) % pp == 0) continue;  // the turn of the V: stay on this rank
    rank += (s / pp) % 2 == 0 ? 1 : -1;
  }
  return map;
}

std::vector<int> StagesOfRank(const std::vector<int>& stage_to_rank, int rank) {
  std::vector<int> stages;
  for (size_t s = 0; s < stage_to_rank.size(); ++s) {
    if (stage_to_rank[s] == rank) stages.push_back(static_cast<int>(s));
  }
  return stages;
}

std::vector<std::vector<int>> RankToStages(const std::vector<int>& stage_to_rank, int pp) {
  std::vector<std::vector<int>> stages(pp);
  for (int s = 0; s < static_cast<int>(stage_to_rank.size()); ++s) {
    int r = stage_to_rank[s];
    if (r >= 0 && r < pp) stages[r].push_back(s);
  }
  return stages;
}

size_t Schedule::TotalActions() const {
  size_t n = 0;
  for (const RankProgram& program : ranks) n += program.size();
  return n;
}

Placement DetectPlacement(const std::vector<int>& stage_to_rank, int pp) {
  if (pp <= 0 || stage_to_rank.empty() || stage_to_rank.size() % pp != 0) {
    return Placement::kCustom;
  }
  int v = static_cast<int>(stage_to_rank.size()) / pp;
  if (stage_to_rank == StageToRank(Placement::kLoop, pp, v)) return Placement::kLoop;
  if (stage_to_rank == StageToRank(Placement::kV, pp, v)) return Placement::kV;
  return Placement::kCustom;
}

absl::Status ValidateHeader(const Schedule& s) {
  if (s.pp < 1) return absl::InvalidArgumentError(absl::StrCat("pp must be at least 1, got ", s.pp));
  if (s.pp > kMaxPipelineRanks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pp ", s.pp, " exceeds the limit of ", kMaxPipelineRanks, " pipeline ranks"));
  }
  if (s.stages_per_rank < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("stages_per_rank must be at least 1, got ", s.stages_per_rank));
  }
  if (s.microbatches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("microbatches must be at least 1, got ", s.microbatches));
  }
  if (s.chains < 1) {
    return absl::InvalidArgumentError(absl::StrCat("chains must be at least 1, got ", s.chains));
  }
  const int64_t num_stages = int64_t{s.pp} * s.stages_per_rank;
  if (num_stages > kMaxStages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pp ", s.pp, " x stages_per_rank ", s.stages_per_rank, " = ", num_stages,
        " stages exceeds the limit of ", kMaxStages, " stages"));
  }
  if (static_cast<int64_t>(s.stage_to_rank.size()) != num_stages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stage_to_rank has ", s.stage_to_rank.size(), " entries; pp ", s.pp,
        " x stages_per_rank ", s.stages_per_rank, " = ", num_stages));
  }
  std::vector<int> count(s.pp, 0);
  for (size_t stage = 0; stage < s.stage_to_rank.size(); ++stage) {
    int r = s.stage_to_rank[stage];
    if (r < 0 || r >= s.pp) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stage_to_rank[", stage, "] is ", r, "; ranks are 0..", s.pp - 1));
    }
    ++count[r];
  }
  for (int r = 0; r < s.pp; ++r) {
    if (count[r] != s.stages_per_rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", r, " holds ", count[r], " stages in stage_to_rank; every rank must hold ",
          "stages_per_rank = ", s.stages_per_rank));
    }
  }
  if (num_stages % s.chains != 0 || s.microbatches % s.chains != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chains (", s.chains, ") must divide the stages (", num_stages,
        ") and the microbatches (", s.microbatches, ")"));
  }
  if (static_cast<int>(s.ranks.size()) != s.pp) {
    return absl::InvalidArgumentError(
        absl::StrCat("the schedule has ", s.ranks.size(), " rank programs but pp is ", s.pp));
  }
  if (s.placement != Placement::kCustom &&
      s.stage_to_rank != StageToRank(s.placement, s.pp, s.stages_per_rank)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stage_to_rank does not follow the ", PlacementName(s.placement),
        " placement; use \"custom\""));
  }
  // Passes index dense tables by (stage, microbatch): a header may not claim
  // far more pairs than its programs could hold (each pair needs a forward
  // and a backward), or a 30-byte file would ask for gigabytes.
  const int64_t pairs = num_stages * (s.microbatches / s.chains);
  const int64_t actions = static_cast<int64_t>(s.TotalActions());
  if (pairs > kMaxPairsBeyondPrograms && pairs > actions) {
    return absl::InvalidArgumentError(absl::StrCat(
        num_stages, " stages x ", s.microbatches / s.chains, " microbatches = ", pairs,
        " stage-microbatch pairs, but the programs hold only ", actions,
        " actions; each pair needs a forward and a backward"));
  }
  return absl::OkStatus();
}

}  // namespace jitpipe
