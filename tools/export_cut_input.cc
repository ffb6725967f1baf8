#include "tools/export_cut_input.h"

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/json_document.h"
#include "base/status_macros.h"
#include "scheduler/ir/model_file.h"
#include "tools/common_flags.h"

namespace jitpipe::cli {
namespace {

// The version 2 model at `path`. Errors name the path.
absl::StatusOr<ModelFile> LoadLayeredModel(const std::string& path) {
  absl::StatusOr<ModelFile> file = LoadModelFile(path, MaxInputBytes());
  if (!file.ok()) return file.status();
  if (!file->layered()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": export takes its layers from a version 2 model; this one gives per-stage costs"));
  }
  return file;
}

// The model's partition for `schedule` by `choice`, as a cut.
absl::StatusOr<LayerCut> ModelCut(const std::string& path, const Schedule& schedule,
                                  const PartitionChoice& choice) {
  ASSIGN_OR_RETURN(ModelFile file, LoadLayeredModel(path));
  absl::StatusOr<StagedModel> staged = ModelForSchedule(file, schedule, choice);
  if (!staged.ok()) return WithPath(path, staged.status());
  if (staged->budget_ended) {
    std::fprintf(stderr,
                 "note: --time-budget ended the balanced partition's search; its cut is the "
                 "best found so far\n");
  }
  return CutFromPartition(*staged->partition, file.layers);
}

// A layout, checked against the model when one is given.
absl::StatusOr<LayerCut> LayoutCut(const std::string& layout, const Schedule& schedule,
                                   const CutRequest& request, absl::string_view where) {
  if (!request.model_path.empty()) {
    PartitionChoice choice = request.partition;
    choice.layout = layout;
    return ModelCut(request.model_path, schedule, choice);
  }
  absl::StatusOr<LayerCut> cut = CutFromLayout(layout, schedule.stages_per_chain());
  if (!cut.ok()) return WithPath(where, cut.status());
  return cut;
}

}  // namespace

absl::Status WithPath(absl::string_view path, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(path, ": ", status.message()));
}

absl::StatusOr<CutInput> ResolveCut(const Schedule& schedule, const CutRequest& request) {
  CutInput out;
  if (!schedule.layout.empty()) {
    if (!request.layout.empty() && request.layout != schedule.layout) {
      return absl::InvalidArgumentError(absl::StrCat(
          request.schedule_path, " records layout ", QuoteForMessage(schedule.layout),
          "; --layout ", QuoteForMessage(request.layout),
          " differs (leave --layout out, or change the file's \"layout\")"));
    }
    ASSIGN_OR_RETURN(out.cut, LayoutCut(schedule.layout, schedule, request,
                                        absl::StrCat(request.schedule_path, ": \"layout\"")));
    out.how = absl::StrCat("the layout ", request.schedule_path, " records");
    return out;
  }
  if (!request.layout.empty()) {
    ASSIGN_OR_RETURN(out.cut, LayoutCut(request.layout, schedule, request,
                                        absl::StrCat(request.schedule_path, ": --layout")));
    out.how = "--layout";
    return out;
  }
  if (!request.model_path.empty()) {
    ASSIGN_OR_RETURN(out.cut, ModelCut(request.model_path, schedule, request.partition));
    out.how = absl::StrCat("--model, cut ", PartitionMethodName(request.partition.method));
    return out;
  }
  out.how = "none (the framework's own even split)";
  return out;
}

}  // namespace jitpipe::cli
