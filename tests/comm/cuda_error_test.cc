// The CUDA and NCCL error conversions (comm/cuda/cuda_error.h,
// comm/nccl/nccl_error.h): one Status per foreign error, with the call, the
// library's own words and where it happened. No device needed: the error
// strings are the libraries' host-side tables.
#include "comm/cuda/cuda_error.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#if JITPIPE_HAVE_NCCL
#include "comm/nccl/nccl_error.h"
#endif

namespace jitpipe::cuda_error_test {
namespace {

using ::jitpipe::testing::Message;
using ::testing::MatchesRegex;

TEST(CudaErrorTest, NamesTheCallTheErrorAndTheLine) {
  EXPECT_OK(CUDA_STATUS(cudaSuccess));
  const int line = __LINE__ + 1;
  const absl::Status s = CudaStatus(cudaErrorMemoryAllocation, "cudaMallocAsync(&p, n, stream)",
                                    "/work/x/comm/cuda/cuda_world.cc", line);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Message(s), absl::StrCat("cudaMallocAsync: cudaErrorMemoryAllocation: out of memory "
                                     "(comm/cuda/cuda_world.cc:",
                                     line, ")"));
}

TEST(CudaErrorTest, CodesFollowWhatWentWrong) {
  EXPECT_EQ(CudaErrorCode(cudaErrorInvalidValue), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaErrorCode(cudaErrorInvalidResourceHandle), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaErrorCode(cudaErrorNoDevice), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CudaErrorCode(cudaErrorInsufficientDriver), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CudaErrorCode(cudaErrorStreamCaptureUnsupported),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudaErrorCode(cudaErrorIllegalAddress), absl::StatusCode::kInternal);
  EXPECT_EQ(CudaErrorCode(cudaErrorLaunchFailure), absl::StatusCode::kInternal);
  EXPECT_EQ(CudaErrorCode(cudaErrorUnknown), absl::StatusCode::kUnavailable);
}

// The macro returns from the caller with the status, once.
absl::Status Allocates(cudaError_t result) {
  CUDA_CALL(result);
  return absl::OkStatus();
}

TEST(CudaErrorTest, TheMacroReturnsTheFirstError) {
  EXPECT_OK(Allocates(cudaSuccess));
  const absl::Status s = Allocates(cudaErrorInvalidValue);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), MatchesRegex("result: cudaErrorInvalidValue: invalid argument "
                                       "\\(tests/comm/cuda_error_test.cc:[0-9]+\\)"));
}

#if JITPIPE_HAVE_NCCL
TEST(NcclErrorTest, NamesTheCallTheErrorAndTheLine) {
  EXPECT_OK(NCCL_STATUS(ncclSuccess, nullptr));
  const absl::Status s =
      NcclStatus(ncclInvalidArgument, nullptr, "ncclSend(buf, n, ncclFloat, 1, comm, stream)",
                 "/abs/comm/nccl/nccl_transport.cc", 42);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), MatchesRegex("ncclSend: invalid argument.* \\(comm/nccl/"
                                       "nccl_transport.cc:42\\)"));
  EXPECT_EQ(NcclErrorCode(ncclInvalidUsage), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(NcclErrorCode(ncclInternalError), absl::StatusCode::kInternal);
  EXPECT_EQ(NcclErrorCode(ncclUnhandledCudaError), absl::StatusCode::kUnavailable);
  EXPECT_EQ(NcclErrorCode(ncclSystemError), absl::StatusCode::kUnavailable);
  EXPECT_EQ(NcclErrorCode(ncclRemoteError), absl::StatusCode::kUnavailable);
}
#endif

}  // namespace
}  // namespace jitpipe::cuda_error_test
