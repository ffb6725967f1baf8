// A layered model's times fitted to measured stage call times: what
// `jitpipe model --calibrate REPLAY.json` writes. The bytes are kept; only
// each layer's forward, input-backward and weight-backward times change.
//
// Premise: layers of one kind (embedding, decoder layer, loss head) cost
// the same, and a stage call costs the sum of its layers. Then for each
// call kind (F, I, W) and each stage s holding c(s, k) layers of kind k,
//
//   measured(s) = sum over kinds k of c(s, k) * x(k)
//
// and the times x are the non-negative least-squares fit over the stages
// (a kind whose fit is negative is held at 0 and the rest refitted). How
// many unknowns the stages can tell apart depends on the cut:
//
//   per-kind      one time per kind; needs the stages' counts to have full
//                 column rank (e.g. interleaved pp 2 v 2: Et*a | t*b | t*c |
//                 t*d L gives rows [1 a 0] [0 b 0] [0 c 0] [0 d 1]);
//   heads-scaled  pp 2 (E t*a | t*b L) gives two equations for three
//                 kinds: the decoder layer keeps its own time, and the
//                 embedding and the loss head share one scale of their
//                 times in `base` (the FLOP model's; a gather, the
//                 embedding is 0 there, so its measured cost goes to the
//                 first stage's layers);
//   one-scale     one stage (or stages that tell nothing apart): every
//                 layer's base time times one scale.
//
// The finest grouping whose equations have full rank for every call kind
// is used. When some stage ran full backwards (B) instead of I and W, the
// fit is of F and B (B = I + W where both were measured), and each layer's
// fitted B is split into I and W in the ratio of its base times.
//
// Pure function; thread-compatible.
#ifndef JITPIPE_PLANNING_CALIBRATE_H_
#define JITPIPE_PLANNING_CALIBRATE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "scheduler/ir/layered_model.h"

namespace jitpipe {

// One stage's measured mean call times (runtime/stage_call_times.h) and the
// model layers it holds, [first_layer, end_layer).
struct MeasuredStage {
  int first_layer = 0;
  int end_layer = 0;
  double forward_us = 0;
  double backward_input_us = 0;   // with split_backward
  double backward_weight_us = 0;  // with split_backward
  double backward_us = 0;         // without split_backward
  bool split_backward = false;    // the program ran I and W, not B
};

enum class CalibrationGrouping : uint8_t { kPerKind, kHeadsScaled, kOneScale };

// "per-kind", "heads-scaled", "one-scale".
absl::string_view CalibrationGroupingName(CalibrationGrouping grouping);

struct Calibration {
  LayeredModel model;  // base with the fitted times
  CalibrationGrouping grouping = CalibrationGrouping::kPerKind;
  bool backward_split_by_base = false;  // B was fitted and split by base's I:W
  // The largest |fitted - measured| / measured over stages and call kinds
  // (stages that measured 0 left out): how well the premise holds.
  double worst_relative_residual = 0;
  // The stage and call kind of that residual, e.g. "stage 1 W".
  std::string worst_at;
};

// Errors: InvalidArgument when a stage's layer range is not within base's
// layers, a time is negative or not finite, or no stage holds a layer;
// and those of ValidateLayeredModel(base).
absl::StatusOr<Calibration> CalibrateLayeredModel(const LayeredModel& base,
                                                  absl::Span<const MeasuredStage> stages);

}  // namespace jitpipe

#endif  // JITPIPE_PLANNING_CALIBRATE_H_
