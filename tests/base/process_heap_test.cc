// UseLargeProgramHeap changes this process's allocator, so this binary holds
// nothing else. Its label, "process", makes the release build run it too:
// under a sanitizer the allocator is the sanitizer's and the call does
// nothing (which is checked there instead).
#include "base/process_heap.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

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

// The "VmFlags:" line of the mapping holding `address` in /proc/self/smaps
// ("" if none); "hg" in it means advised for huge pages.
std::string VmFlagsOf(uintptr_t address) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= address && address < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

bool AdvisedForHugePages(uintptr_t address) {
  return VmFlagsOf(address).find(" hg") != std::string::npos;
}

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
  // It starts where the heap is advised for huge pages: the part of the
  // heap below its first 2 MiB boundary, which never can be, was taken
  // first (where the kernel refused the advice, nothing is advised).
  const bool advised = AdvisedForHugePages(after - kMiB);
  if (advised) {
    EXPECT_TRUE(AdvisedForHugePages(at)) << VmFlagsOf(at);
  }
  std::free(first);
  void* again = std::malloc(8 * kMiB);
  EXPECT_EQ(again, first);
  std::free(again);
  // Nothing was trimmed, and nothing grew further.
  EXPECT_EQ(Break(), after);
}

}  // namespace
}  // namespace jitpipe::process_heap_test
