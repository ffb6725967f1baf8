#include "stages/exec/buffer_provider.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::buffer_provider_test {
namespace {

using ::jitpipe::testing::Message;

// Three buffers: 0 and 2 share bytes [0, 64) at different times, 1 sits at
// 64; buffer 3 holds nothing.
const std::vector<int64_t> kBytes = {64, 100, 48, 0};
const std::vector<int64_t> kOffsets = {0, 64, 0, 0};

TEST(ArenaBuffersTest, HandsOutThePlannedPlacesOfOneSlab) {
  ArenaBuffers arena(kBytes, kOffsets, 164, 64);
  EXPECT_EQ(arena.heap_allocations(), 1);
  ASSERT_OK_AND_ASSIGN(MutableBytes b0, arena.Allocate(0));
  ASSERT_OK_AND_ASSIGN(MutableBytes b1, arena.Allocate(1));
  EXPECT_EQ(b0.data(), arena.slab().data());
  EXPECT_EQ(b0.size(), 64u);
  EXPECT_EQ(b1.data(), arena.slab().data() + 64);
  EXPECT_EQ(b1.size(), 100u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(arena.slab().data()) % 64, 0u);
  arena.Release(0);
  ASSERT_OK_AND_ASSIGN(MutableBytes b2, arena.Allocate(2));
  EXPECT_EQ(b2.data(), b0.data());  // the bytes buffer 0 left
  ASSERT_OK_AND_ASSIGN(MutableBytes b3, arena.Allocate(3));
  EXPECT_TRUE(b3.empty());
  EXPECT_EQ(arena.live_bytes(), 148);
  EXPECT_EQ(arena.peak_bytes(), 164);
  EXPECT_EQ(arena.heap_allocations(), 1);  // still only the slab
  EXPECT_TRUE(arena.ReusesReleasedBytes());
}

TEST(ArenaBuffersTest, RefusesALiveOrUnknownBuffer) {
  ArenaBuffers arena(kBytes, kOffsets, 164, 64);
  ASSERT_OK(arena.Allocate(1));
  absl::StatusOr<MutableBytes> again = arena.Allocate(1);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Message(again), "buffer 1 is already live");
  absl::StatusOr<MutableBytes> unknown = arena.Allocate(4);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(unknown), "buffer 4 is not in the plan (4 buffers)");
  arena.Release(3);  // not live: nothing happens
  EXPECT_EQ(arena.live_bytes(), 100);
}

TEST(TrackedBuffersTest, AllocatesEachBufferAndCountsThePeak) {
  TrackedBuffers tracked(kBytes);
  EXPECT_EQ(tracked.heap_allocations(), 0);
  ASSERT_OK_AND_ASSIGN(MutableBytes b0, tracked.Allocate(0));
  ASSERT_OK_AND_ASSIGN(MutableBytes b1, tracked.Allocate(1));
  EXPECT_EQ(b0.size(), 64u);
  EXPECT_EQ(b1.size(), 100u);
  b0[63] = std::byte{7};  // the memory is really there
  tracked.Release(0);
  ASSERT_OK(tracked.Allocate(2));
  ASSERT_OK_AND_ASSIGN(MutableBytes b3, tracked.Allocate(3));
  EXPECT_TRUE(b3.empty());
  EXPECT_EQ(tracked.heap_allocations(), 3);  // none for the empty buffer
  EXPECT_EQ(tracked.live_bytes(), 148);
  EXPECT_EQ(tracked.peak_bytes(), 164);
  tracked.ResetPeak();
  EXPECT_EQ(tracked.peak_bytes(), 148);
  EXPECT_FALSE(tracked.ReusesReleasedBytes());
  EXPECT_EQ(tracked.Allocate(2).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace jitpipe::buffer_provider_test
