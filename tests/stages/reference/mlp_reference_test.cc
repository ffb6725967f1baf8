#include "stages/reference/mlp_reference.h"

#include <cstddef>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::mlp_reference_test {
namespace {

using ::jitpipe::testing::Message;

const MlpOptions kOptions{MlpShape{4, 2, 1}, 11};

// The reference of a one-block model is one block's forward and backward
// per microbatch, summed.
TEST(MlpReferenceTest, SumsEveryReplicaAndMicrobatch) {
  const MlpLayout layout{1, 1, 3, 2};
  const MlpReference ref = RunMlpReference(kOptions, layout);
  const MlpShape& s = kOptions.shape;
  const int64_t n = s.activation_floats();
  const std::vector<float> params = MlpInitialParams(s, 11, 0);
  std::vector<float> x(n), t(n), acts(n), dy(n), dz(n), grads(s.block_params(), 0.0f);
  double loss = 0;
  for (int k = 0; k < 2; ++k) {
    for (int m = 0; m < 3; ++m) {
      MlpFill(s, 11, MlpData::kInput, k, 0, m, x.data());
      MlpFill(s, 11, MlpData::kTarget, k, 0, m, t.data());
      MlpBlockForward(s, params.data(), x.data(), acts.data(), true);
      loss += MlpLoss(s, acts.data(), t.data(), 1.0 / 6, dy.data());
      MlpBlockBackwardInput(s, params.data(), acts.data(), dy.data(), dz.data(), nullptr, true);
      MlpBlockBackwardWeight(s, x.data(), acts.data(), dz.data(), grads.data());
    }
  }
  EXPECT_DOUBLE_EQ(ref.loss, loss);
  ASSERT_EQ(ref.block_grads.size(), 1u);
  EXPECT_EQ(ref.block_grads[0], grads);
}

MutableBytes AsBytes(std::vector<float>& v) {
  return {reinterpret_cast<std::byte*>(v.data()), v.size() * sizeof(float)};
}

// Two chains (DualPipe) of two blocks, one replica: the check sums both
// chains' copies of a block, and names the block that differs.
TEST(MlpReferenceTest, ComparesTheSumOverChainsAndNamesTheWorstBlock) {
  const MlpLayout layout{2, 2, 4, 1};
  const MlpReference ref = RunMlpReference(kOptions, layout);
  MlpStageFactory factory(kOptions, layout);
  std::vector<std::unique_ptr<Stage>> stages;
  for (int s = 0; s < 4; ++s) stages.push_back(*factory.Make(s, 0));
  // Chain 0 reports the whole gradient, chain 1 zeros: the sums are exact.
  for (int s = 0; s < 4; ++s) {
    std::vector<float> g = s < 2 ? ref.block_grads[s] : std::vector<float>(ref.block_grads[0].size());
    ASSERT_OK(stages[s]->FinishStep(ExecutionContext{}, AsBytes(g)));
  }
  ASSERT_OK_AND_ASSIGN(MlpComparison ok, CompareWithReference(ref, ref.loss, factory,
                                                              ReduceKind::kAllReduce));
  EXPECT_EQ(ok.loss_error, 0);
  EXPECT_EQ(ok.worst_grad_error, 0);
  EXPECT_TRUE(ok.Within(1e-5));

  std::vector<float> off = ref.block_grads[1];
  float largest = 0;
  for (float v : off) largest = std::max(largest, std::abs(v));
  off[3] += 0.5f * largest;
  ASSERT_OK(stages[1]->FinishStep(ExecutionContext{}, AsBytes(off)));
  ASSERT_OK_AND_ASSIGN(MlpComparison bad, CompareWithReference(ref, ref.loss * 1.01, factory,
                                                               ReduceKind::kAllReduce));
  EXPECT_NEAR(bad.loss_error, 0.01, 1e-9);
  EXPECT_NEAR(bad.worst_grad_error, 0.5, 1e-6);
  EXPECT_EQ(bad.worst_block, 1);
  EXPECT_EQ(bad.worst_replica, 0);
  EXPECT_FALSE(bad.Within(1e-5));
}

TEST(MlpReferenceTest, AStageThatNeverFinishedIsAnError) {
  const MlpLayout layout{2, 1, 2, 1};
  MlpStageFactory factory(kOptions, layout);
  absl::StatusOr<MlpComparison> c =
      CompareWithReference(RunMlpReference(kOptions, layout), 0, factory, ReduceKind::kAllReduce);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Message(c), "stage 0 of replica 0 reported no gradients");
}

}  // namespace
}  // namespace jitpipe::mlp_reference_test
