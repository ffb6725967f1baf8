#include "memory/buffer_lifetimes.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/memory/lowered_text.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::buffer_lifetimes_test {
namespace {

using ::jitpipe::testing::LoweredFromText;
using ::jitpipe::testing::Message;
using ::testing::ElementsAre;

Model Sizes(int64_t input, int64_t output, int64_t stash) {
  Model m;
  m.defaults.input_bytes = input;
  m.defaults.output_bytes = output;
  m.defaults.stash_bytes = stash;
  return m;
}

std::vector<std::string> Lines(const RankBuffers& buffers) {
  std::vector<std::string> out;
  for (const Buffer& b : buffers.buffers) out.push_back(b.ToString());
  return out;
}

const Buffer& Find(const RankBuffers& buffers, BufferKind kind, int microbatch) {
  for (const Buffer& b : buffers.buffers) {
    if (b.kind == kind && b.microbatch == microbatch) return b;
  }
  ADD_FAILURE() << "no " << BufferKindName(kind) << " for microbatch " << microbatch;
  return buffers.buffers.front();
}

// pp 2, one microbatch: rank 0 runs stage 0, rank 1 stage 1.
Schedule TwoRanks() {
  return LoweredFromText(2, 1, Placement::kLoop, 1,
                         {"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"});
}

TEST(BufferLifetimesTest, JitFirstStage) {
  // F allocs input, stash, output; SEND_F frees output once sent; RECV_B
  // allocs the output grad; B frees input, stash, grad.
  ASSERT_OK_AND_ASSIGN(RankBuffers b,
                       ComputeBufferLifetimes(TwoRanks(), Sizes(64, 128, 256), 0, {}));
  EXPECT_EQ(b.num_actions, 4);
  EXPECT_THAT(Lines(b), ElementsAre("input 0/0 64 B [0, 3]", "stash 0/0 256 B [0, 3]",
                                    "output 0/0 128 B [0, 1] after send",
                                    "output_grad 0/0 128 B [2, 3] received",
                                    "param_grad 0 0 B [3, 3] to step end"));
  // The sent output is needed only by F, the received grad only from B.
  EXPECT_EQ(b.buffers[2].needed_until, 0);
  EXPECT_EQ(b.buffers[3].needed_from, 3);
}

TEST(BufferLifetimesTest, JitLastStage) {
  // RECV_F allocs the input; F allocs stash and output and frees the output
  // (the loss is inside F); B allocs the input grad, freed once SEND_B sent it.
  ASSERT_OK_AND_ASSIGN(RankBuffers b,
                       ComputeBufferLifetimes(TwoRanks(), Sizes(64, 128, 256), 1, {}));
  EXPECT_THAT(Lines(b), ElementsAre("input 1/0 64 B [0, 2] received", "stash 1/0 256 B [1, 2]",
                                    "output 1/0 128 B [1, 1]",
                                    "input_grad 1/0 64 B [2, 3] after send",
                                    "param_grad 1 0 B [2, 3] to step end"));
  EXPECT_EQ(b.buffers[0].needed_from, 1);
}

// A stash in segments is one buffer per segment, consecutive, in segment
// order, each live from F to the last backward like a whole stash.
TEST(BufferLifetimesTest, AStashInSegmentsIsABufferPerSegment) {
  Model m = Sizes(64, 128, 0);
  m.defaults.stash_bytes.reset();
  m.defaults.stash_segments = std::vector<int64_t>{100, 0, 156};
  ASSERT_OK_AND_ASSIGN(RankBuffers b, ComputeBufferLifetimes(TwoRanks(), m, 0, {}));
  EXPECT_THAT(Lines(b), ElementsAre("input 0/0 64 B [0, 3]",
                                    "stash 0/0 segment 1 of 3 100 B [0, 3]",
                                    "stash 0/0 segment 2 of 3 0 B [0, 3]",
                                    "stash 0/0 segment 3 of 3 156 B [0, 3]",
                                    "output 0/0 128 B [0, 1] after send",
                                    "output_grad 0/0 128 B [2, 3] received",
                                    "param_grad 0 0 B [3, 3] to step end"));
  EXPECT_EQ(b.buffers[3].segment, 2);
  EXPECT_EQ(b.buffers[3].segments, 3);
}

// PyTorch main's WAIT_SEND: a sent buffer lives until the WAIT of its send
// (released after it, the transfer then complete), not only until the send
// completes; eager still holds it to the step end. A reduce buffer lives
// until its WAIT_REDUCE_GRAD.
TEST(BufferLifetimesTest, ASentBufferLivesUntilItsWaitSend) {
  const Schedule s = LoweredFromText(
      2, 1, Placement::kLoop, 1,
      {"0F0 0SEND_F0 0RECV_B0 0B0 0WAIT_SEND_F0 0REDUCE_GRAD 0WAIT_REDUCE_GRAD",
       "1RECV_F0 1F0 1B0 1SEND_B0 1WAIT_SEND_B0"});
  Model m = Sizes(64, 128, 256);
  m.defaults.param_bytes = 8;
  m.dp.grad_dtype = Dtype::kFp32;
  m.dp.reduce_dtype = Dtype::kBf16;
  ASSERT_OK_AND_ASSIGN(RankBuffers first, ComputeBufferLifetimes(s, m, 0, {}));
  EXPECT_THAT(Lines(first), ElementsAre("input 0/0 64 B [0, 3]", "stash 0/0 256 B [0, 3]",
                                        "output 0/0 128 B [0, 4]",
                                        "output_grad 0/0 128 B [2, 3] received",
                                        "param_grad 0 8 B [3, 6] to step end",
                                        "reduce 0 4 B [5, 6]"));
  EXPECT_EQ(first.buffers[2].needed_until, 0);  // the liveness bound is the same
  ASSERT_OK_AND_ASSIGN(RankBuffers last, ComputeBufferLifetimes(s, m, 1, {}));
  EXPECT_EQ(Find(last, BufferKind::kInputGrad, 0).ToString(), "input_grad 1/0 64 B [2, 4]");
  const LifetimeOptions eager{.policy = MemoryPolicy::kEager};
  ASSERT_OK_AND_ASSIGN(RankBuffers held, ComputeBufferLifetimes(s, m, 0, eager));
  EXPECT_EQ(Find(held, BufferKind::kOutput, 0).ToString(), "output 0/0 128 B [0, 6] to step end");
}

TEST(BufferLifetimesTest, EagerHoldsReceivesAndSendsForTheWholeStep) {
  const LifetimeOptions eager{.policy = MemoryPolicy::kEager};
  ASSERT_OK_AND_ASSIGN(RankBuffers first,
                       ComputeBufferLifetimes(TwoRanks(), Sizes(64, 128, 256), 0, eager));
  EXPECT_THAT(Lines(first),
              ElementsAre("input 0/0 64 B [0, 3]", "stash 0/0 256 B [0, 3]",
                          "output 0/0 128 B [0, 3] to step end",
                          "output_grad 0/0 128 B [0, 3] received from step start to step end",
                          "param_grad 0 0 B [3, 3] to step end"));
  ASSERT_OK_AND_ASSIGN(RankBuffers last,
                       ComputeBufferLifetimes(TwoRanks(), Sizes(64, 128, 256), 1, eager));
  EXPECT_THAT(Lines(last), ElementsAre("input 1/0 64 B [0, 3] received from step start to step end",
                                       "stash 1/0 256 B [1, 2]", "output 1/0 128 B [1, 1]",
                                       "input_grad 1/0 64 B [2, 3] to step end",
                                       "param_grad 1 0 B [2, 3] to step end"));
}

TEST(BufferLifetimesTest, TheVTurnHandsBuffersOverWithoutCopies) {
  // Rank 1 of a V holds stages 1 and 2. Output 1/0 is the input of stage 2
  // (F(1) .. B(2)); input_grad 2/0 is the output grad of stage 1 (B(2) .. B(1)).
  Schedule s = LoweredFromText(
      2, 2, Placement::kV, 1,
      {"0F0 0SEND_F0 3RECV_F0 3F0 3B0 3SEND_B0 0RECV_B0 0B0",
       "1RECV_F0 1F0 2F0 2SEND_F0 2RECV_B0 2B0 1B0 1SEND_B0"});
  ASSERT_OK_AND_ASSIGN(RankBuffers b, ComputeBufferLifetimes(s, Sizes(64, 128, 256), 1, {}));
  EXPECT_THAT(Lines(b),
              ElementsAre("input 1/0 64 B [0, 6] received", "stash 1/0 256 B [1, 6]",
                          "output 1/0 128 B [1, 5], input of stage 2", "stash 2/0 256 B [2, 5]",
                          "output 2/0 128 B [2, 3] after send",
                          "output_grad 2/0 128 B [4, 5] received",
                          "input_grad 2/0 128 B [5, 6], output_grad of stage 1",
                          "param_grad 2 0 B [5, 7] to step end",
                          "input_grad 1/0 64 B [6, 7] after send",
                          "param_grad 1 0 B [6, 7] to step end"));
}

TEST(BufferLifetimesTest, OverlapAllocatesBothHalvesBeforeAndFreesBothAfter) {
  // One rank, one stage (first and last): (0F1;0B0) allocs mb 1's buffers
  // and frees mb 0's, all at index 1.
  Schedule s = LoweredFromText(1, 1, Placement::kLoop, 2, {"0F0 (0F1;0B0)OVERLAP_F_B 0B1"});
  ASSERT_OK_AND_ASSIGN(RankBuffers b, ComputeBufferLifetimes(s, Sizes(64, 128, 256), 0, {}));
  EXPECT_THAT(Lines(b), ElementsAre("input 0/0 64 B [0, 1]", "stash 0/0 256 B [0, 1]",
                                    "output 0/0 128 B [0, 0]", "input 0/1 64 B [1, 2]",
                                    "stash 0/1 256 B [1, 2]", "output 0/1 128 B [1, 1]",
                                    "param_grad 0 0 B [1, 2] to step end"));
}

TEST(BufferLifetimesTest, GradientsReductionAndUnshardedParameters) {
  // UNSHARD..RESHARD holds the full parameters; B allocs the gradients (bf16:
  // 16 elements x 2 B); REDUCE_GRAD allocs an fp32 reduction buffer.
  Model model = Sizes(0, 0, 0);
  model.defaults.param_bytes = 64;
  model.dp.grad_dtype = Dtype::kBf16;
  model.dp.reduce_dtype = Dtype::kFp32;
  Schedule s = LoweredFromText(1, 1, Placement::kLoop, 1,
                               {"0UNSHARD 0F0 0B0 0REDUCE_GRAD 0RESHARD"});
  ASSERT_OK_AND_ASSIGN(RankBuffers b, ComputeBufferLifetimes(s, model, 0, {}));
  EXPECT_THAT(Lines(b), ElementsAre("params 0 64 B [0, 4]", "input 0/0 0 B [1, 2]",
                                    "stash 0/0 0 B [1, 2]", "output 0/0 0 B [1, 1]",
                                    "param_grad 0 32 B [2, 4] to step end",
                                    "reduce 0 64 B [3, 4] to step end"));
  // Reducing in the gradient dtype needs no buffer of its own; without a
  // RESHARD the parameters stay to step end.
  model.dp.reduce_dtype.reset();
  s = LoweredFromText(1, 1, Placement::kLoop, 1, {"0UNSHARD 0F0 0B0 0REDUCE_GRAD"});
  ASSERT_OK_AND_ASSIGN(b, ComputeBufferLifetimes(s, model, 0, {}));
  EXPECT_EQ(b.buffers.size(), 5u);
  EXPECT_EQ(b.buffers[0].ToString(), "params 0 64 B [0, 3] to step end");
}

TEST(BufferLifetimesTest, PrefetchAllocatesReceivesComputeActionsEarly) {
  Schedule s = LoweredFromText(
      2, 1, Placement::kLoop, 2,
      {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
       "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1"});
  const Model model = Sizes(64, 128, 256);
  // Input 1/1 is consumed by 1F1 (index 5); the compute actions before it
  // are 1F0 (1) and 1B0 (2). Input 1/0 has none before it: index 0.
  for (auto [prefetch, alloc] : {std::pair{0, 4}, {1, 2}, {2, 1}, {3, 0}}) {
    ASSERT_OK_AND_ASSIGN(RankBuffers b,
                         ComputeBufferLifetimes(s, model, 1, {.prefetch = prefetch}));
    EXPECT_EQ(b.buffers[0].ToString(), "input 1/0 64 B [0, 2] received");
    const Buffer& input = Find(b, BufferKind::kInput, 1);
    EXPECT_EQ(input.alloc_index, alloc) << "prefetch " << prefetch;
    EXPECT_EQ(input.needed_from, 5);
  }
  // Output grad 0/1: RECV_B at 6, consumer 0B1 at 7; computes before: 0, 2, 5.
  ASSERT_OK_AND_ASSIGN(RankBuffers b, ComputeBufferLifetimes(s, model, 0, {.prefetch = 1}));
  EXPECT_EQ(Find(b, BufferKind::kOutputGrad, 1).ToString(),
            "output_grad 0/1 128 B [5, 7] received");
}

TEST(BufferLifetimesTest, RefusesComputeOnlyPrograms) {
  Schedule s = TwoRanks();
  s.lowered = false;
  absl::StatusOr<RankBuffers> b = ComputeBufferLifetimes(s, Model{}, 0, {});
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Message(b), "plan needs a lowered program; run jitpipe lower first");
}

TEST(BufferLifetimesTest, RefusesModelOverridesBeyondTheSchedule) {
  Model model;
  model.stages.push_back({.index = 2, .spec = {}});
  EXPECT_EQ(Message(ComputeBufferLifetimes(TwoRanks(), model, 0, {})),
            R"("stages[0].index" is 2 but the schedule has 2 stages (0 to 1))");
}

struct BadProgram {
  int rank;
  const char* rank0;
  const char* rank1;
  const char* message;
};

class BufferLifetimesErrorTest : public ::testing::TestWithParam<BadProgram> {};

TEST_P(BufferLifetimesErrorTest, NamesRankIndexAndAction) {
  const BadProgram& p = GetParam();
  Schedule s = LoweredFromText(2, 1, Placement::kLoop, 2, {p.rank0, p.rank1});
  absl::StatusOr<RankBuffers> b = ComputeBufferLifetimes(s, Model{}, p.rank, {});
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(b), p.message);
}

INSTANTIATE_TEST_SUITE_P(
    Table, BufferLifetimesErrorTest,
    ::testing::Values(
        BadProgram{0, "1F0", "", "rank 0, index 0 (1F0): stage 1 lives on rank 1, not on this rank"},
        BadProgram{0, "5F0", "",
                   "rank 0, index 0 (5F0): stage 5 does not exist; the schedule has 2 stages"},
        BadProgram{0, "0F3", "",
                   "rank 0, index 0 (0F3): microbatch 3 is out of range; each stage runs 2 "
                   "microbatches (0..1)"},
        BadProgram{0, "0F0 0F0", "", "rank 0, index 1 (0F0): a second forward of stage 0 microbatch 0; the first "
                   "is at index 0"},
        BadProgram{0, "0RECV_F0 0F0", "",
                   "rank 0, index 0 (0RECV_F0): stage 0 has no previous stage on another rank "
                   "to receive from"},
        BadProgram{1, "", "1RECV_F0 1F0 1SEND_F0",
                   "rank 1, index 2 (1SEND_F0): stage 1 has no next stage on another rank to "
                   "send to"},
        BadProgram{1, "", "1F0 1B0 1SEND_B0",
                   "rank 1, index 0 (1F0): no RECV_F of stage 1 microbatch 0 before it"},
        BadProgram{1, "", "1F0 1RECV_F0 1B0 1SEND_B0",
                   "rank 1, index 0 (1F0): no RECV_F of stage 1 microbatch 0 before it"},
        BadProgram{0, "0F0 0RECV_B0 0B0", "",
                   "rank 0, index 0 (0F0): the output of stage 0 microbatch 0 is never sent "
                   "(no SEND_F)"},
        BadProgram{0, "0SEND_F0 0F0 0RECV_B0 0B0", "",
                   "rank 0, index 0 (0SEND_F0): no F of stage 0 microbatch 0 before it"},
        BadProgram{1, "", "1RECV_F0 1B0 1SEND_B0",
                   "rank 1, index 1 (1B0): no F of stage 1 microbatch 0 before it"},
        BadProgram{1, "", "1RECV_F0",
                   "rank 1, index 0 (1RECV_F0): no F of stage 1 microbatch 0 after it"},
        BadProgram{0, "0F0 0SEND_F0 0B0", "",
                   "rank 0, index 2 (0B0): no RECV_B of stage 0 microbatch 0 before it"},
        BadProgram{0, "0F0 0SEND_F0 0RECV_B0", "",
                   "rank 0, index 2 (0RECV_B0): no I or B of stage 0 microbatch 0 after it"},
        BadProgram{1, "", "1RECV_F0 1F0 1B0",
                   "rank 1, index 2 (1B0): the input gradient of stage 1 microbatch 0 is never "
                   "sent (no SEND_B)"},
        BadProgram{1, "", "1RECV_F0 1F0 1SEND_B0 1B0",
                   "rank 1, index 2 (1SEND_B0): no I or B of stage 1 microbatch 0 before it"},
        BadProgram{0, "0UNSHARD 0UNSHARD", "",
                   "rank 0, index 1 (0UNSHARD): stage 0 is already unsharded (UNSHARD at index 0, "
                   "no RESHARD since)"},
        BadProgram{0, "0RESHARD", "", "rank 0, index 0 (0RESHARD): stage 0 is not unsharded (no UNSHARD before it)"},
        BadProgram{0, "0REDUCE_GRAD 0REDUCE_GRAD", "",
                   "rank 0, index 1 (0REDUCE_GRAD): a second gradient reduction of stage 0; the "
                   "first is at index 0"}));

TEST(BufferLifetimesTest, PolicyNames) {
  EXPECT_EQ(MemoryPolicyName(MemoryPolicy::kJit), "jit");
  ASSERT_OK_AND_ASSIGN(MemoryPolicy eager, ParseMemoryPolicy("eager"));
  EXPECT_EQ(eager, MemoryPolicy::kEager);
  EXPECT_EQ(Message(ParseMemoryPolicy("lazy")),
            R"(unknown memory policy "lazy"; expected jit or eager)");
}

}  // namespace
}  // namespace jitpipe::buffer_lifetimes_test
