#include "planning/schedule_eval.h"

#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "memory/buffer_lifetimes.h"
#include "planning/recv_offsets.h"
#include "stages/predict/predict.h"

namespace jitpipe {

LowerOptions EvaluationLowering(const Model& model, const TrainingMemory& training,
                                RecvPlacement recv) {
  LowerOptions options{.recv = recv, .reduce_grad = true};
  if (recv == RecvPlacement::kOffset) options.recv_offsets = RecvOffsetChooser(model, training);
  return options;
}

absl::StatusOr<Evaluation> EvaluateSchedule(const Schedule& compute_only, const Model& model,
                                            const TrainingMemory& training, RecvPlacement recv,
                                            bool simulate_if_over) {
  Evaluation out;
  out.recv = recv;
  ASSIGN_OR_RETURN(Schedule lowered,
                   Lower(compute_only, EvaluationLowering(model, training, recv)));
  std::vector<RankBuffers> buffers;
  buffers.reserve(lowered.pp);
  for (int r = 0; r < lowered.pp; ++r) {
    ASSIGN_OR_RETURN(RankBuffers b,
                     ComputeBufferLifetimes(lowered, model, r, {.policy = MemoryPolicy::kJit}));
    buffers.push_back(std::move(b));
  }
  out.memory = RankMemoriesFromBuffers(lowered, model, training, buffers);
  out.fits = out.memory.fits();
  if (!out.fits && !simulate_if_over) return out;
  ASSIGN_OR_RETURN(Prediction p, SimulatePlanned(std::move(lowered), model, std::move(buffers), false));
  out.makespan_us = p.simulation.makespan_us;
  out.simulation = std::move(p.simulation);
  return out;
}

}  // namespace jitpipe
