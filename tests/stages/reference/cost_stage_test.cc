#include "stages/reference/cost_stage.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"
#include "runtime/replay_plan.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::cost_stage_test {
namespace {

using ::jitpipe::testing::Message;

const ExecutionContext kHost;  // the host's, synchronous

Model TwoStageModel() {
  Model m;
  m.defaults.forward_us = 3;
  m.defaults.backward_input_us = 4;
  m.defaults.backward_weight_us = 5;
  m.defaults.input_bytes = 64;
  m.defaults.output_bytes = 64;
  m.defaults.stash_bytes = 32;
  m.defaults.param_bytes = 400;
  StageOverride second{1, {}};
  second.spec.output_bytes = 16;
  m.stages.push_back(second);
  m.dp.grad_dtype = Dtype::kBf16;
  return m;
}

absl::StatusOr<Schedule> Gpipe2() {
  absl::StatusOr<Schedule> s = Generate({"gpipe", 2, 2, 0});
  if (!s.ok()) return s.status();
  return LowerForReplay(*s);
}

TEST(CostStageTest, HasTheModelsSizes) {
  ASSERT_OK_AND_ASSIGN(Schedule s, Gpipe2());
  CostStageFactory factory(s, TwoStageModel());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Stage> stage, factory.Make(1, 0));
  const StageSizes sizes = stage->Sizes();
  EXPECT_EQ(sizes.input_bytes, 64);
  EXPECT_EQ(sizes.output_bytes, 16);
  EXPECT_EQ(sizes.stash_bytes, 32);
  EXPECT_EQ(sizes.param_grad_bytes, 200);  // 100 fp32 parameters, bf16 gradients
  EXPECT_EQ(Message(factory.Make(2, 0)), "cost: no stage 2 in a pipeline of 2 stages");
}

// A stash in segments: each is stamped by F and checked by I, W and B, so a
// plan that placed two of them over each other fails naming the segment.
TEST(CostStageTest, StampsAndChecksEveryStashSegment) {
  ASSERT_OK_AND_ASSIGN(Schedule s, Gpipe2());
  Model model = TwoStageModel();
  model.defaults.stash_bytes.reset();
  model.defaults.stash_segments = std::vector<int64_t>{16, 32};
  CostStageFactory factory(s, model);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Stage> first, factory.Make(0, 0));
  EXPECT_EQ(first->Sizes().stash_bytes, 48);
  EXPECT_EQ(first->Sizes().stash_segments, (std::vector<int64_t>{16, 32}));
  std::vector<std::byte> in(64), out(64), a(16), b(32), other(32), grad(64);
  const MutableBytes segments[] = {absl::MakeSpan(a), absl::MakeSpan(b)};
  ASSERT_OK(first->LoadInput(kHost, 0, absl::MakeSpan(in)));
  ASSERT_OK(first->Forward(kHost, 0, in, absl::MakeSpan(out), StashView(segments)));
  ASSERT_OK(first->BackwardWeight(kHost, 0, in, grad, StashView(segments), {}));
  std::vector<std::byte> in1(64);
  ASSERT_OK(first->LoadInput(kHost, 1, absl::MakeSpan(in1)));
  ASSERT_OK(first->Forward(kHost, 1, in1, absl::MakeSpan(out), absl::MakeSpan(other)));
  std::memcpy(b.data(), other.data(), other.size());  // segment 2 overwritten
  EXPECT_EQ(Message(first->BackwardWeight(kHost, 0, in, grad, StashView(segments), {})),
            "cost stage 0: microbatch 0's stash segment 2 holds stage 0 microbatch 1's forward "
            "data; expected stage 0 microbatch 0");
}

// Stamps travel with the data: stage 1 accepts what stage 0 wrote for the
// same microbatch and refuses anything else.
TEST(CostStageTest, ChecksThatEachBufferHoldsTheRightData) {
  ASSERT_OK_AND_ASSIGN(Schedule s, Gpipe2());
  Model model = TwoStageModel();
  model.stages.clear();
  model.defaults.output_bytes = 64;
  CostStageFactory factory(s, model);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Stage> first, factory.Make(0, 0));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Stage> second, factory.Make(1, 0));
  std::vector<std::byte> in(64), out(64), stash(32), stash2(32), grad(64), none;
  ASSERT_OK(first->LoadInput(kHost, 1, absl::MakeSpan(in)));
  ASSERT_OK(first->Forward(kHost, 1, in, absl::MakeSpan(out), absl::MakeSpan(stash)));
  std::vector<std::byte> out2(64);
  ASSERT_OK(second->Forward(kHost, 1, out, absl::MakeSpan(out2), absl::MakeSpan(stash2)));
  ASSERT_OK(second->Backward(kHost, 1, out, none, absl::MakeSpan(stash2), absl::MakeSpan(grad), {}));
  ASSERT_OK(first->BackwardInput(kHost, 1, grad, absl::MakeSpan(stash), {}));

  absl::Status wrong = second->Forward(kHost, 0, out, absl::MakeSpan(out2), absl::MakeSpan(stash));
  EXPECT_EQ(wrong.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(Message(wrong), "cost stage 1: microbatch 0's input holds stage 0 microbatch 1's "
                            "forward data; expected stage 0 microbatch 0");
  EXPECT_EQ(Message(first->BackwardInput(kHost, 1, out, absl::MakeSpan(stash), {})),
            "cost stage 0: microbatch 1's output_grad holds stage 0 microbatch 1's forward "
            "data; expected stage 1 microbatch 1");
  // A stash another buffer overwrote (a plan whose arena overlapped them).
  ASSERT_OK(second->Forward(kHost, 1, out, absl::MakeSpan(out2), absl::MakeSpan(stash)));
  EXPECT_EQ(Message(first->BackwardWeight(kHost, 1, in, grad, absl::MakeSpan(stash), {})),
            "cost stage 0: microbatch 1's stash holds stage 1 microbatch 1's forward data; "
            "expected stage 0 microbatch 1");
}

TEST(CostStageTest, RefusesADeviceContext) {
  ASSERT_OK_AND_ASSIGN(Schedule s, Gpipe2());
  CostStageFactory factory(s, TwoStageModel());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Stage> first, factory.Make(0, 0));
  std::vector<std::byte> in(64), out(64), stash(32);
  const ExecutionContext device{MemorySpace::kDevice, 1, nullptr};
  absl::Status refused = first->Forward(device, 0, in, absl::MakeSpan(out), absl::MakeSpan(stash));
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Message(refused),
            "the cost stage computes on the host, synchronously; this rank's "
            "buffers are in device memory");
}

// DualPipe's OVERLAP_F_B compounds share the model's overlap time in
// proportion to their parts' own times; parts outside compounds keep theirs.
TEST(CostStageTest, CompoundPartsShareTheOverlapTime) {
  ASSERT_OK_AND_ASSIGN(Schedule generated, Generate({"dualpipev", 2, 8, 0}));
  ASSERT_OK_AND_ASSIGN(Schedule s, LowerForReplay(generated));
  Model model;
  model.defaults.forward_us = 2;
  model.defaults.backward_input_us = 3;
  model.defaults.backward_weight_us = 5;
  model.defaults.overlap_f_b_us = 6;
  CostStageFactory factory(s, model);
  int compounds = 0;
  for (const RankProgram& program : s.ranks) {
    for (const Action& a : program) {
      if (!a.is_compound()) continue;
      ++compounds;
      double total = 0;
      for (const Action& p : a.sub_actions) total += factory.PartTimeUs(p.stage, p.kind, p.microbatch);
      EXPECT_NEAR(total, 6, 1e-12) << a.ToString();
      const Action& f = a.sub_actions[0];
      ASSERT_EQ(f.kind, ActionKind::kForward);
      EXPECT_NEAR(factory.PartTimeUs(f.stage, f.kind, f.microbatch), 6.0 * 2 / (2 + 8), 1e-12);
    }
  }
  EXPECT_GT(compounds, 0);
  EXPECT_EQ(factory.PartTimeUs(0, ActionKind::kForward, 0), 2);  // the first forward: alone
  EXPECT_EQ(factory.PartTimeUs(0, ActionKind::kBackwardWeight, 0), 5);
}

}  // namespace
}  // namespace jitpipe::cost_stage_test
