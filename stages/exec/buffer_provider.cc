#include "stages/exec/buffer_provider.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"

namespace jitpipe {

BufferProvider::BufferProvider(std::vector<int64_t> buffer_bytes)
    : buffer_bytes_(std::move(buffer_bytes)), live_(buffer_bytes_.size(), false) {}

absl::Status BufferProvider::CheckAllocate(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= buffer_bytes_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("buffer ", id, " is not in the plan (", buffer_bytes_.size(), " buffers)"));
  }
  if (live_[id]) {
    return absl::FailedPreconditionError(absl::StrCat("buffer ", id, " is already live"));
  }
  return absl::OkStatus();
}

void BufferProvider::CountAllocate(int32_t id) {
  live_[id] = true;
  live_bytes_ += buffer_bytes_[id];
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
}

void BufferProvider::Zero(MutableBytes bytes) {
  if (!bytes.empty()) std::memset(bytes.data(), 0, bytes.size());
}

bool BufferProvider::CountRelease(int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= live_.size() || !live_[id]) return false;
  live_[id] = false;
  live_bytes_ -= buffer_bytes_[id];
  return true;
}

ArenaBuffers::ArenaBuffers(std::vector<int64_t> buffer_bytes, absl::Span<const int64_t> offsets,
                           int64_t arena_bytes, int64_t alignment)
    : BufferProvider(std::move(buffer_bytes)),
      offsets_(offsets.begin(), offsets.end()),
      arena_bytes_(arena_bytes),
      alignment_(static_cast<size_t>(std::max<int64_t>(alignment, alignof(std::max_align_t)))) {
  if (arena_bytes_ > 0) {
    // A slab the machine cannot give is reported by the first Allocate.
    slab_ = static_cast<std::byte*>(::operator new(static_cast<size_t>(arena_bytes_),
                                                  std::align_val_t(alignment_), std::nothrow));
    if (slab_ != nullptr) CountHeapAllocation();
  }
}

ArenaBuffers::~ArenaBuffers() {
  if (slab_ != nullptr) ::operator delete(slab_, std::align_val_t(alignment_), std::nothrow);
}

absl::StatusOr<MutableBytes> ArenaBuffers::Allocate(int32_t id) {
  if (absl::Status s = CheckAllocate(id); !s.ok()) return s;
  if (slab_ == nullptr && arena_bytes_ > 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "buffer ", id, ": the arena of ", arena_bytes_, " bytes could not be allocated"));
  }
  CountAllocate(id);
  const int64_t bytes = bytes_of(id);
  if (bytes == 0) return MutableBytes();
  return MutableBytes(slab_ + offsets_[id], static_cast<size_t>(bytes));
}

TrackedBuffers::TrackedBuffers(std::vector<int64_t> buffer_bytes)
    : BufferProvider(std::move(buffer_bytes)), memory_(num_buffers()) {}

absl::StatusOr<MutableBytes> TrackedBuffers::Allocate(int32_t id) {
  if (absl::Status s = CheckAllocate(id); !s.ok()) return s;
  const int64_t bytes = bytes_of(id);
  if (bytes == 0) {
    CountAllocate(id);
    return MutableBytes();
  }
  memory_[id].reset(new (std::nothrow) std::byte[static_cast<size_t>(bytes)]);
  if (memory_[id] == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("buffer ", id, ": ", bytes, " bytes could not be allocated"));
  }
  CountAllocate(id);
  CountHeapAllocation();
  return MutableBytes(memory_[id].get(), static_cast<size_t>(bytes));
}

void TrackedBuffers::Release(int32_t id) {
  if (CountRelease(id)) memory_[id].reset();
}

}  // namespace jitpipe
