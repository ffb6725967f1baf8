#include "comm/mpi/mpi_job.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "comm/mpi/mpi_error.h"
#include "comm/world.h"

namespace jitpipe {
namespace {

absl::Status Dup(MPI_Comm* comm) {
  MPI_CALL(MPI_Comm_dup(MPI_COMM_WORLD, comm));
  MPI_CALL(MPI_Comm_set_errhandler(*comm, MPI_ERRORS_RETURN));
  return absl::OkStatus();
}

}  // namespace

MpiJob::MpiJob(int rank, int size, int tag_ub, PollPolicy poll)
    : rank_(rank), size_(size), tag_ub_(tag_ub), poll_(poll) {}

absl::StatusOr<std::unique_ptr<MpiJob>> MpiJob::Create(PollPolicy poll) {
  int rank = 0;
  int size = 0;
  MPI_CALL(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_CALL(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_CALL(MPI_Comm_size(MPI_COMM_WORLD, &size));
  void* attribute = nullptr;
  int found = 0;
  MPI_CALL(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &attribute, &found));
  const int tag_ub = found ? *static_cast<int*>(attribute) : 32767;  // MPI's guaranteed minimum
  std::unique_ptr<MpiJob> job(new MpiJob(rank, size, tag_ub, poll));
  RETURN_IF_ERROR(job->CreateCommunicators());
  return job;
}

absl::Status MpiJob::CreateCommunicators() {
  RETURN_IF_ERROR(Dup(&p2p_));
  RETURN_IF_ERROR(Dup(&world_));
  RETURN_IF_ERROR(Dup(&job_));
  RETURN_IF_ERROR(Dup(&control_));
  absl::MutexLock lock(&mu_);
  MPI_CALL(MPI_Irecv(notice_, kMaxReasonBytes, MPI_CHAR, MPI_ANY_SOURCE, kAbortTag, control_,
                     &notice_request_));
  return absl::OkStatus();
}

void MpiJob::Shutdown() {
  // Only the notice receive is ours to retire; MPI_Finalize tolerates the
  // rest (requests of a failed job are left to it, never cancelled: Open MPI
  // cannot cancel a send).
  absl::MutexLock lock(&mu_);
  if (notice_request_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&notice_request_);
    MPI_Request_free(&notice_request_);
  }
  for (MPI_Request& r : sent_notices_) {
    if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  }
}

absl::Status MpiJob::AddGroups(absl::Span<const Group> groups) {
  absl::MutexLock groups_lock(&groups_mu_);
  for (const Group& group : groups) {
    if (IsImplicitGroup(group, size_) || groups_.contains(group.ranks)) continue;
    const int index = group.IndexOf(rank_);
    MPI_Comm comm = MPI_COMM_NULL;
    // Blocking, but every process has arrived (the caller's agreement).
    const absl::Status split = Locked([&]() -> absl::Status {
      MPI_CALL(MPI_Comm_split(MPI_COMM_WORLD, index < 0 ? MPI_UNDEFINED : 0, std::max(index, 0),
                              &comm));
      if (comm != MPI_COMM_NULL) MPI_CALL(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
      return absl::OkStatus();
    });
    if (!split.ok()) return split;
    groups_.emplace(group.ranks, comm);
  }
  return absl::OkStatus();
}

absl::StatusOr<MPI_Comm> MpiJob::GroupComm(const Group& group) const {
  if (group.IndexOf(rank_) < 0) return NotAMemberError(rank_, group);
  if (group.ranks.size() == 1) return MPI_COMM_SELF;
  if (IsImplicitGroup(group, size_)) return world_;
  absl::MutexLock lock(&groups_mu_);
  auto it = groups_.find(group.ranks);
  if (it == groups_.end()) return NotRequestedError(rank_, group);
  return it->second;
}

absl::Status MpiJob::Locked(absl::FunctionRef<absl::Status()> call) {
  absl::MutexLock lock(&mu_);
  return call();
}

absl::Status MpiJob::PollNoticeLocked() {
  if (aborted_) return absl::AbortedError(abort_message_);
  if (notice_request_ == MPI_REQUEST_NULL) return absl::OkStatus();
  int arrived = 0;
  MPI_Status status;
  MPI_CALL(MPI_Test(&notice_request_, &arrived, &status));
  if (!arrived) return absl::OkStatus();
  int length = 0;
  MPI_Get_count(&status, MPI_CHAR, &length);
  aborted_ = true;
  abort_message_ =
      RankFailed(status.MPI_SOURCE, absl::string_view(notice_, static_cast<size_t>(length)));
  return absl::AbortedError(abort_message_);
}

absl::Status MpiJob::AbortStatus() {
  absl::MutexLock lock(&mu_);
  absl::Status status = PollNoticeLocked();
  // An MPI error while polling the notice says nothing about the job.
  return status.code() == absl::StatusCode::kAborted ? status : absl::OkStatus();
}

void MpiJob::Abort(absl::string_view reason) {
  absl::MutexLock lock(&mu_);
  PollNoticeLocked().IgnoreError();  // a notice that arrived first wins
  if (aborted_) return;
  aborted_ = true;
  abort_message_ = RankFailed(rank_, reason);
  sent_reason_ = std::string(reason.substr(0, kMaxReasonBytes));
  // Nonblocking and never waited for: a notice to a dead process must not
  // block the abort. Small messages go eagerly, so the others get them.
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    MPI_Request request = MPI_REQUEST_NULL;
    if (MPI_Isend(sent_reason_.data(), static_cast<int>(sent_reason_.size()), MPI_CHAR, peer,
                  kAbortTag, control_, &request) == MPI_SUCCESS) {
      sent_notices_.push_back(request);
    }
  }
}

void MpiJob::AbortLocally(absl::string_view message) {
  absl::MutexLock lock(&mu_);
  if (aborted_) return;
  aborted_ = true;
  abort_message_ = std::string(message);
}

absl::StatusOr<bool> MpiJob::PollUntil(absl::FunctionRef<absl::StatusOr<bool>()> poll,
                                         absl::Time deadline) const {
  for (int polls = 0;; ++polls) {
    absl::StatusOr<bool> done = poll();
    if (!done.ok() || *done) return done;
    if (absl::Now() >= deadline) return false;
    if (polls < poll_.spin_polls) {
      std::this_thread::yield();
    } else {
      absl::SleepFor(std::min(poll_.sleep, std::max(deadline - absl::Now(), absl::ZeroDuration())));
    }
  }
}

absl::Status MpiJob::Wait(MPI_Request* request, MPI_Status* status, absl::Time deadline,
                            absl::Duration timeout, absl::string_view what, bool ignore_abort) {
  MPI_Status ignored;
  MPI_Status* out = status == nullptr ? &ignored : status;
  absl::StatusOr<bool> done = PollUntil(
      [&]() -> absl::StatusOr<bool> {
        // Tested before the abort is looked at: an operation that completed
        // is reported complete even when the job has aborted since.
        int flag = 0;
        RETURN_IF_ERROR(Locked([&] { return MPI_STATUS(MPI_Test(request, &flag, out)); }));
        if (flag == 0 && !ignore_abort) RETURN_IF_ERROR(AbortStatus());
        return flag != 0;
      },
      deadline);
  if (!done.ok()) {
    if (done.status().code() != absl::StatusCode::kAborted) return done.status();
    return absl::AbortedError(
        absl::StrCat(done.status().message(), " (while waiting for ", what, ")"));
  }
  if (!*done) {
    return absl::DeadlineExceededError(
        absl::StrCat("timed out after ", absl::FormatDuration(timeout), " waiting for ", what));
  }
  return absl::OkStatus();
}

}  // namespace jitpipe
