// One process's share of an MPI job: the communicators, the one lock every
// MPI call of the process is made under, the job's abort state and the
// polling loop every bounded wait uses. The transport (mpi_transport.cc) and
// the world (mpi_world.cc) are built on it; the in-process backend's
// counterpart is its fabric (comm/inproc/inproc_transport.h).
//
// Internal to comm/mpi: this header includes mpi.h.
//
// Communicators (each a duplicate or split of MPI_COMM_WORLD, each with
// MPI_ERRORS_RETURN), so that no two kinds of traffic can match each other:
//   p2p      the transport's sends and receives (tags are the runtime's)
//   groups   one per requested group with this rank (AddGroups:
//            MPI_Comm_split, key = the rank's index in the group, so that
//            the communicator's rank is the group index)
//   world    collectives over the whole world
//   job      the world's job-level collectives (barrier, broadcast, gather)
//   control  abort notices and the payloads collected after a failure
//
// Locking: MPI_THREAD_SERIALIZED is all this needs. mu_ is held only for
// the duration of nonblocking MPI calls (post, test, probe, cancel), never
// while a thread sleeps or waits -- except AddGroups' splits, made at setup
// once every process has arrived.
//
// Thread safety: all methods may be called from any thread.
#ifndef JITPIPE_COMM_MPI_MPI_JOB_H_
#define JITPIPE_COMM_MPI_MPI_JOB_H_

#include <mpi.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/transport.h"

namespace jitpipe {

// How a waiting thread polls: it yields between the first `spin_polls`
// polls, then sleeps `sleep` between polls (oversubscribed ranks must not
// busy-spin; ../shared/reference/ecosystem.md 4.3).
struct PollPolicy {
  int spin_polls = 64;
  absl::Duration sleep = absl::Microseconds(50);
};

class MpiJob {
 public:
  // Tags on the control communicator.
  static constexpr int kAbortTag = 1;
  static constexpr int kPayloadTag = 2;
  // The longest abort reason a notice carries (longer ones are cut).
  static constexpr int kMaxReasonBytes = 1024;

  // REQUIRES: MPI is initialised. Creates the communicators: collective
  // over MPI_COMM_WORLD, so every process calls it once, in the same order.
  // Errors: the MPI call's status.
  static absl::StatusOr<std::unique_ptr<MpiJob>> Create(PollPolicy poll);

  MpiJob(const MpiJob&) = delete;
  MpiJob& operator=(const MpiJob&) = delete;
  ~MpiJob() = default;  // makes no MPI call: MPI may be finalised by then

  // Retires the world's own requests (the abort-notice receive, the notices
  // sent). REQUIRES: called once, right before MPI_Finalize or MPI_Abort.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  int rank() const { return rank_; }
  int size() const { return size_; }
  int tag_ub() const { return tag_ub_; }

  MPI_Comm p2p() const { return p2p_; }
  MPI_Comm job() const { return job_; }
  MPI_Comm control() const { return control_; }

  // Creates a communicator for each of `groups` not created before that
  // has a rank in the world (MPI_Comm_split over MPI_COMM_WORLD; processes
  // outside a group take part with MPI_UNDEFINED). REQUIRES: every process
  // calls it with the same list (MpiWorld::CreateGroups checks that first),
  // CheckGroups(groups) is OK. Errors: the MPI call's status.
  absl::Status AddGroups(absl::Span<const Group> groups) ABSL_LOCKS_EXCLUDED(mu_, groups_mu_);
  // The communicator for a collective over `group`: a requested group's,
  // the whole world's in rank order, or this rank alone (MPI_COMM_SELF).
  // Errors: InvalidArgument when this rank is not a member or the group was
  // not requested (NotAMemberError, NotRequestedError).
  absl::StatusOr<MPI_Comm> GroupComm(const Group& group) const ABSL_LOCKS_EXCLUDED(groups_mu_);

  // Runs `call` with the MPI lock held and returns its status. Every MPI
  // call of the process (after MPI_Init) goes through here.
  absl::Status Locked(absl::FunctionRef<absl::Status()> call) ABSL_LOCKS_EXCLUDED(mu_);

  // OK until the job is aborted; then Aborted with the first cause ("rank 2
  // failed: <reason>"). Polls for an abort notice from another process.
  absl::Status AbortStatus() ABSL_LOCKS_EXCLUDED(mu_);
  bool aborted() ABSL_LOCKS_EXCLUDED(mu_) { return !AbortStatus().ok(); }

  // Aborts the job: this process's operations fail from now on with
  // Aborted "rank <this rank> failed: <reason>", and every other process is
  // sent a notice saying so (the first abort wins; later calls do nothing).
  void Abort(absl::string_view reason) ABSL_LOCKS_EXCLUDED(mu_);
  // Aborts this process only, with `message` as the cause (no notices:
  // used when the launcher is already ending the job).
  void AbortLocally(absl::string_view message) ABSL_LOCKS_EXCLUDED(mu_);

  // Calls `poll` until it returns true or an error (returned as is), or
  // `deadline` passes (returns false), sleeping per the poll policy in
  // between. `poll` runs without the lock; it takes it through Locked().
  absl::StatusOr<bool> PollUntil(absl::FunctionRef<absl::StatusOr<bool>()> poll,
                                 absl::Time deadline) const;

  // Waits for `request` (posted on one of the communicators) until it
  // completes, `deadline` passes (DeadlineExceeded "timed out after <d>
  // waiting for <what>") or, unless ignore_abort, the job aborts (Aborted;
  // the request is then left to MPI). `status` may be null.
  absl::Status Wait(MPI_Request* request, MPI_Status* status, absl::Time deadline,
                    absl::Duration timeout, absl::string_view what, bool ignore_abort);

 private:
  MpiJob(int rank, int size, int tag_ub, PollPolicy poll);
  absl::Status CreateCommunicators();
  absl::Status PollNoticeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Const after Create().
  const int rank_;
  const int size_;
  const int tag_ub_;
  const PollPolicy poll_;
  MPI_Comm p2p_ = MPI_COMM_NULL;
  MPI_Comm world_ = MPI_COMM_NULL;
  MPI_Comm job_ = MPI_COMM_NULL;
  MPI_Comm control_ = MPI_COMM_NULL;

  mutable absl::Mutex groups_mu_;
  // Every requested group, with its communicator (MPI_COMM_NULL where this
  // rank is not a member).
  std::map<std::vector<int>, MPI_Comm> groups_ ABSL_GUARDED_BY(groups_mu_);

  absl::Mutex mu_;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  std::string abort_message_ ABSL_GUARDED_BY(mu_);
  // The receive posted for the first abort notice from any process.
  MPI_Request notice_request_ ABSL_GUARDED_BY(mu_) = MPI_REQUEST_NULL;
  char notice_[kMaxReasonBytes] ABSL_GUARDED_BY(mu_) = {};
  // The notices this process sent, and their text (valid until finalize).
  std::string sent_reason_ ABSL_GUARDED_BY(mu_);
  std::vector<MPI_Request> sent_notices_ ABSL_GUARDED_BY(mu_);
};

}  // namespace jitpipe

#endif  // JITPIPE_COMM_MPI_MPI_JOB_H_
