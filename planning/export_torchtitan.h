// Export of a schedule to torchtitan: what torchtitan's pipeline setup takes
// from a run's configuration, computed from a jitpipe schedule and its cut.
//
// Target: torchtitan main 15e24313 (ParallelismConfig in
// torchtitan/config/parallelism.py, field
// `pipeline_parallel_module_fqns_per_model_part`) and, with
// TorchtitanFields::kModuleFqns, main b5bcd76 (2026-08-21,
// torchtitan/config/configs.py, field `module_fqns_per_model_part`). Both
// count microbatches with `num_pp_microbatches` (since 73aed7f6c, 2026-08-20)
// and name the output head `lm_head` (since 786e26f8e, 2026-04-27; v0.2.x
// calls it `output`).
//
// What torchtitan does with the result (torchtitan/distributed/pipeline_parallel.py):
//  - the CSV goes to _PipelineScheduleRuntime._load_csv with its default
//    format, compute_only: F, B, I, W and OVERLAP_F_B rows and empty cells
//    (bubbles). It refuses SEND/RECV, UNSHARD/RESHARD, REDUCE_GRAD and WAIT
//    rows and inserts its own (_add_unshard_reshard, _add_reduce_grad,
//    _add_send_recv). So a lowered jitpipe program is exported as its
//    compute order: the communication actions are dropped, and where
//    jitpipe placed receives, waits and reductions is not carried.
//  - placement comes from `pipeline_parallel_schedule`, not the CSV:
//    ZBVZeroBubble and DualPipeV place V (exactly 2 stages per rank: rank r
//    holds r and 2p-1-r), every other name loops (stage s on rank s mod p).
//    PipelineScheduleMulti is the loop name the repository's own CSV recipe
//    uses; PipelineScheduleSingle makes its default split 1 stage per rank.
//  - the cut goes to the FQN list: tok_embeddings on the first stage,
//    layers.N, and norm + lm_head on the last; its length is the stage count.
//
// Refused (FailedPrecondition, naming the schedule and why): several chains
// (DualPipe), a placement neither loop nor V, V with other than 2 stages per
// rank, pp 1 (torchtitan turns pipelining off), and more than 2 stages per
// rank without a cut (torchtitan's default split then builds 2 per rank).
//
// Pure functions; thread-compatible.
#ifndef JITPIPE_PLANNING_EXPORT_TORCHTITAN_H_
#define JITPIPE_PLANNING_EXPORT_TORCHTITAN_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "planning/layer_cut.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// Which name the config fragment gives the FQN list (the Python recipe
// finds the field the installed torchtitan has).
enum class TorchtitanFields {
  kPipelineParallelModuleFqns,  // pipeline_parallel_module_fqns_per_model_part (15e24313)
  kModuleFqns,                  // module_fqns_per_model_part (b5bcd76 and older)
};

// "new" and "old"; ParseTorchtitanFields errors: InvalidArgument.
absl::string_view TorchtitanFieldsName(TorchtitanFields fields);
absl::StatusOr<TorchtitanFields> ParseTorchtitanFields(absl::string_view name);
// The config field that name stands for.
absl::string_view TorchtitanFqnField(TorchtitanFields fields);

struct TorchtitanExportOptions {
  TorchtitanFields fields = TorchtitanFields::kPipelineParallelModuleFqns;
  std::string csv_path = "schedule.csv";  // as the config names the CSV
  std::string source = "";                // the input's name, for comments
};

struct TorchtitanExport {
  Schedule compute;                // the compute-only program the CSV holds
  std::string schedule_name;       // pipeline_parallel_schedule
  std::vector<std::vector<std::string>> module_fqns;  // empty: no cut given
  int dropped_actions = 0;         // communication actions of a lowered input
  std::vector<std::string> notes;  // what is not carried, one sentence each
  std::string csv;                 // the CSV text
  std::string toml;                // the [parallelism] config fragment
  std::string recipe;              // the Python recipe function
};

// Exports `schedule` (compute-only or lowered) with `cut` (one entry per
// stage of a chain) when known. Errors: FailedPrecondition for what
// torchtitan cannot run (above); InvalidArgument when the cut's stage count
// is not the schedule's.
// REQUIRES: ValidateStructure(schedule) is ok.
absl::StatusOr<TorchtitanExport> ExportTorchtitan(const Schedule& schedule,
                                                  const std::optional<LayerCut>& cut,
                                                  const TorchtitanExportOptions& options = {});

// torchtitan's _get_pp_rank_to_stage_indices_mapping for every stage: the
// rank of each of `num_stages` stages under schedule name `name`.
// Errors: FailedPrecondition where torchtitan asserts (V with other than 2
// stages per rank, stages not a multiple of pp).
absl::StatusOr<std::vector<int>> TorchtitanStageToRank(absl::string_view name, int pp,
                                                       int num_stages);

// The FQN list of a cut, and back (the inverse, for checks). Errors of
// CutFromModuleFqns: InvalidArgument naming the stage and the name.
std::vector<std::vector<std::string>> ModuleFqns(const LayerCut& cut);
absl::StatusOr<LayerCut> CutFromModuleFqns(const std::vector<std::vector<std::string>>& fqns);

}  // namespace jitpipe

#endif  // JITPIPE_PLANNING_EXPORT_TORCHTITAN_H_
