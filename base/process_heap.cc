#include "base/process_heap.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

namespace jitpipe {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

// The heap below its first 2 MiB boundary, held for the process's life (a
// volatile pointer: the compiler may elide a malloc() whose result is
// never read).
void* volatile unusable_heap_head = nullptr;

}  // namespace

bool UseLargeProgramHeap(size_t reserve_bytes) {
  if (kSanitized) return false;
  // Allocations up to glibc's largest mmap threshold (32 MiB) from the heap,
  // freed memory kept in it, and the heap grown by `reserve_bytes` at once.
  if (mallopt(M_MMAP_THRESHOLD, 32 << 20) == 0) return false;
  mallopt(M_TRIM_THRESHOLD, INT32_MAX);
  // One arena for every thread: a thread's own arena is a set of 64 MiB
  // mmap()ed heaps outside the advised range, and memory a planning thread
  // frees there came back as fresh pages to zero (`plan` at pp 128 with
  // ranks planned on two threads: 1.8 s of CPU, 0.96 s with one arena).
  mallopt(M_ARENA_MAX, 1);
  if (reserve_bytes == 0 || reserve_bytes > INT32_MAX) return true;
  mallopt(M_TOP_PAD, static_cast<int>(reserve_bytes));
  // More than the heap's first 132 KiB hold: the heap grows here, by the
  // pad. Then the grown range (address space only: nothing is touched) is
  // advised for huge pages.
  void* probe = std::malloc(size_t{1} << 20);
  if (probe == nullptr) return true;
  const auto at = reinterpret_cast<uintptr_t>(probe);
  const auto top = reinterpret_cast<uintptr_t>(sbrk(0));
  const auto start = (at + kHugePage - 1) & ~(kHugePage - 1);
  const auto end = top & ~(kHugePage - 1);
  // Only a heap that grew where the break is (glibc falls back to mmap()
  // when it cannot move the break; then the break says nothing of it).
  const bool grew_here = at < top && top - at <= reserve_bytes + (size_t{2} << 20);
  if (!grew_here || end <= start) {
    std::free(probe);
    return true;
  }
  madvise(reinterpret_cast<void*>(start), end - start, MADV_HUGEPAGE);  // best effort
  // The heap below the first 2 MiB boundary (0 to 2 MiB, by where the heap
  // began) can never be a huge page; the first megabytes allocated would
  // land there, in 4 KiB pages (a schedule file read into it cost 169
  // faults at pp 32). The probe's chunk is freed back to the top of the
  // heap and taken again up to the boundary, and kept for the process's
  // life: address space only (one page of it is touched), so that what is
  // allocated next starts in the advised range.
  std::free(probe);
  unusable_heap_head = std::malloc(start - at);
  return true;
}

}  // namespace jitpipe
