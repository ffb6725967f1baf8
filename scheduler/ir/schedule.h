// A schedule: the parameters of a pipeline and one program per rank.
//
// Vocabulary (PyTorch's): p = pp ranks, v = stages_per_rank, S = p*v stages,
// m = microbatches. Stages are grouped into `chains`: independent pipelines
// whose stages are numbered consecutively (chain c holds stages
// [c*S/chains, (c+1)*S/chains)). Every ordinary schedule has one chain;
// DualPipe runs two, in opposite directions over the same ranks. A chain's
// first stage reads the microbatch, its last computes the loss, and each
// chain processes m / chains microbatches numbered 0 .. m/chains - 1.
//
// Placement of stages on ranks is explicit (`stage_to_rank`); `placement`
// names the pattern it follows:
//   loop: stage s on rank s mod p            (rank r: r, r+p, r+2p, ...)
//   v:    rank r holds r and 2p-1-r (v = 2); PyTorch's V walk for larger v
//   custom: anything else (e.g. inferred from a CSV)
//
// A compute-only program (lowered == false) holds F/B/I/W/OVERLAP_F_B and
// bubbles. A lowered program has every send, receive and reduction explicit
// and no bubbles.
#ifndef JITPIPE_SCHEDULER_IR_SCHEDULE_H_
#define JITPIPE_SCHEDULER_IR_SCHEDULE_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/ir/action.h"

namespace jitpipe {

using RankProgram = std::vector<Action>;

enum class Placement { kLoop, kV, kCustom };

absl::string_view PlacementName(Placement placement);
absl::StatusOr<Placement> ParsePlacement(absl::string_view name);

// stage_to_rank for `placement` (kLoop or kV) with p ranks and v stages per
// rank. kV follows PyTorch's generate_stage_to_rank_mapping: walk the stages,
// stay on the rank at each multiple of p (the turn), otherwise move +1 on even
// blocks and -1 on odd ones.
// REQUIRES: pp >= 1, stages_per_rank >= 1, placement != kCustom.
std::vector<int> StageToRank(Placement placement, int pp, int stages_per_rank);

// The stages each rank holds, ascending.
std::vector<std::vector<int>> RankToStages(const std::vector<int>& stage_to_rank, int pp);
// One rank's stages, ascending (RankToStages(...)[rank] without the others).
std::vector<int> StagesOfRank(const std::vector<int>& stage_to_rank, int rank);

struct Schedule {
  std::string name;  // generator name ("interleaved-1f1b"); "" when unknown
  int pp = 0;
  int stages_per_rank = 0;
  int microbatches = 0;
  int chains = 1;
  Placement placement = Placement::kLoop;
  std::vector<int> stage_to_rank;
  bool lowered = false;
  std::vector<RankProgram> ranks;
  // The layer cut of one chain's stages as a Megatron-style layout string
  // ("Et*3|t*4|t*4|t*3L", planning/partition.h), when the file records one;
  // "" when unknown. Informational: no pass reads it; export writes it.
  std::string layout = {};

  int num_stages() const { return static_cast<int>(stage_to_rank.size()); }
  int stages_per_chain() const { return num_stages() / chains; }
  int microbatches_per_chain() const { return microbatches / chains; }
  int RankOf(int stage) const { return stage_to_rank[stage]; }
  // First and last stage of the stage's chain: the first has no previous
  // stage to receive from, the last no next stage to send to.
  bool IsFirstStage(int stage) const { return stage % stages_per_chain() == 0; }
  bool IsLastStage(int stage) const {
    return stage % stages_per_chain() == stages_per_chain() - 1;
  }
  // Number of actions over all ranks, bubbles included.
  size_t TotalActions() const;

  friend bool operator==(const Schedule&, const Schedule&) = default;
};

// The largest pipeline the engine takes: 4096 ranks and 16384 stages (32x
// and 32x the largest pipelines trained today). Per-rank work that is linear
// in the stages (a rank's view of the stage table) then stays within a few
// seconds for the whole program; schedules beyond are refused where they
// are read or generated, naming the limit.
inline constexpr int kMaxPipelineRanks = 4096;
inline constexpr int kMaxStages = 16384;

// Beyond this many stage-microbatch pairs a header must not claim more pairs
// than its programs hold actions (see ValidateHeader).
inline constexpr int64_t kMaxPairsBeyondPrograms = int64_t{1} << 20;

// Checks the header fields against each other (and only the programs'
// sizes): pp, stages_per_rank, microbatches and chains positive; pp at most
// kMaxPipelineRanks and pp * stages_per_rank at most kMaxStages;
// stage_to_rank has pp*stages_per_rank entries, each a rank in [0, pp), each
// rank holding stages_per_rank stages; chains divides the stages and the
// microbatches; `ranks` has pp programs; a named placement matches
// stage_to_rank; more than kMaxPairsBeyondPrograms stage-microbatch pairs
// only when the programs hold at least that many actions (passes size dense
// tables by the pairs; a valid program holds two actions per pair).
// Errors: InvalidArgument naming the field.
absl::Status ValidateHeader(const Schedule& schedule);

// The placement stage_to_rank follows (kLoop, kV or kCustom).
Placement DetectPlacement(const std::vector<int>& stage_to_rank, int pp);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_IR_SCHEDULE_H_
