#include "scheduler/generators/v_half_min.h"

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "scheduler/generators/building_block.h"

namespace jitpipe {
namespace {

namespace bb = building_block;

// A building block: per rank, the slots of F0, F1, I1 and I0 of one
// microbatch within the period of 6 (offsets may exceed 6; blocks of
// successive microbatches then interleave). The extra "interval" for some p
// keeps offsets of one rank distinct modulo 6.
using Block = std::vector<std::array<int, 4>>;
constexpr int kPeriod = 6;

// Lifespan about 3p slots: (p+2)//2 units live at the peak.
Block HalfMemoryBlock(int p) {
  const int interval = p % 2 == 0 ? 3 : 0;
  Block block(p);
  for (int r = 0; r < p; ++r) {
    block[r] = {2 * r, 3 * p - r - 2, 3 * p + interval + 2 * r - 1, 6 * p + interval - r - 2};
  }
  return block;
}

// Lifespan about 2p slots: (p+4)//3 units live at the peak.
Block MinMemoryBlock(int p) {
  const int interval = p % 3 == 0 ? 2 : 0;
  Block block(p);
  for (int r = 0; r < p; ++r) {
    block[r] = {r, 2 * p - r - 1, 2 * p + interval + r, 4 * p + interval - r - 1};
  }
  return block;
}

// The block repeated every kPeriod slots, once per microbatch.
bb::Slots Repeat(const Block& block, int microbatches) {
  bb::Slots slots(block.size(), bb::RankSlots(4));
  for (size_t r = 0; r < block.size(); ++r) {
    for (int type = 0; type < 4; ++type) {
      for (int mb = 0; mb < microbatches; ++mb) {
        slots[r][type].push_back(block[r][type] + kPeriod * mb);
      }
    }
  }
  return slots;
}

// Keeps the four F/I lists of every rank, dropping W.
void DropWeights(bb::Slots& slots) {
  for (bb::RankSlots& rank : slots) rank.resize(bb::kW);
}

absl::Status PutWeightsOnAllRanks(bb::Slots& slots, bb::WeightLists lists) {
  for (bb::RankSlots& rank : slots) RETURN_IF_ERROR(bb::PutWeights(rank, lists));
  return absl::OkStatus();
}

// Upstream's pipeline: squeeze with W in explicit slots, run eagerly, drop
// W; squeeze again with W implicit in free slots, place W, run eagerly,
// drop W; place W per chunk for the final order.
absl::StatusOr<bb::Slots> Build(const Block& block, int microbatches) {
  bb::Slots slots = Repeat(block, microbatches);
  RETURN_IF_ERROR(PutWeightsOnAllRanks(slots, bb::WeightLists::kOne));
  ASSIGN_OR_RETURN(slots, bb::Squeeze(std::move(slots), bb::WeightModel::kExplicit));
  ASSIGN_OR_RETURN(slots, bb::EagerStartTimes(slots));
  DropWeights(slots);
  ASSIGN_OR_RETURN(slots, bb::Squeeze(std::move(slots), bb::WeightModel::kImplicit));
  RETURN_IF_ERROR(PutWeightsOnAllRanks(slots, bb::WeightLists::kOne));
  ASSIGN_OR_RETURN(slots, bb::EagerStartTimes(slots));
  DropWeights(slots);
  RETURN_IF_ERROR(PutWeightsOnAllRanks(slots, bb::WeightLists::kPerChunk));
  return slots;
}

absl::StatusOr<Schedule> GenerateFromBlock(absl::string_view name, const Block& block, int pp,
                                           int microbatches, int stages_per_rank) {
  if (stages_per_rank != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": stages per rank must be 2 (a V of two stages per rank), got ", stages_per_rank));
  }
  ASSIGN_OR_RETURN(bb::Slots slots, Build(block, microbatches));
  Schedule s;
  s.name = std::string(name);
  s.pp = pp;
  s.stages_per_rank = 2;
  s.microbatches = microbatches;
  s.placement = Placement::kV;
  s.stage_to_rank = StageToRank(Placement::kV, pp, 2);
  s.ranks.resize(pp);
  const std::vector<std::vector<std::pair<bb::Type, int>>> order = bb::RankOrder(slots);
  for (int r = 0; r < pp; ++r) {
    const int chunk0 = r;
    const int chunk1 = 2 * pp - 1 - r;
    // By bb::Type: F0, F1, I1, I0, W of chunk 1, W of chunk 0.
    const std::array<std::pair<ActionKind, int>, 6> kind_stage = {{
        {ActionKind::kForward, chunk0},
        {ActionKind::kForward, chunk1},
        {ActionKind::kBackwardInput, chunk1},
        {ActionKind::kBackwardInput, chunk0},
        {ActionKind::kBackwardWeight, chunk1},
        {ActionKind::kBackwardWeight, chunk0},
    }};
    s.ranks[r].reserve(order[r].size());
    for (const auto& [type, mb] : order[r]) {
      s.ranks[r].push_back(Action::Make(kind_stage[type].first, kind_stage[type].second, mb));
    }
  }
  return s;
}

}  // namespace

absl::StatusOr<Schedule> GenerateVHalf(int pp, int microbatches, int stages_per_rank) {
  return GenerateFromBlock("v-half", HalfMemoryBlock(pp), pp, microbatches, stages_per_rank);
}

absl::StatusOr<Schedule> GenerateVMin(int pp, int microbatches, int stages_per_rank) {
  return GenerateFromBlock("v-min", MinMemoryBlock(pp), pp, microbatches, stages_per_rank);
}

}  // namespace jitpipe
