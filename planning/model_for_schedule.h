// The per-stage cost model a command runs a schedule under, from a model
// file of either version: a version 1 file as it is; a version 2 file cut
// into the schedule's stages by, in this order: a layout string given, the
// balanced partition asked for, the cut the schedule file records
// (Schedule::layout, unless told to ignore it), the even cut (partition.h,
// balance.h).
#ifndef JITPIPE_PLANNING_MODEL_FOR_SCHEDULE_H_
#define JITPIPE_PLANNING_MODEL_FOR_SCHEDULE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "planning/partition.h"
#include "planning/rank_memory.h"
#include "scheduler/ir/model_file.h"
#include "scheduler/ir/schedule.h"
#include "stages/predict/predict.h"

namespace jitpipe {

enum class PartitionMethod : uint8_t { kEven, kBalanced };

// "even", "balanced"; ParsePartitionMethod errors: InvalidArgument
// `unknown partition "x"; expected even or balanced`.
absl::string_view PartitionMethodName(PartitionMethod method);
absl::StatusOr<PartitionMethod> ParsePartitionMethod(absl::string_view name);

struct PartitionChoice {
  PartitionMethod method = PartitionMethod::kEven;
  std::string layout = {};  // non-empty: this Megatron-style layout, whatever `method`
  // kEven takes the schedule's recorded cut when it has one, unless this is
  // false (the user asked for the even cut by name).
  bool use_recorded_layout = true;
  PredictOptions predict = {};  // how the balanced search simulates
  absl::Duration time_budget = absl::InfiniteDuration();  // of the balanced search
  int threads = 1;  // the balanced search's (balance.h); <= 0: one per hardware thread
};

struct StagedModel {
  Model model = {};
  std::optional<Partition> partition = {};  // version 2 only: the cut used
  std::string layout = {};                  // that cut as a layout string (one chain)
  std::string how = {};  // "even", "balanced", "layout", "recorded" or "" (version 1)
  bool budget_ended = false;          // balanced: the time budget stopped the search
  bool layered = false;               // from a version 2 file
  TrainingMemory training = {};       // version 2: its optimizer and device
  // Non-empty when the schedule records another model's fingerprint than
  // this file's: what to tell the user (the cut and times may not be what
  // the schedule was judged under).
  std::string model_mismatch = {};
};

// Errors: InvalidArgument when a layout or the balanced method is asked of
// a version 1 file ("--layout and --partition balanced need a version 2
// model"), and those of ParseLayout, BalancePartition and StageModel.
absl::StatusOr<StagedModel> ModelForSchedule(const ModelFile& file, const Schedule& schedule,
                                             const PartitionChoice& choice = {});

}  // namespace jitpipe

#endif  // JITPIPE_PLANNING_MODEL_FOR_SCHEDULE_H_
