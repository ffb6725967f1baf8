#include "memory/recv_pool.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/memory/lowered_text.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::recv_pool_test {
namespace {

using ::jitpipe::testing::LoweredFromText;

Model Sizes(int64_t input, int64_t output) {
  Model m;
  m.defaults.input_bytes = input;
  m.defaults.output_bytes = output;
  return m;
}

// Rank 1 of GPipe pp 3, m 2 with receives posted early: both activations
// (100 B) are live from their RECV to their backward, and both gradients
// (30 B) from their RECV to theirs:
//   0 1RECV_F0  1 1RECV_F1  2 1F0  3 1SEND_F0  4 1F1  5 1SEND_F1
//   6 1RECV_B0  7 1RECV_B1  8 1B0  9 1SEND_B0  10 1B1  11 1SEND_B1
// forward [0,8] [1,10]; backward [6,8] [7,10]; at 7..8 all four are live.
TEST(RecvPoolTest, CountsTheMostLiveAtEachGranularity) {
  const Schedule s = LoweredFromText(
      3, 1, Placement::kLoop, 2,
      {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0RECV_B1 0B0 0B1",
       "1RECV_F0 1RECV_F1 1F0 1SEND_F0 1F1 1SEND_F1 1RECV_B0 1RECV_B1 1B0 1SEND_B0 1B1 1SEND_B1",
       "2RECV_F0 2RECV_F1 2F0 2B0 2SEND_B0 2F1 2B1 2SEND_B1"});
  ASSERT_OK_AND_ASSIGN(RankBuffers b, ComputeBufferLifetimes(s, Sizes(100, 30), 1, {}));
  const RecvPools p = ComputeRecvPools(b);
  EXPECT_EQ(p.receives, 4);
  ASSERT_EQ(p.per_stage.size(), 2u);
  EXPECT_EQ(p.per_stage[0].size.slots, 2);  // stage 1 forward
  EXPECT_EQ(p.per_stage[0].size.bytes, 200);
  EXPECT_EQ(p.per_stage[1].size.slots, 2);  // stage 1 backward
  EXPECT_EQ(p.per_stage[1].size.bytes, 60);
  EXPECT_EQ(p.stage_direction.slots, 4);
  EXPECT_EQ(p.stage_direction.bytes, 260);
  EXPECT_EQ(p.direction.bytes, 260);
  // One pool for all: 4 slots of the largest buffer.
  EXPECT_EQ(p.rank_pool.slots, 4);
  EXPECT_EQ(p.rank_pool.bytes, 400);
  EXPECT_EQ(p.best_pool_bytes(), 260);
  // The arena holds each buffer at its own size: 2 x 100 + 2 x 30.
  EXPECT_EQ(p.arena_bytes, 260);
}

// A slot given back after an action serves a receive posted at the next:
// just-in-time receives on one stage need one slot per direction.
TEST(RecvPoolTest, ASlotFreedAfterAnActionServesTheNextReceive) {
  const Schedule s = LoweredFromText(
      2, 1, Placement::kLoop, 2,
      {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
       "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1"});
  ASSERT_OK_AND_ASSIGN(RankBuffers b, ComputeBufferLifetimes(s, Sizes(64, 64), 1, {}));
  const RecvPools p = ComputeRecvPools(b);
  EXPECT_EQ(p.rank_pool.slots, 1);
  EXPECT_EQ(p.arena_bytes, 64);
  ASSERT_OK_AND_ASSIGN(RankBuffers first, ComputeBufferLifetimes(s, Sizes(64, 64), 0, {}));
  EXPECT_EQ(ComputeRecvPools(first).rank_pool.slots, 1);
  EXPECT_EQ(ComputeRecvPools(first).forward.slots, 0);
}

// The receive arena is searched as the plan's arena is: to the receives'
// peak by default, or only to within `arena_slack` of it. Four received
// activations (bytes [alloc, free]): 192 [0,1], 192 [1,3], 128 [2,3],
// 128 [3,3]; the peak is 448 at 3. The start-order sweep puts the last one
// above a 64-byte gap (512 bytes); the duration order reaches the peak.
TEST(RecvPoolTest, TheArenaSearchStopsWithinTheSlack) {
  RankBuffers b;
  b.num_actions = 4;
  const int64_t bytes[] = {192, 192, 128, 128};
  const int32_t from[] = {0, 1, 2, 3};
  const int32_t until[] = {1, 3, 3, 3};
  for (int k = 0; k < 4; ++k) {
    Buffer buffer;
    buffer.kind = BufferKind::kInput;
    buffer.received = true;
    buffer.stage = 1;
    buffer.microbatch = k;
    buffer.bytes = bytes[k];
    buffer.alloc_index = from[k];
    buffer.free_index = until[k];
    b.buffers.push_back(buffer);
  }
  EXPECT_EQ(ComputeRecvPools(b).arena_bytes, 448);
  EXPECT_EQ(ComputeRecvPools(b, /*arena_slack=*/0.1).arena_bytes, 448);   // 512 > 492
  EXPECT_EQ(ComputeRecvPools(b, /*arena_slack=*/0.25).arena_bytes, 512);  // 512 <= 560
}

// The pools' slot counts are the most buffers live at one action index
// (live during [alloc, free], both included), counted here index by index
// over random received buffers: two stages, both directions, intervals that
// share ends, touch and nest.
TEST(RecvPoolTest, SlotsAreTheMostLiveAtAnyIndex) {
  std::mt19937 rng(19);
  for (int trial = 0; trial < 200; ++trial) {
    RankBuffers b;
    b.num_actions = 1 + static_cast<int>(rng() % 40);
    const int count = static_cast<int>(rng() % 30);
    for (int k = 0; k < count; ++k) {
      Buffer buffer;
      buffer.kind = rng() % 2 ? BufferKind::kInput : BufferKind::kOutputGrad;
      buffer.received = true;
      buffer.stage = static_cast<int32_t>(rng() % 2);
      buffer.microbatch = k;
      buffer.bytes = 1 + static_cast<int64_t>(rng() % 100);
      buffer.alloc_index = static_cast<int32_t>(rng() % b.num_actions);
      buffer.free_index =
          buffer.alloc_index + static_cast<int32_t>(rng() % (b.num_actions - buffer.alloc_index));
      b.buffers.push_back(buffer);
    }
    // The most live at one index among the buffers `in` accepts.
    auto most_live = [&](auto in) {
      int most = 0;
      for (int t = 0; t < b.num_actions; ++t) {
        int live = 0;
        for (const Buffer& x : b.buffers) {
          if (in(x) && x.alloc_index <= t && t <= x.free_index) ++live;
        }
        most = std::max(most, live);
      }
      return most;
    };
    auto forward = [](const Buffer& x) { return x.kind == BufferKind::kInput; };
    const RecvPools p = ComputeRecvPools(b);
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    EXPECT_EQ(p.receives, count);
    EXPECT_EQ(p.rank_pool.slots, most_live([](const Buffer&) { return true; }));
    EXPECT_EQ(p.forward.slots, most_live(forward));
    EXPECT_EQ(p.backward.slots, most_live([&](const Buffer& x) { return !forward(x); }));
    for (const StagePool& pool : p.per_stage) {
      EXPECT_EQ(pool.size.slots, most_live([&](const Buffer& x) {
        return x.stage == pool.stage &&
               (pool.direction == RecvDirection::kForward) == forward(x);
      })) << "stage " << pool.stage;
    }
    // No layout of the receive arena holds them in fewer bytes than their peak.
    int64_t peak = 0;
    for (int t = 0; t < b.num_actions; ++t) {
      int64_t live = 0;
      for (const Buffer& x : b.buffers) {
        if (x.alloc_index <= t && t <= x.free_index) live += x.bytes;
      }
      peak = std::max(peak, live);
    }
    EXPECT_GE(p.arena_bytes, peak);
  }
}

}  // namespace
}  // namespace jitpipe::recv_pool_test
