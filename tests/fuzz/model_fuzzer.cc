// ParseModelJson and ParseModelFileJson on arbitrary bytes. Properties
// (model.h, layered_model.h): what parses passes ValidateModel (version 1) or
// ValidateLayeredModel (version 2), and every resolved stage cost and byte
// size is finite and non-negative.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/action.h"
#include "scheduler/ir/model.h"
#include "scheduler/ir/model_file.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using jitpipe::fuzz::Check;

void CheckCost(const jitpipe::Model& model, int stage) {
  const jitpipe::StageCost cost = model.ForStage(stage);
  for (double us : {cost.forward_us, cost.backward_input_us, cost.backward_weight_us}) {
    Check(std::isfinite(us) && us >= 0, "stage times finite and >= 0", absl::StrCat(stage));
  }
  // Sums of given times (B = I + W, OVERLAP_F_B = F + B) may round to +inf.
  for (double us : {cost.backward_us, cost.overlap_f_b_us}) {
    Check(!std::isnan(us) && us >= 0, "derived stage times >= 0", absl::StrCat(stage));
  }
  for (int64_t bytes : {cost.input_bytes, cost.output_bytes, cost.stash_bytes, cost.param_bytes}) {
    Check(bytes >= 0, "stage byte sizes >= 0", absl::StrCat(stage));
  }
  Check(model.GradBytes(stage) >= 0 && model.ReduceBytes(stage) >= 0, "gradient bytes >= 0");
  const double traffic = model.ReduceTrafficBytes(stage);
  Check(std::isfinite(traffic) && traffic >= 0, "reduce traffic finite and >= 0");
  using jitpipe::Action;
  using jitpipe::ActionKind;
  const Action overlap = Action::Overlap({Action::Make(ActionKind::kForward, stage, 0),
                                          Action::Make(ActionKind::kBackward, stage, 0)});
  for (const Action& a : {Action::Make(ActionKind::kForward, stage, 0),
                          Action::Make(ActionKind::kBackwardWeight, stage, 0), overlap}) {
    const double us = model.ComputeUs(a);
    Check(!std::isnan(us) && us >= 0, "ComputeUs >= 0", a.ToString());
  }
}

void CheckModelFile(absl::string_view text) {
  absl::StatusOr<jitpipe::ModelFile> file = jitpipe::ParseModelFileJson(text);
  if (!file.ok()) {
    Check(file.status().code() == absl::StatusCode::kInvalidArgument, "ParseModelFileJson's code",
          file.status().ToString());
    return;
  }
  if (!file->layered()) return;
  const absl::Status valid = jitpipe::ValidateLayeredModel(file->layers);
  Check(valid.ok(), "a parsed layered model validates", valid.ToString());
  Check(file->layers.ParamElements() >= 0, "parameters >= 0");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  CheckModelFile(text);
  absl::StatusOr<jitpipe::Model> model = jitpipe::ParseModelJson(text);
  if (!model.ok()) {
    Check(model.status().code() == absl::StatusCode::kInvalidArgument, "ParseModelJson's code",
          model.status().ToString());
    return 0;
  }
  const absl::Status valid = jitpipe::ValidateModel(*model);
  Check(valid.ok(), "a parsed model validates", valid.ToString());
  // Every overridden stage, the stages next to them and stage 0.
  CheckCost(*model, 0);
  for (const jitpipe::StageOverride& o : model->stages) {
    CheckCost(*model, o.index);
    if (o.index < (1 << 30)) CheckCost(*model, o.index + 1);
  }
  return 0;
}
