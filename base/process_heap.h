// The heap of a short-lived process that builds a few large programs and
// exits (the CLI): freed memory stays in the process for the next program,
// and the heap is backed by transparent huge pages where the kernel allows
// them on request (THP "madvise" mode).
//
// Why: a lowered interleaved-1F1B pp 32 program is 4.7 MB of actions, and
// the CLI holds the input, one or two intermediate programs and the output
// text. With glibc's defaults each of those is a fresh mmap() that is
// unmapped when freed, so every one is paid again in page faults, which cost
// ~2.5-10 us per 4 KiB page on a virtual machine: about half of `lower`'s
// time at pp 32 (bench/README.md, "Start-up and files"). glibc offers the
// same through GLIBC_TUNABLES (glibc.malloc.hugetlb=1 and the mmap and trim
// thresholds), which must be set before the process starts.
//
// Not for a library: it changes the process's allocator policy. Does
// nothing under a sanitizer (which brings its own allocator).
#ifndef JITPIPE_BASE_PROCESS_HEAP_H_
#define JITPIPE_BASE_PROCESS_HEAP_H_

#include <cstddef>

namespace jitpipe {

// Call once, first thing in main(), before large allocations and threads.
// Keeps allocations up to 32 MiB (glibc's largest mmap threshold) on the
// main heap for every thread (one arena), never trims it, and grows it by `reserve_bytes` (<= 2 GiB) of
// address space advised for huge pages (no memory is touched: pages are
// faulted in, 2 MiB at a time where the kernel has them, as allocations
// use them). The heap below its first 2 MiB boundary, which cannot be a
// huge page, is taken out of use (held for the process's life) so that
// what is allocated next lies in the advised range. Best effort: any step
// the system refuses is skipped.
// Returns whether the allocator took the policy (false under a sanitizer
// or when glibc refused its thresholds).
bool UseLargeProgramHeap(size_t reserve_bytes);

}  // namespace jitpipe

#endif  // JITPIPE_BASE_PROCESS_HEAP_H_
