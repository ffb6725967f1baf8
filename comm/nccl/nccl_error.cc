#include "comm/nccl/nccl_error.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "comm/cuda/cuda_error.h"

namespace jitpipe {

absl::StatusCode NcclErrorCode(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return absl::StatusCode::kOk;
    case ncclInvalidArgument:
      return absl::StatusCode::kInvalidArgument;
    case ncclInvalidUsage:
      return absl::StatusCode::kFailedPrecondition;
    case ncclInternalError:
      return absl::StatusCode::kInternal;
    default:  // unhandled CUDA error, system error, remote error, in progress
      return absl::StatusCode::kUnavailable;
  }
}

absl::Status NcclStatus(ncclResult_t result, ncclComm_t comm, absl::string_view call,
                        const char* file, int line) {
  if (result == ncclSuccess) return absl::OkStatus();
  const absl::string_view name = call.substr(0, call.find('('));
  std::string message = absl::StrCat(name, ": ", ncclGetErrorString(result));
  if (const char* last = ncclGetLastError(comm); last != nullptr && last[0] != '\0') {
    absl::StrAppend(&message, ": ", last);
  }
  absl::StrAppend(&message, " (", RepoRelativePath(file), ":", line, ")");
  return absl::Status(NcclErrorCode(result), message);
}

}  // namespace jitpipe
