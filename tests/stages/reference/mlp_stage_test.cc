// The reference mlp: its kernels against finite differences, and the stage's
// contract (sizes, split backward = full backward, loss, errors).
#include "stages/reference/mlp_stage.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "stages/reference/mlp_kernels.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::mlp_stage_test {
namespace {

using ::jitpipe::testing::Message;

constexpr MlpShape kShape{4, 3, 2};
const ExecutionContext kHost;  // the host's, synchronous

// The loss of one block with a linear head on the microbatch (x, t).
double BlockLoss(const std::vector<float>& params, const std::vector<float>& x,
                 const std::vector<float>& t) {
  std::vector<float> acts(kShape.layers * kShape.activation_floats());
  MlpBlockForward(kShape, params.data(), x.data(), acts.data(), /*linear_head=*/true);
  return MlpLoss(kShape, acts.data() + (kShape.layers - 1) * kShape.activation_floats(), t.data(),
                 1.0, nullptr);
}

// Analytic gradients (I then W) against central differences, for every
// parameter and every input element.
TEST(MlpKernelsTest, GradientsMatchFiniteDifferences) {
  std::vector<float> params = MlpInitialParams(kShape, 3, 0);
  std::vector<float> x(kShape.activation_floats()), t(kShape.activation_floats());
  MlpFill(kShape, 3, MlpData::kInput, 0, 0, 0, x.data());
  MlpFill(kShape, 3, MlpData::kTarget, 0, 0, 0, t.data());
  const int64_t n = kShape.activation_floats();
  std::vector<float> acts(kShape.layers * n), dz(kShape.layers * n), dy(n), dx(n);
  std::vector<float> grads(kShape.block_params(), 0.0f);
  MlpBlockForward(kShape, params.data(), x.data(), acts.data(), true);
  MlpLoss(kShape, acts.data() + (kShape.layers - 1) * n, t.data(), 1.0, dy.data());
  MlpBlockBackwardInput(kShape, params.data(), acts.data(), dy.data(), dz.data(), dx.data(), true);
  MlpBlockBackwardWeight(kShape, x.data(), acts.data(), dz.data(), grads.data());

  const float eps = 1e-2f;
  auto numeric = [&](std::vector<float>& v, size_t k) {
    const float saved = v[k];
    v[k] = saved + eps;
    const double up = BlockLoss(params, x, t);
    v[k] = saved - eps;
    const double down = BlockLoss(params, x, t);
    v[k] = saved;
    return (up - down) / (2 * eps);
  };
  for (size_t k = 0; k < params.size(); ++k) {
    EXPECT_NEAR(grads[k], numeric(params, k), 2e-3) << "parameter " << k;
  }
  for (size_t k = 0; k < x.size(); ++k) EXPECT_NEAR(dx[k], numeric(x, k), 2e-3) << "input " << k;
}

TEST(MlpKernelsTest, DataIsAPureFunctionOfItsCoordinates) {
  EXPECT_EQ(MlpUniform(1, MlpData::kInput, 2, 3, 4, 5), MlpUniform(1, MlpData::kInput, 2, 3, 4, 5));
  EXPECT_NE(MlpUniform(1, MlpData::kInput, 2, 3, 4, 5), MlpUniform(1, MlpData::kInput, 2, 3, 5, 5));
  EXPECT_NE(MlpUniform(1, MlpData::kInput, 2, 3, 4, 5), MlpUniform(1, MlpData::kTarget, 2, 3, 4, 5));
  for (int k = 0; k < 1000; ++k) {
    const float v = MlpUniform(9, MlpData::kWeight, 0, 0, 0, k);
    EXPECT_GE(v, -1.0f);
    EXPECT_LT(v, 1.0f);
  }
  EXPECT_EQ(MlpInitialParams(kShape, 1, 2), MlpInitialParams(kShape, 1, 2));
  EXPECT_NE(MlpInitialParams(kShape, 1, 2), MlpInitialParams(kShape, 1, 3));
}

// Two blocks, one chain, 2 microbatches, 2 replicas.
const MlpLayout kLayout{2, 1, 2, 2};

TEST(MlpStageTest, ReportsItsSizes) {
  MlpStage stage({kShape, 1}, kLayout, 0, 0, nullptr);
  const StageSizes sizes = stage.Sizes();
  EXPECT_EQ(sizes.input_bytes, 3 * 4 * 4);
  EXPECT_EQ(sizes.output_bytes, 3 * 4 * 4);
  EXPECT_EQ(sizes.stash_bytes, 2 * 2 * 3 * 4 * 4);
  EXPECT_EQ(sizes.param_grad_bytes, 2 * (16 + 4) * 4);
}

MutableBytes AsBytes(std::vector<float>& v) {
  return {reinterpret_cast<std::byte*>(v.data()), v.size() * sizeof(float)};
}

// On the last stage: I then W gives bit for bit what B gives; the loss
// carries 1 / (microbatches x dp).
TEST(MlpStageTest, SplitBackwardEqualsFullBackward) {
  std::vector<float> finished;
  MlpStage last({kShape, 1}, kLayout, 1, 1, &finished);
  const int64_t n = kShape.activation_floats();
  std::vector<float> input(n), output(n), stash(2 * kShape.layers * n);
  MlpFill(kShape, 5, MlpData::kInput, 0, 0, 0, input.data());
  ASSERT_OK(last.Forward(kHost, 1, AsBytes(input), AsBytes(output), AsBytes(stash)));
  std::vector<float> stash2 = stash, grad_in(n), grad_in2(n);
  std::vector<float> pg(kShape.block_params(), 0.0f), pg2(kShape.block_params(), 0.0f);
  ASSERT_OK(last.BackwardInput(kHost, 1, {}, AsBytes(stash), AsBytes(grad_in)));
  ASSERT_OK(last.BackwardWeight(kHost, 1, AsBytes(input), {}, AsBytes(stash), AsBytes(pg)));
  ASSERT_OK(last.Backward(kHost, 1, AsBytes(input), {}, AsBytes(stash2), AsBytes(grad_in2),
                          AsBytes(pg2)));
  EXPECT_EQ(grad_in, grad_in2);
  EXPECT_EQ(pg, pg2);
  std::vector<float> target(n);
  MlpFill(kShape, 1, MlpData::kTarget, 1, 0, 1, target.data());
  double mse = 0;
  for (int64_t k = 0; k < n; ++k) {
    const double d = output[k] - target[k];
    mse += d * d;
  }
  EXPECT_NEAR(last.Loss(1), mse / n / (2 * 2), 1e-12);
  EXPECT_EQ(last.Loss(0), 0.0);  // not run yet
  ASSERT_OK(last.FinishStep(kHost, AsBytes(pg)));
  EXPECT_EQ(finished, pg);
}

TEST(MlpStageTest, RefusesBuffersOfTheWrongSize) {
  MlpStage first({kShape, 1}, kLayout, 0, 0, nullptr);
  std::vector<float> small(3), output(12), stash(48);
  absl::Status s = first.Forward(kHost, 0, AsBytes(small), AsBytes(output), AsBytes(stash));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(s), "mlp stage 0: the input buffer has 12 bytes; expected 48");
  EXPECT_EQ(Message(first.LoadInput(kHost, 2, AsBytes(output))),
            "mlp stage 0: microbatch 2 is outside 0..1");
  // The first stage produces no input gradient: a buffer there is an error.
  EXPECT_EQ(
      Message(first.BackwardInput(kHost, 0, AsBytes(output), AsBytes(stash), AsBytes(output))),
      "mlp stage 0: the input_grad buffer has 48 bytes; expected 0");
}

// The reference computes on the host: handed device memory or a stream, every
// call refuses before touching a byte.
TEST(MlpStageTest, RefusesADeviceContext) {
  MlpStage first({kShape, 1}, kLayout, 0, 0, nullptr);
  const int64_t n = kShape.activation_floats();
  std::vector<float> input(n), output(n), stash(2 * kShape.layers * n);
  const ExecutionContext device{MemorySpace::kDevice, 0, nullptr};
  absl::Status s = first.Forward(device, 0, AsBytes(input), AsBytes(output), AsBytes(stash));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Message(s),
            "mlp stage 0 computes on the host, synchronously; this rank's buffers "
            "are in device memory");
  int stream = 0;
  const ExecutionContext with_stream{MemorySpace::kHost, -1, &stream};
  EXPECT_EQ(Message(first.LoadInput(with_stream, 0, AsBytes(input))),
            "mlp stage 0 computes on the host, synchronously; this rank's buffers are in host "
            "memory with a stream");
  EXPECT_EQ(first.FinishStep(device, {}).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(MlpStageFactoryTest, MakesEveryStageOfEveryReplica) {
  MlpStageFactory factory({kShape, 1}, kLayout);
  EXPECT_OK(factory.Make(1, 1));
  EXPECT_EQ(Message(factory.Make(2, 0)),
            "mlp: no stage 2 of replica 0 in a pipeline of 2 stages x dp 2");
  EXPECT_TRUE(factory.FinishedGrads(1, 1).empty());
}

}  // namespace
}  // namespace jitpipe::mlp_stage_test
