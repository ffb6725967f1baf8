#include "stages/exec/execution_context.h"

#include "absl/strings/str_cat.h"

namespace jitpipe {

absl::string_view MemorySpaceName(MemorySpace space) {
  return space == MemorySpace::kDevice ? "device" : "host";
}

absl::Status RequireHost(const ExecutionContext& ctx, absl::string_view who) {
  if (ctx.memory_space == MemorySpace::kHost && ctx.stream == nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      who, " computes on the host, synchronously; this rank's buffers are in ",
      MemorySpaceName(ctx.memory_space), " memory", ctx.stream != nullptr ? " with a stream" : ""));
}

}  // namespace jitpipe
