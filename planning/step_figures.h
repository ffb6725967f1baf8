// The figures a user decides a schedule by, derived from one simulated
// training step (stages/predict/simulator.h) and the model's workload
// (scheduler/ir/layered_model.h): how many microbatches a global batch
// makes, tokens per second, MFU, and the bubble split into what the
// schedule leaves idle and what an uneven cut does.
//
// Everything here is a model of the step, not a measurement: the step time
// is the simulated makespan, which already assumes the throughput the layer
// times were written at (`jitpipe model --tflops`).
//
// Pure functions; thread-compatible.
#ifndef JITPIPE_PLANNING_STEP_FIGURES_H_
#define JITPIPE_PLANNING_STEP_FIGURES_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "scheduler/ir/layered_model.h"
#include "stages/predict/simulator.h"

namespace jitpipe {

// The microbatches per step (per pipeline) that `global_batch` sequences
// make: global_batch / (dp.size x workload.microbatch_size).
// Errors: InvalidArgument when global_batch < 1; FailedPrecondition when the
// model does not give its microbatch size (workload.microbatch_size 0);
// InvalidArgument when dp x b does not divide the global batch, naming the
// nearest global batches that it does divide, e.g.
//   global batch 100 is not a multiple of dp 4 x microbatch size 8 = 32
//   sequences (96 or 128 is)
absl::StatusOr<int> MicrobatchesForGlobalBatch(const LayeredModel& model, int64_t global_batch);

// The simulated step's bubble, split in two parts that add up to the
// simulator's bubble_fraction (1 - least busy rank's busy / makespan):
//
//   pipeline  = 1 - max busy / makespan: the idle time even the busiest
//               rank has, the schedule's own fill, drain and waits. With a
//               perfectly balanced cut this is the whole bubble.
//   imbalance = (max busy - min busy) / makespan: the extra idle time of the
//               least busy rank because another rank has more work. It is
//               zero when every rank does the same work, whatever the
//               schedule.
//
// Why max - min and not the mean: the bubble column is the worst (least
// busy) rank's idle fraction, and 1 - min/T = (1 - max/T) + (max - min)/T
// exactly; a split by the mean would not add up to the column shown beside
// it. Both are fractions of the makespan, so they compare across rows.
// Zeros when the simulation has no ranks or a makespan of 0.
struct BubbleSplit {
  double pipeline = 0;
  double imbalance = 0;
};
BubbleSplit SplitBubble(const SimulationResult& simulation);

// One step of `microbatches` microbatches per pipeline, on pp pipeline
// ranks x dp.size replicas x workload.tp GPUs each.
struct StepFigures {
  double step_s = 0;            // the simulated makespan
  int64_t gpus = 0;             // pp x dp x tp
  // 0 when the model does not give b and s (workload).
  int64_t tokens_per_step = 0;  // microbatches x b x s x dp: the global batch in tokens
  double tokens_per_s = 0;      // of the whole job
  double tokens_per_s_per_gpu = 0;
  // Model FLOPs per step / (step_s x gpus x peak): unset when the model does
  // not give model_flops_per_microbatch or device.peak_tflops.
  std::optional<double> mfu = {};
};

// REQUIRES: pp >= 1, microbatches >= 1, makespan_us > 0.
StepFigures StepFiguresOf(const LayeredModel& model, int pp, int microbatches,
                          double makespan_us);

}  // namespace jitpipe

#endif  // JITPIPE_PLANNING_STEP_FIGURES_H_
