// A Stage that does nothing but report the sizes it is given: for tests and
// benchmarks of the runtime itself (what the executor checks of a stage's
// sizes, what an action costs without compute).
#ifndef JITPIPE_TESTS_TESTING_NOOP_STAGE_H_
#define JITPIPE_TESTS_TESTING_NOOP_STAGE_H_

#include <memory>

#include "stages/exec/stage.h"

namespace jitpipe::testing {

class NoopStage final : public Stage {
 public:
  explicit NoopStage(StageSizes sizes = {}) : sizes_(sizes) {}

  StageSizes Sizes() const override { return sizes_; }
  absl::Status LoadInput(const ExecutionContext&, int, MutableBytes) override {
    return absl::OkStatus();
  }
  absl::Status Forward(const ExecutionContext&, int, ConstBytes, MutableBytes,
                       StashView) override {
    return absl::OkStatus();
  }
  absl::Status BackwardInput(const ExecutionContext&, int, ConstBytes, StashView,
                             MutableBytes) override {
    return absl::OkStatus();
  }
  absl::Status BackwardWeight(const ExecutionContext&, int, ConstBytes, ConstBytes, StashView,
                              MutableBytes) override {
    return absl::OkStatus();
  }

 private:
  const StageSizes sizes_;
};

// Makes NoopStages of `sizes` for every stage and replica.
class NoopStageFactory final : public StageFactory {
 public:
  explicit NoopStageFactory(StageSizes sizes = {}) : sizes_(sizes) {}
  absl::StatusOr<std::unique_ptr<Stage>> Make(int, int) override {
    return std::unique_ptr<Stage>(new NoopStage(sizes_));
  }

 private:
  const StageSizes sizes_;
};

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_TESTING_NOOP_STAGE_H_
