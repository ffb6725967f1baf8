#include "planning/model_for_schedule.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "planning/balance.h"

namespace jitpipe {

absl::string_view PartitionMethodName(PartitionMethod method) {
  return method == PartitionMethod::kEven ? "even" : "balanced";
}

absl::StatusOr<PartitionMethod> ParsePartitionMethod(absl::string_view name) {
  if (name == "even") return PartitionMethod::kEven;
  if (name == "balanced") return PartitionMethod::kBalanced;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown partition \"", name, "\"; expected even or balanced"));
}

absl::StatusOr<StagedModel> ModelForSchedule(const ModelFile& file, const Schedule& schedule,
                                             const PartitionChoice& choice) {
  StagedModel out;
  if (!schedule.model_fingerprint.empty() && !file.fingerprint.empty() &&
      schedule.model_fingerprint != file.fingerprint) {
    out.model_mismatch = absl::StrCat("the schedule was made for another model (",
                                      schedule.model_fingerprint, "; this one is ",
                                      file.fingerprint, ")");
  }
  if (!file.layered()) {
    if (!choice.layout.empty() || choice.method != PartitionMethod::kEven) {
      return absl::InvalidArgumentError(
          "--layout and --partition balanced need a version 2 model (layers); this one gives "
          "per-stage costs");
    }
    // Checked here, so that the error is the model's (its path), not the
    // schedule's where a pass finds it later.
    RETURN_IF_ERROR(CheckModelFits(file.stages, schedule.num_stages()));
    out.model = file.stages;
    return out;
  }
  const LayeredModel& layered = file.layers;
  // A list of per-rank limits covers every rank or none: a rank left out
  // would silently have no limit.
  const std::vector<int64_t>& limits = layered.device.rank_memory_bytes;
  if (!limits.empty() && static_cast<int>(limits.size()) != schedule.pp) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"device.rank_memory_bytes\" has ", limits.size(), " entries; the schedule has ",
        schedule.pp, " ranks (give one limit per rank, or \"device.memory_bytes\" for all)"));
  }
  out.layered = true;
  out.training = TrainingMemoryOf(layered);
  const int stages = schedule.stages_per_chain();
  if (!choice.layout.empty()) {
    ASSIGN_OR_RETURN(out.partition, ParseLayout(choice.layout, layered, stages));
    out.how = "layout";
  } else if (choice.method == PartitionMethod::kBalanced) {
    ASSIGN_OR_RETURN(BalancedPartition balanced,
                     BalancePartition(layered, schedule,
                                      {.predict = choice.predict,
                                       .time_budget = choice.time_budget,
                                       .threads = choice.threads}));
    out.partition = std::move(balanced.partition);
    out.budget_ended = balanced.budget_ended;
    out.how = "balanced";
  } else if (choice.use_recorded_layout && !schedule.layout.empty()) {
    absl::StatusOr<Partition> recorded = ParseLayout(schedule.layout, layered, stages);
    if (!recorded.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the cut the schedule records does not fit this model: ",
                       recorded.status().message(), " (give --layout or --partition)"));
    }
    out.partition = *std::move(recorded);
    out.how = "recorded";
  } else {
    ASSIGN_OR_RETURN(out.partition, EvenPartition(layered, stages));
    out.how = "even";
  }
  ASSIGN_OR_RETURN(out.model, StageModel(layered, *out.partition, schedule.chains));
  out.layout = out.partition->ToLayout(layered);
  return out;
}

}  // namespace jitpipe
