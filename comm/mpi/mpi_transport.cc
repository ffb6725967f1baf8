// The Transport on MPI (contract: mpi_transport.h). Every operation is one
// MPI request in a table keyed by RequestId; Test() drives it with
// MPI_Test and finishes it (size check, averaging, staged output) on
// completion.
#include "comm/mpi/mpi_transport.h"

#include <climits>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "comm/mpi/mpi_error.h"
#include "comm/mpi/mpi_job.h"

namespace jitpipe {
namespace {

enum class OpKind { kSend, kRecv, kAllReduce, kReduceScatter };

struct Op {
  OpKind kind = OpKind::kSend;
  MPI_Request request = MPI_REQUEST_NULL;
  int peer = -1;       // point-to-point
  int group_size = 0;  // collectives
  OpInfo info;
  size_t recv_bytes = 0;                    // kRecv: the size expected
  absl::Span<float> average = {};           // kAverage: divided by group_size at the end
  std::vector<float> staged_output = {};    // reduce-scatter into its own input
  absl::Span<float> output = {};            // where staged_output goes at the end
  absl::Status retired = absl::OkStatus();  // set once an abort retired the op
};

// How long Abort() waits for a cancelled receive to be retired by MPI.
constexpr absl::Duration kCancelBound = absl::Seconds(1);

// "receive 1RECV_F3 from rank 0 (index 17)", as the in-process backend says.
std::string Describe(const Op& op) {
  std::string verb;
  std::string where;
  switch (op.kind) {
    case OpKind::kSend:
      verb = "send";
      where = absl::StrCat("to rank ", op.peer);
      break;
    case OpKind::kRecv:
      verb = "receive";
      where = absl::StrCat("from rank ", op.peer);
      break;
    case OpKind::kAllReduce:
      verb = "all-reduce";
      where = absl::StrCat("over ", op.group_size, " ranks");
      break;
    case OpKind::kReduceScatter:
      verb = "reduce-scatter";
      where = absl::StrCat("over ", op.group_size, " ranks");
      break;
  }
  return absl::StrCat(
      verb, op.info.action.empty() ? "" : " ", op.info.action, " ", where,
      op.info.program_index >= 0 ? absl::StrCat(" (index ", op.info.program_index, ")") : "");
}

absl::Status CheckCount(size_t count, absl::string_view unit, const Op& op) {
  if (count <= static_cast<size_t>(INT_MAX)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(Describe(op), ": ", count, " ", unit, " exceed MPI's count limit of ", INT_MAX));
}

class MpiTransport final : public Transport {
 public:
  explicit MpiTransport(MpiJob* job) : job_(job) {}
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  int rank() const override { return job_->rank(); }
  int size() const override { return job_->size(); }
  absl::StatusOr<RequestId> PostSend(int peer, uint64_t tag, absl::Span<const std::byte> bytes,
                                     const OpInfo& info) override;
  absl::StatusOr<RequestId> PostRecv(int peer, uint64_t tag, absl::Span<std::byte> bytes,
                                     const OpInfo& info) override;
  absl::StatusOr<RequestId> PostAllReduce(const Group& group, absl::Span<float> data, ReduceOp op,
                                          const OpInfo& info) override;
  absl::StatusOr<RequestId> PostReduceScatter(const Group& group, absl::Span<const float> input,
                                              absl::Span<float> output, ReduceOp op,
                                              const OpInfo& info) override;
  absl::StatusOr<bool> Test(RequestId request) override;
  absl::Status Wait(RequestId request, absl::Duration timeout) override;
  // Aborts the job (MpiJob::Abort) and retires this rank's pending
  // receives, so that MPI never writes into a buffer the caller frees next.
  void Abort(const std::string& reason) override;

 private:
  absl::Status CheckPeer(int peer, uint64_t tag, const Op& op) const;
  // Posts through `post` (the MPI call `call`, filling op.request) and files
  // the op.
  absl::StatusOr<RequestId> Post(Op op, absl::string_view call,
                                 absl::FunctionRef<int(MPI_Request*)> post);
  // Finishes a completed op: size check, averaging, staged output.
  static absl::Status Finish(Op& op, const MPI_Status& status);
  // After an abort: cancels a pending receive and waits (at most
  // kCancelBound) for MPI to let go of its buffer; frees a send (Open MPI
  // cannot cancel one; it completes in the background); leaves a collective
  // to MPI. Sets op.retired to Aborted with `abort`'s message.
  void Retire(Op& op, const absl::Status& abort) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  MpiJob* const job_;

  absl::Mutex mu_;  // ordered before the job's MPI lock
  RequestId last_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<RequestId, Op> ops_ ABSL_GUARDED_BY(mu_);
  // Staging copies of collectives an abort left to MPI (see Retire).
  std::vector<std::vector<float>> abandoned_ ABSL_GUARDED_BY(mu_);
};

absl::Status MpiTransport::CheckPeer(int peer, uint64_t tag, const Op& op) const {
  if (peer < 0 || peer >= size() || peer == rank()) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank(), ": invalid peer ", peer));
  }
  if (tag > static_cast<uint64_t>(job_->tag_ub())) {
    return absl::InvalidArgumentError(absl::StrCat(
        Describe(op), ": tag ", tag, " exceeds this MPI's MPI_TAG_UB ", job_->tag_ub()));
  }
  return absl::OkStatus();
}

absl::StatusOr<RequestId> MpiTransport::Post(Op op, absl::string_view call,
                                             absl::FunctionRef<int(MPI_Request*)> post) {
  RETURN_IF_ERROR(job_->AbortStatus());
  absl::Status posted =
      job_->Locked([&] { return MpiStatus(post(&op.request), call, __FILE__, __LINE__); });
  if (!posted.ok()) {
    return absl::Status(posted.code(), absl::StrCat(Describe(op), ": ", posted.message()));
  }
  absl::MutexLock lock(&mu_);
  const RequestId id = ++last_id_;
  ops_.emplace(id, std::move(op));
  return id;
}

absl::StatusOr<RequestId> MpiTransport::PostSend(int peer, uint64_t tag,
                                                 absl::Span<const std::byte> bytes,
                                                 const OpInfo& info) {
  Op op{.kind = OpKind::kSend, .peer = peer, .info = info};
  RETURN_IF_ERROR(CheckPeer(peer, tag, op));
  RETURN_IF_ERROR(CheckCount(bytes.size(), "bytes", op));
  return Post(std::move(op), "MPI_Isend", [&](MPI_Request* request) {
    return MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, peer,
                     static_cast<int>(tag), job_->p2p(), request);
  });
}

absl::StatusOr<RequestId> MpiTransport::PostRecv(int peer, uint64_t tag,
                                                 absl::Span<std::byte> bytes, const OpInfo& info) {
  Op op{.kind = OpKind::kRecv, .peer = peer, .info = info, .recv_bytes = bytes.size()};
  RETURN_IF_ERROR(CheckPeer(peer, tag, op));
  RETURN_IF_ERROR(CheckCount(bytes.size(), "bytes", op));
  return Post(std::move(op), "MPI_Irecv", [&](MPI_Request* request) {
    return MPI_Irecv(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, peer,
                     static_cast<int>(tag), job_->p2p(), request);
  });
}

absl::StatusOr<RequestId> MpiTransport::PostAllReduce(const Group& group, absl::Span<float> data,
                                                      ReduceOp reduce, const OpInfo& info) {
  ASSIGN_OR_RETURN(MPI_Comm comm, job_->GroupComm(group));
  const int members = static_cast<int>(group.ranks.size());
  Op op{.kind = OpKind::kAllReduce, .group_size = members, .info = info};
  if (reduce == ReduceOp::kAverage) op.average = data;
  RETURN_IF_ERROR(CheckCount(data.size(), "elements", op));
  return Post(std::move(op), "MPI_Iallreduce", [&](MPI_Request* request) {
    return MPI_Iallreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT,
                          MPI_SUM, comm, request);
  });
}

absl::StatusOr<RequestId> MpiTransport::PostReduceScatter(const Group& group,
                                                          absl::Span<const float> input,
                                                          absl::Span<float> output, ReduceOp reduce,
                                                          const OpInfo& info) {
  ASSIGN_OR_RETURN(MPI_Comm comm, job_->GroupComm(group));
  const size_t members = group.ranks.size();
  Op op{.kind = OpKind::kReduceScatter, .group_size = static_cast<int>(members), .info = info};
  if (input.size() != output.size() * members) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank(), ": ", Describe(op), ": the input holds ", input.size(),
        " elements; expected ", output.size() * members, " (", output.size(), " per member)"));
  }
  RETURN_IF_ERROR(CheckCount(output.size(), "elements", op));
  // MPI forbids overlapping send and receive buffers: receive into a copy.
  const bool overlap =
      output.data() < input.data() + input.size() && input.data() < output.data() + output.size();
  absl::Span<float> receive = output;
  if (overlap) {
    op.staged_output.resize(output.size());
    op.output = output;
    receive = absl::MakeSpan(op.staged_output);  // the vector's heap block moves with op
  }
  if (reduce == ReduceOp::kAverage) op.average = receive;
  return Post(std::move(op), "MPI_Ireduce_scatter_block", [&](MPI_Request* request) {
    return MPI_Ireduce_scatter_block(input.data(), receive.data(), static_cast<int>(receive.size()),
                                     MPI_FLOAT, MPI_SUM, comm, request);
  });
}

absl::Status MpiTransport::Finish(Op& op, const MPI_Status& status) {
  if (op.kind == OpKind::kRecv) {
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (static_cast<size_t>(count) != op.recv_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(Describe(op), " expects ", op.recv_bytes,
                                                     " bytes but the matching send has ", count));
    }
  }
  for (float& x : op.average) x /= static_cast<float>(op.group_size);
  if (!op.staged_output.empty()) {
    std::memcpy(op.output.data(), op.staged_output.data(), op.output.size() * sizeof(float));
  }
  return absl::OkStatus();
}

void MpiTransport::Retire(Op& op, const absl::Status& abort) {
  op.retired =
      absl::AbortedError(absl::StrCat(abort.message(), " (while waiting for ", Describe(op), ")"));
  if (op.request == MPI_REQUEST_NULL) return;
  switch (op.kind) {
    case OpKind::kRecv:
      job_->Locked([&] { return MPI_STATUS(MPI_Cancel(&op.request)); }).IgnoreError();
      job_
          ->PollUntil(
              [&]() -> absl::StatusOr<bool> {
                int done = 0;
                RETURN_IF_ERROR(job_->Locked(
                    [&] { return MPI_STATUS(MPI_Test(&op.request, &done, MPI_STATUS_IGNORE)); }));
                return done != 0;
              },
              absl::Now() + kCancelBound)
          .IgnoreError();
      [[fallthrough]];  // a receive MPI did not retire in time is freed like a send
    case OpKind::kSend:
      if (op.request != MPI_REQUEST_NULL) {
        job_->Locked([&] { return MPI_STATUS(MPI_Request_free(&op.request)); }).IgnoreError();
      }
      break;
    case OpKind::kAllReduce:
    case OpKind::kReduceScatter:
      // MPI can neither cancel nor free a nonblocking collective: it may
      // still write its output, so a staging copy lives as long as we do.
      if (!op.staged_output.empty()) abandoned_.push_back(std::move(op.staged_output));
      op.request = MPI_REQUEST_NULL;
      break;
  }
}

void MpiTransport::Abort(const std::string& reason) {
  job_->Abort(reason);
  const absl::Status abort = job_->AbortStatus();
  absl::MutexLock lock(&mu_);
  for (auto& [id, op] : ops_) {
    if (op.retired.ok()) Retire(op, abort);
  }
}

absl::StatusOr<bool> MpiTransport::Test(RequestId id) {
  absl::MutexLock lock(&mu_);
  auto it = ops_.find(id);
  if (it == ops_.end()) return absl::NotFoundError(absl::StrCat("unknown request ", id));
  Op& op = it->second;
  if (!op.retired.ok()) {
    absl::Status retired = op.retired;
    ops_.erase(it);
    return retired;
  }
  const absl::Status abort = job_->AbortStatus();
  int done = 0;
  MPI_Status status;
  absl::Status tested =
      job_->Locked([&] { return MPI_STATUS(MPI_Test(&op.request, &done, &status)); });
  if (!tested.ok()) {
    if (op.kind == OpKind::kRecv && tested.code() == absl::StatusCode::kInvalidArgument) {
      tested = absl::InvalidArgumentError(
          absl::StrCat(Describe(op), " expects ", op.recv_bytes,
                       " bytes but the matching send has more: ", tested.message()));
    }
    ops_.erase(it);
    return tested;
  }
  if (!done) {
    if (abort.ok()) return false;
    Retire(op, abort);
    absl::Status retired = op.retired;
    ops_.erase(it);
    return retired;
  }
  absl::Status finished = Finish(op, status);
  ops_.erase(it);
  if (!finished.ok()) return finished;
  return true;
}

absl::Status MpiTransport::Wait(RequestId id, absl::Duration timeout) {
  ASSIGN_OR_RETURN(bool done, job_->PollUntil([&] { return Test(id); }, absl::Now() + timeout));
  if (done) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  auto it = ops_.find(id);
  return absl::DeadlineExceededError(
      absl::StrCat("timed out after ", absl::FormatDuration(timeout), " waiting for ",
                   it == ops_.end() ? absl::StrCat("request ", id) : Describe(it->second)));
}

}  // namespace

std::unique_ptr<Transport> NewMpiTransport(MpiJob* job) {
  return std::make_unique<MpiTransport>(job);
}

}  // namespace jitpipe
