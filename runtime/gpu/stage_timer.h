// Device time per stage call, for `simulate` with measured costs
// (tools/gpu-check): wraps a device stage factory's stages, records a CUDA
// event pair around every Forward, BackwardInput, BackwardWeight and
// Backward on the call's stream, and after the run turns the pairs into
// each stage's mean time per kind. The host is never synchronised by the
// wrapper; reading the costs requires the run's streams to have completed
// (RunReplay returns after every step's end).
//
// Part of the device module (replay.h). Events are made on first use,
// so a step of wrapped stages cannot be captured as a CUDA graph.
// Thread safety: the factory and its stages may be used from any thread.
#ifndef JITPIPE_RUNTIME_GPU_STAGE_TIMER_H_
#define JITPIPE_RUNTIME_GPU_STAGE_TIMER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "stages/exec/stage.h"

namespace jitpipe::gpu {

// One stage's mean device time per call kind, in microseconds; 0 for a kind
// it never ran.
struct MeasuredStageCosts {
  int stage = 0;
  double forward_us = 0;
  double backward_input_us = 0;
  double backward_weight_us = 0;
  double backward_us = 0;  // the full backward, where the program has B
};

class TimedStageFactory final : public StageFactory {
 public:
  // Borrows `inner`, which must outlive this and its stages.
  explicit TimedStageFactory(StageFactory* inner);
  ~TimedStageFactory() override;
  absl::StatusOr<std::unique_ptr<Stage>> Make(int stage, int replica) override;

  // Every stage's costs, by stage index, over every call of every replica.
  // Errors: a CUDA error reading the events. REQUIRES: the run's streams
  // have completed.
  absl::StatusOr<std::vector<MeasuredStageCosts>> Costs() const;

  // The wrapped stages' side (internal).
  struct Pair;
  void Record(Pair pair);

 private:
  StageFactory* const inner_;
  mutable absl::Mutex mu_;
  std::vector<Pair> pairs_ ABSL_GUARDED_BY(mu_);
};

struct TimedStageFactory::Pair {
  int stage = 0;
  int kind = 0;  // 0 F, 1 I, 2 W, 3 B
  void* start = nullptr;  // cudaEvent_t
  void* end = nullptr;
};

}  // namespace jitpipe::gpu

#endif  // JITPIPE_RUNTIME_GPU_STAGE_TIMER_H_
