#include "planning/step_figures.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace jitpipe {

absl::StatusOr<int> MicrobatchesForGlobalBatch(const LayeredModel& model, int64_t global_batch) {
  if (global_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the global batch must be >= 1 sequence, got ", global_batch));
  }
  const int64_t b = model.workload.microbatch_size;
  if (b < 1) {
    return absl::FailedPreconditionError(
        "the model does not give its microbatch size (\"workload\": {\"microbatch_size\": B}; "
        "jitpipe model writes it), so a global batch cannot be turned into microbatches");
  }
  const int64_t dp = model.dp.size;
  const int64_t per_microbatch = dp * b;
  if (global_batch % per_microbatch != 0) {
    const int64_t below = global_batch / per_microbatch * per_microbatch;
    const int64_t above = below + per_microbatch;
    return absl::InvalidArgumentError(absl::StrCat(
        "global batch ", global_batch, " is not a multiple of dp ", dp, " x microbatch size ", b,
        " = ", per_microbatch, " sequences (",
        below > 0 ? absl::StrCat(below, " or ", above) : absl::StrCat(above), " is)"));
  }
  const int64_t m = global_batch / per_microbatch;
  if (m > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("global batch ", global_batch, " makes ", m, " microbatches; too many"));
  }
  return static_cast<int>(m);
}

BubbleSplit SplitBubble(const SimulationResult& simulation) {
  if (simulation.ranks.empty() || !(simulation.makespan_us > 0)) return {};
  double max_busy = simulation.ranks.front().busy_us;
  double min_busy = max_busy;
  for (const RankSimulation& r : simulation.ranks) {
    max_busy = std::max(max_busy, r.busy_us);
    min_busy = std::min(min_busy, r.busy_us);
  }
  const double t = simulation.makespan_us;
  return {.pipeline = 1 - max_busy / t, .imbalance = (max_busy - min_busy) / t};
}

StepFigures StepFiguresOf(const LayeredModel& model, int pp, int microbatches,
                          double makespan_us) {
  const WorkloadSpec& w = model.workload;
  StepFigures f;
  f.step_s = makespan_us * 1e-6;
  f.gpus = int64_t{pp} * model.dp.size * w.tp;
  f.tokens_per_step = int64_t{microbatches} * w.TokensPerMicrobatch() * model.dp.size;
  f.tokens_per_s = static_cast<double>(f.tokens_per_step) / f.step_s;
  f.tokens_per_s_per_gpu = f.tokens_per_s / static_cast<double>(f.gpus);
  if (w.model_flops_per_microbatch > 0 && model.device.peak_tflops > 0) {
    const double flops = w.model_flops_per_microbatch * microbatches * model.dp.size;
    f.mfu = flops / (f.step_s * static_cast<double>(f.gpus) * model.device.peak_tflops * 1e12);
  }
  return f;
}

}  // namespace jitpipe
