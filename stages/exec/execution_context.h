// Where a rank's buffers live and what a stage call runs on: the two facts a
// stream-ordered device adds to the CPU contracts of stage.h and
// buffer_provider.h.
//
// On the CPU path (every backend today) the context is the default one: host
// memory, no device, no stream. A stage call runs on the calling thread and
// its results are in the buffers when it returns.
//
// On a GPU the rank executor hands each call the rank's device ordinal and
// the stream the call must enqueue its work on (a cudaStream_t, carried as
// an opaque pointer so that nothing here depends on CUDA). The call may
// return before its kernels finish; whatever the executor does next with the
// call's buffers (a send, a release) is ordered after that stream, not after
// the host's return.
#ifndef JITPIPE_STAGES_EXEC_EXECUTION_CONTEXT_H_
#define JITPIPE_STAGES_EXEC_EXECUTION_CONTEXT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace jitpipe {

// Where a BufferProvider's memory is. A Stage reads and writes its buffers
// through the spans it is handed; a device span's data() is a device
// pointer, not to be dereferenced on the host.
enum class MemorySpace { kHost, kDevice };

absl::string_view MemorySpaceName(MemorySpace space);  // "host", "device"

struct ExecutionContext {
  MemorySpace memory_space = MemorySpace::kHost;  // the rank's BufferProvider's
  int device = -1;                                // the device ordinal; -1 on the host
  void* stream = nullptr;  // the stream to enqueue on; null: run synchronously
};

// For stages that compute on the host (the reference stages): OK for the
// host's synchronous context, else FailedPrecondition "<who> computes on the
// host, synchronously; this rank's buffers are in device memory[ with a
// stream]".
absl::Status RequireHost(const ExecutionContext& ctx, absl::string_view who);

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_EXEC_EXECUTION_CONTEXT_H_
