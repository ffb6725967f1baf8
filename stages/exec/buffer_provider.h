// Where the rank executor's buffers come from. The executor never allocates
// on its own: every buffer of the memory plan (RankExecutable::buffer_bytes,
// ids as in RankBuffers) is made live by Allocate() and dead by Release() at
// exactly the points the plan says, through one of two providers:
//
//   ArenaBuffers    one slab of the plan's arena_bytes, allocated once; a
//                   buffer is base + its planned offset. A step then runs
//                   without a single heap allocation for buffers (TFLite's
//                   ResolveAlloc, XLA's buffer assignment).
//   TrackedBuffers  one heap allocation per Allocate(), counting the live
//                   bytes and their peak: the measured peak, to compare with
//                   the plan's prediction.
//
// Both count live bytes the same way (the planned sizes), so their peaks
// agree; only TrackedBuffers' memory really comes and goes. Both hand out
// host memory and release a buffer when they are told to.
//
// A device provider differs in two ways the contract already carries: its
// memory_space() is kDevice, and it may take a sent buffer's release while
// the send is still reading it (ReleasesAfterRequests: a stream-ordered
// free), so that the executor never blocks the host on a send to reuse
// memory.
//
// Thread safety: a provider belongs to one rank and is used by its compute
// thread only; the accessors may be read after the run.
#ifndef JITPIPE_STAGES_EXEC_BUFFER_PROVIDER_H_
#define JITPIPE_STAGES_EXEC_BUFFER_PROVIDER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "comm/transport.h"
#include "stages/exec/execution_context.h"
#include "stages/exec/stage.h"

namespace jitpipe {

class BufferProvider {
 public:
  virtual ~BufferProvider() = default;

  // Makes buffer `id` live and returns its memory: exactly its planned bytes
  // (an empty span for a zero-byte buffer), valid until Release(id). The
  // contents are unspecified. Errors: FailedPrecondition when `id` is
  // already live; InvalidArgument for an id outside the plan.
  virtual absl::StatusOr<MutableBytes> Allocate(int32_t id) = 0;

  // Ends buffer `id`'s life. Releasing a buffer that is not live is a no-op.
  virtual void Release(int32_t id) = 0;

  // True when a released buffer's bytes are handed out again by a later
  // Allocate (an arena). The executor then makes sure a sent buffer's
  // transfer has completed before anything is allocated after the point the
  // plan releases it.
  virtual bool ReusesReleasedBytes() const = 0;

  // Where the memory Allocate returns lives; handed to every Stage call.
  virtual MemorySpace memory_space() const { return MemorySpace::kHost; }

  // Sets `bytes` (memory this provider handed out) to zero: memset on the
  // host; a device provider enqueues a memset on its stream.
  virtual void Zero(MutableBytes bytes);

  // Stream-ordered release. True when the provider takes a sent buffer's
  // release ahead of the send's completion: right after posting a send, the
  // executor calls ReleaseAfter(id, request) for each buffer the plan
  // releases on it, and never Release; when it later sees the request
  // complete (Test or Wait), it calls RequestCompleted(request). The
  // provider must not hand those bytes out again before the send has read
  // them: a host provider reclaims them at RequestCompleted; a device
  // provider may instead order the free after the send on its stream and
  // reuse the bytes in stream order. It counts a release when it reclaims,
  // so live and peak bytes stay what memory really holds. The executor then
  // never blocks on a send before reusing memory. Both providers here
  // return false.
  virtual bool ReleasesAfterRequests() const { return false; }
  // REQUIRES: ReleasesAfterRequests(); `id` live; `request` the send that
  // reads it.
  virtual void ReleaseAfter(int32_t /*id*/, RequestId /*request*/) {}
  virtual void RequestCompleted(RequestId /*request*/) {}

  int64_t live_bytes() const { return live_bytes_; }
  int64_t peak_bytes() const { return peak_bytes_; }
  // The allocator's own high-water mark of bytes in use since the last
  // ResetPeak (a device memory pool's), to compare with peak_bytes() and
  // the plan; -1 for providers without one (the CPU providers).
  virtual int64_t allocator_peak_bytes() const { return -1; }
  // Heap allocations made for buffers since construction (the arena's slab
  // counts as one).
  int64_t heap_allocations() const { return heap_allocations_; }
  // Resets the peak to the bytes live now (between steps); a provider with
  // an allocator of its own resets that one's too.
  virtual void ResetPeak() { peak_bytes_ = live_bytes_; }

 protected:
  explicit BufferProvider(std::vector<int64_t> buffer_bytes);

  // Bookkeeping shared by the implementations. CheckAllocate errors as
  // Allocate's.
  absl::Status CheckAllocate(int32_t id) const;
  void CountAllocate(int32_t id);
  // False when `id` was not live.
  bool CountRelease(int32_t id);
  int64_t bytes_of(int32_t id) const { return buffer_bytes_[id]; }
  size_t num_buffers() const { return buffer_bytes_.size(); }
  void CountHeapAllocation() { ++heap_allocations_; }

 private:
  const std::vector<int64_t> buffer_bytes_;
  std::vector<bool> live_;
  int64_t live_bytes_ = 0;
  int64_t peak_bytes_ = 0;
  int64_t heap_allocations_ = 0;
};

class ArenaBuffers final : public BufferProvider {
 public:
  // `offsets[id]` is buffer id's offset in a slab of `arena_bytes` bytes
  // (ArenaLayout from memory/memory_plan.h). The slab is allocated here,
  // aligned to `alignment`. REQUIRES: offsets.size() == buffer_bytes.size(),
  // every offset + bytes <= arena_bytes, alignment a power of two.
  ArenaBuffers(std::vector<int64_t> buffer_bytes, absl::Span<const int64_t> offsets,
               int64_t arena_bytes, int64_t alignment);
  ArenaBuffers(const ArenaBuffers&) = delete;
  ArenaBuffers& operator=(const ArenaBuffers&) = delete;
  ~ArenaBuffers() override;

  absl::StatusOr<MutableBytes> Allocate(int32_t id) override;
  void Release(int32_t id) override { CountRelease(id); }
  bool ReusesReleasedBytes() const override { return true; }

  // The slab, for checking that every buffer lies inside it.
  absl::Span<const std::byte> slab() const { return {slab_, static_cast<size_t>(arena_bytes_)}; }

 private:
  const std::vector<int64_t> offsets_;
  const int64_t arena_bytes_;
  const size_t alignment_;
  std::byte* slab_ = nullptr;
};

class TrackedBuffers final : public BufferProvider {
 public:
  explicit TrackedBuffers(std::vector<int64_t> buffer_bytes);
  TrackedBuffers(const TrackedBuffers&) = delete;
  TrackedBuffers& operator=(const TrackedBuffers&) = delete;

  absl::StatusOr<MutableBytes> Allocate(int32_t id) override;
  void Release(int32_t id) override;
  bool ReusesReleasedBytes() const override { return false; }

 private:
  std::vector<std::unique_ptr<std::byte[]>> memory_;  // per buffer id, null when dead
};

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_EXEC_BUFFER_PROVIDER_H_
