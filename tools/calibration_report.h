// The part of `jitpipe replay --json` that `jitpipe model --calibrate`
// reads: each stage's measured host time per call with the model layers it
// held (its cut), and, for --stage transformer, the shape replayed:
//
//   "stage_times": {"skipped_steps": 1, "counted_steps": 4,
//                   "stages": [{"stage": 0, "first_layer": 0, "end_layer": 3,
//                               "forward_us": 812.5, "backward_input_us": 0,
//                               "backward_weight_us": 0, "backward_us": 1630.2,
//                               "forward_calls": 16, ...}, ...]},
//   "transformer_shape": {"layers": 4, "hidden": 512, ...}
//
// first_layer / end_layer: model layers [first, end) of a version 2 model
// (0 the embedding, 1..L the decoder layers, L + 1 the loss); absent for a
// version 1 model. Stage s of a schedule with several chains holds the
// cut's range s mod (stages per chain).
#ifndef JITPIPE_TOOLS_CALIBRATION_REPORT_H_
#define JITPIPE_TOOLS_CALIBRATION_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "planning/calibrate.h"
#include "planning/partition.h"
#include "planning/transformer.h"
#include "runtime/stage_call_times.h"

namespace jitpipe::cli {

// The "stage_times" object. `partition`: the cut of a version 2 model.
nlohmann::ordered_json StageTimesJson(const std::vector<StageCallTimes>& times,
                                      const std::optional<Partition>& partition, int skipped_steps,
                                      int counted_steps);

// The "transformer_shape" object: every field of TransformerShape but
// tflops (a replay measures times).
nlohmann::ordered_json TransformerShapeJson(const TransformerShape& shape);

// What a replay report holds for calibration.
struct ReplayCalibrationInput {
  std::vector<MeasuredStage> stages;
  int counted_steps = 0;
};

// Reads `report` (the text of `replay --json`, from `path`) for a
// calibration of the model the shape `flags` describes. Errors:
// InvalidArgument naming `path` and what does not fit: not JSON; no
// "stage_times" with layer ranges (a replay of a version 1 model, or of a
// device backend); no "transformer_shape" (not --stage transformer); a
// shape field that differs from the flags' ("was measured with hidden 512;
// the flags give hidden 256"); a malformed stage.
absl::StatusOr<ReplayCalibrationInput> ReadReplayForCalibration(const std::string& path,
                                                                const std::string& report,
                                                                const TransformerShape& flags);

}  // namespace jitpipe::cli

#endif  // JITPIPE_TOOLS_CALIBRATION_REPORT_H_
