// UseLargeProgramHeap changes this process's allocator, so this binary holds
// nothing else. Its label, "process", makes the release build run it too:
// under a sanitizer the allocator is the sanitizer's and the call does
// nothing (which is checked there instead).
#include "base/process_heap.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>

#include "gtest/gtest.h"

namespace jitpipe::process_heap_test {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

constexpr size_t kMiB = size_t{1} << 20;

uintptr_t Break() { return reinterpret_cast<uintptr_t>(sbrk(0)); }

TEST(ProcessHeapTest, GrowsTheHeapOnceAndKeepsWhatIsFreed) {
  const uintptr_t before = Break();
  const bool taken = UseLargeProgramHeap(256 * kMiB);
  if (kSanitized) {
    EXPECT_FALSE(taken);
    GTEST_SKIP() << "a sanitizer's allocator: the policy is not applied";
  }
  ASSERT_TRUE(taken);
  const uintptr_t after = Break();
  // The heap grew by the reserve, once: address space, not memory.
  EXPECT_GE(after - before, 256 * kMiB);
  // 8 MiB, far above glibc's default mmap threshold (128 KiB), comes from
  // that heap; freed, it is kept and handed out again, not unmapped.
  void* first = std::malloc(8 * kMiB);
  ASSERT_NE(first, nullptr);
  // In the heap: below the break and within the reserve of it (an mmap()ed
  // block would lie elsewhere, near the libraries).
  const auto at = reinterpret_cast<uintptr_t>(first);
  EXPECT_LE(at + 8 * kMiB, after);
  EXPECT_LT(after - at, 256 * kMiB + 16 * kMiB);
  std::free(first);
  void* again = std::malloc(8 * kMiB);
  EXPECT_EQ(again, first);
  std::free(again);
  // Nothing was trimmed, and nothing grew further.
  EXPECT_EQ(Break(), after);
}

}  // namespace
}  // namespace jitpipe::process_heap_test
