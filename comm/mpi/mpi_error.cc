#include "comm/mpi/mpi_error.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace jitpipe {
namespace {

absl::StatusCode CodeOfClass(int error_class) {
  switch (error_class) {
    case MPI_ERR_ARG:
    case MPI_ERR_COUNT:
    case MPI_ERR_TAG:
    case MPI_ERR_RANK:
    case MPI_ERR_TYPE:
    case MPI_ERR_BUFFER:
    case MPI_ERR_TRUNCATE:
    case MPI_ERR_COMM:
    case MPI_ERR_GROUP:
    case MPI_ERR_OP:
    case MPI_ERR_ROOT:
      return absl::StatusCode::kInvalidArgument;
    case MPI_ERR_NO_MEM:
      return absl::StatusCode::kResourceExhausted;
    case MPI_ERR_INTERN:
      return absl::StatusCode::kInternal;
    default:
      return absl::StatusCode::kUnavailable;
  }
}

// The path from the repository root: __FILE__ may be absolute.
absl::string_view RepoPath(absl::string_view file) {
  const size_t at = file.rfind("comm/mpi/");
  return at == absl::string_view::npos ? file : file.substr(at);
}

// The call's name without its arguments: "MPI_Isend(buf, ...)" -> "MPI_Isend".
absl::string_view CallName(absl::string_view call) { return call.substr(0, call.find('(')); }

}  // namespace

absl::Status MpiStatus(int rc, absl::string_view call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return absl::OkStatus();
  int error_class = MPI_ERR_UNKNOWN;
  if (MPI_Error_class(rc, &error_class) != MPI_SUCCESS) error_class = MPI_ERR_UNKNOWN;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  std::string described;
  if (MPI_Error_string(rc, text, &length) == MPI_SUCCESS) {
    described.assign(text, static_cast<size_t>(length));
  } else {
    described = absl::StrCat("MPI error ", rc);
  }
  return absl::Status(CodeOfClass(error_class), absl::StrCat(CallName(call), ": ", described, " (",
                                                             RepoPath(file), ":", line, ")"));
}

}  // namespace jitpipe
