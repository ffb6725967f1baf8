// StashView and SplitStash (stage.h): a stage sees its stash as the segments
// it declared, whether the caller holds them apart or back to back.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "stages/exec/stage.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::stash_view_test {
namespace {

using ::jitpipe::testing::Message;

TEST(StashViewTest, CountsAndSumsItsSegments) {
  std::vector<std::byte> a(3), b(5);
  const MutableBytes parts[] = {absl::MakeSpan(a), absl::MakeSpan(b)};
  const StashView apart(parts);
  EXPECT_EQ(apart.count(), 2u);
  EXPECT_EQ(apart.bytes(), 8);
  EXPECT_EQ(apart.segment(1).data(), b.data());
  EXPECT_TRUE(apart.Single().empty());  // two segments are not one
  const StashView whole(absl::MakeSpan(a));
  EXPECT_EQ(whole.count(), 1u);
  EXPECT_EQ(whole.Single().data(), a.data());
  EXPECT_EQ(StashView().count(), 0u);
}

TEST(SplitStashTest, TakesTheSegmentsAsGivenOrSlicesOneSpan) {
  std::vector<std::byte> a(4), b(12), whole(16);
  const MutableBytes parts[] = {absl::MakeSpan(a), absl::MakeSpan(b)};
  const std::vector<int64_t> layout = {4, 12};
  ASSERT_OK_AND_ASSIGN(StashSegments apart, SplitStash(StashView(parts), layout, "stage 1"));
  ASSERT_EQ(apart.size(), 2u);
  EXPECT_EQ(apart[0].data(), a.data());
  EXPECT_EQ(apart[1].data(), b.data());
  ASSERT_OK_AND_ASSIGN(StashSegments sliced,
                       SplitStash(StashView(absl::MakeSpan(whole)), layout, "stage 1"));
  ASSERT_EQ(sliced.size(), 2u);
  EXPECT_EQ(sliced[0].data(), whole.data());
  EXPECT_EQ(sliced[1].data(), whole.data() + 4);
  EXPECT_EQ(sliced[1].size(), 12u);
}

TEST(SplitStashTest, RefusesAnyOtherLayoutNamingBoth) {
  std::vector<std::byte> a(4), b(10);
  const MutableBytes parts[] = {absl::MakeSpan(a), absl::MakeSpan(b)};
  EXPECT_EQ(Message(SplitStash(StashView(parts), {4, 12}, "transformer stage 3")),
            "transformer stage 3: the stash has 2 segments (4, 10 bytes); expected 2 segments "
            "(4, 12 bytes) or one of 16");
  EXPECT_EQ(Message(SplitStash(StashView(absl::MakeSpan(b)), {4, 12}, "transformer stage 3")),
            "transformer stage 3: the stash has 1 segment (10 bytes); expected 2 segments "
            "(4, 12 bytes) or one of 16");
}

}  // namespace
}  // namespace jitpipe::stash_view_test
